"""The bounded field types of the ConcurrencyExperiment spec (and of a schedule's template),
each checked here with a message that names what to change and, through its schema, by the
apiserver (the CRD is generated from these); and the wording of a broken rule
(`describe`)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from cxlab import placement
from cxlab_contract import runner_contract
from cxlab_contract.durations import DURATION_PATTERN, format_duration, parse_duration

# Limits that let the apiserver bound the cost of the CRD's validation rules.
MAX_LIST_ITEMS = 32

# Every number and duration is bounded (tests/test_bounds.py walks the schema for any that
# is not). Those the runners take as flags come from the runner contract, which both runners
# enforce with the same numbers; the rest are Kubernetes' or this project's own.
LIMITS = runner_contract().limits
# The largest machines sold have a few hundred cores; the static CPU manager pins whole ones.
MAX_CPU = 256
# The Python runner alone peaks near 40 MiB: below this no trial container starts.
MIN_MEMORY, MAX_MEMORY = "64Mi", "1Ti"
# Zero would stop every trial at once; a day is past any trial worth measuring, and inside
# what a Pod's activeDeadlineSeconds and Go's time.Duration carry.
MIN_TRIAL_TIMEOUT, MAX_TRIAL_TIMEOUT = "1s", "24h"
# A wait for capacity longer than a week is a forgotten experiment.
MIN_QUEUE_TIMEOUT, MAX_QUEUE_TIMEOUT = "1s", "168h"
# Priorities of waiting experiments (queue order); a waiting one gains one per 5 minutes.
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
# What a Job's ttlSecondsAfterFinished (an int32) can hold.
MAX_TTL_SECONDS = 2**31 - 1
# A duration longer than this is a typo ("1000000000000h"): the pattern alone has no end.
DURATION_MAX_LENGTH = 32
# An image reference: [registry[:port]/]path[:tag][@digest] (the OCI distribution grammar,
# as Docker's reference package reads it; no scheme, no spaces, lower-case path).
IMAGE_MAX_LENGTH = 512
_IMAGE = re.compile(
    r"^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
    r"(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
# Label keys and values of spec.placement.nodeSelector, as Kubernetes validates them.
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)

# Spelled out for the type checker and the CRD's enums; the runner contract is the source, and
# importing this module fails if they ever differ.
Model = Literal["sequential", "threads", "processes", "gevent", "asyncio", "locust", "goroutines"]
WorkloadType = Literal["sleep", "http", "cpu", "hold"]
Connection = Literal["fresh", "reuse"]
ArrivalProcess = Literal["uniform", "poisson"]
OnBusy = Literal["queue", "drop"]
for _literal, _contract in (
    (Model, runner_contract().models),
    (WorkloadType, runner_contract().workloads),
    (Connection, runner_contract().connections),
    (ArrivalProcess, runner_contract().arrival_processes),
    (OnBusy, runner_contract().on_busy),
):
    if get_args(_literal) != _contract:
        raise ImportError(
            f"spec.py {get_args(_literal)} differ from the runner contract {_contract}"
        )

# Kubernetes' suffixes (k is decimal and lower-case; there is no K).
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_QUANTITY_FACTOR = {
    None: 1,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
}
# Kubernetes object names: DNS-1123 labels, short, since trial Pods are named after them.
NAME_MAX_LENGTH = 40
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_NAME = re.compile(NAME_PATTERN)


class SpecError(Exception):
    """A spec that cannot run, with one line per broken rule: "field: rule"."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def memory_bytes(quantity: str) -> int:
    """Bytes in a Kubernetes memory quantity such as 512Mi or 1G."""
    match = _QUANTITY.match(quantity)
    if not match:
        raise ValueError(f"{quantity!r} is not a memory quantity: use for example 256Mi or 1Gi")
    return int(float(match.group(1)) * _QUANTITY_FACTOR[match.group(2)])


def _cel(rule: str, message: str) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


def between(low: int, high: int) -> Any:
    """A whole number in [low, high]; strict: "5" and 5.0 are not numbers here, as for the
    apiserver."""
    return Field(strict=True, ge=low, le=high)


def _limit(flag: str) -> Any:
    """A runner flag's bounds, from the runner contract."""
    return between(LIMITS[flag].min, LIMITS[flag].max)


def _duration_field(low: str, high: str) -> Any:
    """A Go-style duration in [low, high]. The CRD checks the pattern, the length and (CEL's
    duration(), Go's own parser) the bounds; _duration_check says the same in words."""
    return Field(
        strict=True,
        max_length=DURATION_MAX_LENGTH,
        json_schema_extra={
            "pattern": DURATION_PATTERN,
            **_cel(
                f"duration(self) >= duration('{low}') && duration(self) <= duration('{high}')",
                f"must be a duration between {low} and {high}",
            ),
        },
    )


def _duration_check(low: str, high: str) -> AfterValidator:
    least, most = parse_duration(low), parse_duration(high)

    def check(text: str) -> str:
        seconds = parse_duration(text)
        if not least <= seconds <= most:
            shown = format_duration(seconds) if seconds < 1e9 else text
            raise ValueError(f"must be between {low} and {high}, got {shown}")
        return text

    return AfterValidator(check)


RTT, HOLD = LIMITS["rtt"], LIMITS["hold"]
Tasks = Annotated[int, _limit("tasks")]
Workers = Annotated[int, _limit("workers")]
Iterations = Annotated[int, _limit("iterations")]
Gomaxprocs = Annotated[int, _limit("gomaxprocs")]
ResponseBytes = Annotated[int, _limit("responseBytes")]
Rtt = Annotated[str, _duration_field(RTT.min, RTT.max), _duration_check(RTT.min, RTT.max)]
Hold = Annotated[str, _duration_field(HOLD.min, HOLD.max), _duration_check(HOLD.min, HOLD.max)]
TrialTimeout = Annotated[
    str,
    _duration_field(MIN_TRIAL_TIMEOUT, MAX_TRIAL_TIMEOUT),
    _duration_check(MIN_TRIAL_TIMEOUT, MAX_TRIAL_TIMEOUT),
]
QueueTimeout = Annotated[
    str,
    _duration_field(MIN_QUEUE_TIMEOUT, MAX_QUEUE_TIMEOUT),
    _duration_check(MIN_QUEUE_TIMEOUT, MAX_QUEUE_TIMEOUT),
]
Priority = Annotated[int, between(MIN_PRIORITY, MAX_PRIORITY)]
# A Kueue LocalQueue's name: a Kubernetes object name, and a label value on trial Pods.
QueueName = Annotated[
    str, Field(strict=True, min_length=1, max_length=63, pattern=LABEL_VALUE_PATTERN)
]
# Kubernetes' smallest CPU unit is the millicore.
MIN_CPU = 0.001


def _cpu_number(value: Any) -> Any:
    """One message for a string or a bool, not one per member of the int | float union."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number of CPUs (2, or 0.5 for half a CPU), got {value!r}")
    return value


def _check_cpu(value: float) -> float:
    if not MIN_CPU <= value <= MAX_CPU:
        raise ValueError(f"must be between {MIN_CPU} and {MAX_CPU}, got {value}")
    if round(value, 3) != value:
        raise ValueError(f"{value} is finer than a millicore: use at most 3 decimals")
    return value


# Whole CPUs (an int) are pinned; a fraction (0.5) is a share of the node's shared pool.
Cpu = Annotated[
    StrictInt | StrictFloat,
    BeforeValidator(_cpu_number),
    AfterValidator(_check_cpu),
    WithJsonSchema({"type": "number", "minimum": MIN_CPU, "maximum": MAX_CPU}),
]
Pods = Annotated[int, _limit("pods")]


def _limited_duration(flag: str) -> Any:
    low, high = LIMITS[flag].min, LIMITS[flag].max
    return Annotated[str, _duration_field(low, high), _duration_check(low, high)]


# Duration runs (workloads/CONTRACT.md, Duration runs): the runner contract's bounds.
RunDuration = _limited_duration("duration")
StageDuration = _limited_duration("stage-duration")
Warmup = _limited_duration("warmup")
MaxLag = _limited_duration("max-lag")
ArrivalRate = Annotated[
    StrictInt | StrictFloat,
    Field(ge=LIMITS["rate"].min, le=LIMITS["rate"].max),
    WithJsonSchema(
        {"type": "number", "minimum": LIMITS["rate"].min, "maximum": LIMITS["rate"].max}
    ),
]
Seed = Annotated[int, _limit("seed")]
Count = Annotated[int, between(1, MAX_LIST_ITEMS)]  # repetitions, parallelism
TtlSeconds = Annotated[int, between(0, MAX_TTL_SECONDS)]
# A latency objective: a millisecond is below any RTT worth planning for, an hour past any.
MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE = "1ms", "1h"
LatencyObjective = Annotated[
    str,
    _duration_field(MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE),
    _duration_check(MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE),
]
# A billion tasks a second is past every service; the bound keeps the arithmetic finite.
MAX_TARGET_RATE = 1e9


def _number(low: float, high: float) -> Any:
    """A number (integer or decimal, as YAML writes either) in [low, high]."""
    return Annotated[
        StrictInt | StrictFloat,
        Field(ge=low, le=high),
        WithJsonSchema({"type": "number", "minimum": low, "maximum": high}),
    ]


# Objectives (spec.objectives): a share (failures, efficiency) is 0 to 1; a throughput as
# small as a runner issues and as large as a capacity target; a CPU time or start skew from a
# microsecond (the clocks' grain) to an hour.
Share = _number(0, 1)
Throughput = _number(0.001, MAX_TARGET_RATE)
MIN_OBJECTIVE_TIME, MAX_OBJECTIVE_TIME = "1us", "1h"
ObjectiveTime = Annotated[
    str,
    _duration_field(MIN_OBJECTIVE_TIME, MAX_OBJECTIVE_TIME),
    _duration_check(MIN_OBJECTIVE_TIME, MAX_OBJECTIVE_TIME),
]
DroppedCount = Annotated[int, between(0, LIMITS["tasks"].max)]
ObjectiveName = Annotated[
    str, Field(strict=True, min_length=1, max_length=63, pattern=LABEL_VALUE_PATTERN)
]


def _quantity_check(low: str, high: str) -> AfterValidator:
    def check(text: str) -> str:
        size = memory_bytes(text)
        if not memory_bytes(low) <= size <= memory_bytes(high):
            raise ValueError(f"must be between {low} and {high}, got {text}")
        return text

    return AfterValidator(check)


def _check_image(text: str) -> str:
    if not _IMAGE.match(text):
        raise ValueError(
            f"{text!r} is not an image reference: use [registry/]repository[:tag][@digest], "
            f"for example cxlab.dev/runner:dev"
        )
    return text


def _quantity(low: str, high: str) -> Any:
    """A memory quantity in [low, high]. The patterns only go into the CRD schema; here the
    validator gives the friendlier message."""
    return Annotated[
        str,
        Field(
            strict=True,
            max_length=DURATION_MAX_LENGTH,
            json_schema_extra={
                "pattern": _QUANTITY.pattern,
                **_cel(
                    f"!isQuantity(self) || (quantity(self).compareTo(quantity('{low}')) >= 0"
                    f" && quantity(self).compareTo(quantity('{high}')) <= 0)",
                    f"must be between {low} and {high}",
                ),
            },
        ),
        _quantity_check(low, high),
    ]


Quantity = _quantity(MIN_MEMORY, MAX_MEMORY)
# An objective's peak RSS: from a MiB, below any runner.
ObjectiveMemory = _quantity("1Mi", MAX_MEMORY)
Image = Annotated[
    str,
    Field(
        strict=True,
        min_length=1,
        max_length=IMAGE_MAX_LENGTH,
        json_schema_extra={"pattern": _IMAGE.pattern},
    ),
    AfterValidator(_check_image),
]
LabelKey = Annotated[str, Field(strict=True, max_length=317, pattern=LABEL_KEY_PATTERN)]
LabelValue = Annotated[str, Field(strict=True, max_length=63, pattern=LABEL_VALUE_PATTERN)]


class SchemaProblems(ValueError):
    """A field that breaks Kubernetes' schema, with every place below it that does:
    (path below the field, message), reported as one line each."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{where}: {message}" for where, message in problems))
        self.problems = problems


def _kubernetes_check(role: str, many: bool) -> AfterValidator:
    """Kubernetes' own schema of a Pod field (cxlab.placement), checked here as the CRD,
    which embeds it, has the apiserver check it."""

    def check(value: Any) -> Any:
        items = enumerate(value) if many else [(None, value)]
        broken = [
            (f"{'' if index is None else f'[{index}]'}{where}", message + " (as in a Pod's spec)")
            for index, item in items
            for where, message in placement.problems(role, item)
        ]
        if broken:
            raise SchemaProblems(broken)
        return value

    return AfterValidator(check)


_SCHEMAS = placement.placement_schemas()
Tolerations = Annotated[
    list[dict[str, Any]],
    Field(max_length=MAX_LIST_ITEMS),
    WithJsonSchema({"type": "array", "maxItems": MAX_LIST_ITEMS, "items": _SCHEMAS["toleration"]}),
    _kubernetes_check("toleration", many=True),
]
Affinity = Annotated[
    dict[str, Any], WithJsonSchema(_SCHEMAS["affinity"]), _kubernetes_check("affinity", False)
]


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        # No coercion ("yes" is no boolean, "5" no number): the apiserver refuses them too.
        strict=True,
        # Field docstrings become the CRD's descriptions (kubectl explain).
        use_attribute_docstrings=True,
    )


def unique(values: list[Any], what: str) -> None:
    seen = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} {value!r} is listed twice")
        seen.add(value)


def no_repeats(what: str) -> AfterValidator:
    """A list field's own check, so the error names the list (spec.models[0].workers) as the
    CRD's rule on that list does."""

    def check(values: list[Any]) -> list[Any]:
        unique(values, what)
        return values

    return AfterValidator(check)


# Errors where the rejected value helps the user find the line to fix.
_SHOW_INPUT = (
    "literal_error", "greater_than_equal", "greater_than", "less_than_equal", "less_than",
    "int_type", "bool_type", "float_type", "string_type", "string_pattern_mismatch",
    "string_too_long", "string_too_short",
)  # fmt: skip
# What a pattern means, instead of the regular expression.
_PATTERN_MEANING = {
    LABEL_KEY_PATTERN: "is not a label key: [DNS-subdomain prefix/]name, the name at most 63 "
    "letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    LABEL_VALUE_PATTERN: "is not a label value: at most 63 letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit",
    _NAME.pattern: "is not a DNS label: lower-case letters, digits and '-', starting and "
    "ending with a letter or digit",
}


def explain_pattern(pattern: str, meaning: str) -> None:
    """What a pattern of another module's field means, for describe()."""
    _PATTERN_MEANING[pattern] = meaning


def describe(error: ErrorDetails) -> list[str]:
    """One line per problem, "field: what is wrong (got value)"."""
    where, key = "", None
    for part in error["loc"]:
        if isinstance(part, int):
            where += f"[{part}]"
        elif part.startswith(("function-after", "literal")) or part in ("str", "int"):
            continue  # pydantic's internal validator names say nothing to a user
        elif part == "[key]":
            # A map's key is wrong: name the map, and the key in the message.
            where, _, key = where.rpartition(".")
        else:
            where += f".{part}" if where else part
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, SchemaProblems):
        return [f"{where}{below}: {message}" for below, message in cause.problems]
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "string_pattern_mismatch":
        pattern = (error.get("ctx") or {}).get("pattern", "")
        message = _PATTERN_MEANING.get(pattern, message)
    if key is not None:
        message = f"key {key!r} {message}"
    elif error["type"] in _SHOW_INPUT:
        shown = repr(error["input"])
        message += f" (got {shown if len(shown) <= 80 else shown[:77] + '...'})"
    elif error["type"] == "extra_forbidden":
        message = "is not a field of ConcurrencyExperiment (check the spelling)"
    return [f"{where or 'document'}: {message}"]
