"""The bounded field types of the ConcurrencyExperiment spec (and of a schedule's template),
each checked here with a message that names what to change and, through its schema, by the
apiserver (the CRD is generated from these); and the wording of a broken rule
(`describe`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails, PydanticKnownError, core_schema

from cxlab.rules import Check, Rule, RuleBroken, check_rules, schema_rules
from cxlab_contract import runner_contract
from cxlab_contract.durations import DURATION_PATTERN, parse_duration

# Limits that let the apiserver bound the cost of the CRD's validation rules.
MAX_LIST_ITEMS = 32

# Every number and duration is bounded (tests/test_crd_bounds.py walks the schema for any that
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

# A Kubernetes quantity, as resource.Quantity reads one: a decimal number, then a binary (Ki ... Ei)
# or decimal (m, k, M ... E) suffix or a decimal exponent (1e3). k is lower-case; there is no K.
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
_FACTOR = {
    None: Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18), "Ki": Decimal(2**10), "Mi": Decimal(2**20),
    "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}  # fmt: skip
# Kubernetes object names: DNS-1123 labels, short, since trial Pods are named after them.
NAME_MAX_LENGTH = 40
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_NAME = re.compile(NAME_PATTERN)


def name_rules(longest: int, why: str) -> tuple[Rule, Rule]:
    """A resource's rules on metadata.name: short, since what it creates is named after it,
    and a DNS label (names of custom resources may hold dots; a Pod's labels and its hostname
    may not)."""
    return (
        Rule(
            f"metadata.name may have at most {longest} characters: {why}",
            holds=lambda r: len(r.metadata.name) <= longest,
            cel=f"size(self.metadata.name) <= {longest}",
            field="metadata.name",
            valid={"metadata": {"name": "n" * longest}},
            invalid={"metadata": {"name": "n" * (longest + 1)}},
        ),
        Rule(
            "metadata.name must be a DNS label: lower-case letters, digits and '-', starting "
            "and ending with a letter or digit",
            holds=lambda r: _NAME.match(r.metadata.name) is not None,
            cel=f"self.metadata.name.matches('{NAME_PATTERN}')",
            field="metadata.name",
            valid={"metadata": {"name": "rtt-sweep-2"}},
            invalid={"metadata": {"name": "rtt.sweep"}},
        ),
    )


class SpecError(Exception):
    """A spec that cannot run, with one line per broken rule: "field: rule"."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def quantity(text: str | int | float) -> Decimal:
    """A Kubernetes quantity ("2", "1950m", "24386112Ki", "1e3", "1Pi") as a number."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a quantity: use for example 256Mi or 1Gi")
    try:
        number, suffix = Decimal(match.group(1)), match.group(2)
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a quantity: use for example 256Mi or 1Gi") from None
    if suffix and suffix[0] in "eE" and len(suffix) > 1:  # an exponent; E alone is exa
        return number * Decimal(10) ** int(suffix[1:])
    return number * _FACTOR[suffix]


def memory_bytes(text: str) -> int:
    """Bytes in a Kubernetes memory quantity such as 512Mi or 1G (a fraction of a byte rounds
    up, as Kubernetes' Quantity.Value does)."""
    return math.ceil(quantity(text))


def between(low: int, high: int) -> Any:
    """A whole number in [low, high]; strict: "5" and 5.0 are not numbers here, as for the
    apiserver."""
    return Field(strict=True, ge=low, le=high)


def _limit(flag: str) -> Any:
    """A runner flag's bounds, from the runner contract."""
    return between(LIMITS[flag].min, LIMITS[flag].max)


@dataclass(frozen=True)
class Number:
    """A number (an integer or a decimal, as YAML writes either, kept as written) in
    [low, high] (above_low, below_high: the bound itself excluded), for a `float` field:
    one message for what is no number (a string, a bool) or no finite one (YAML's .nan and
    .inf), not one per member of an int | float union nor a bound's "(got nan)"."""

    low: float
    high: float
    above_low: bool = False
    below_high: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._validate)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        low = "exclusiveMinimum" if self.above_low else "minimum"
        high = "exclusiveMaximum" if self.below_high else "maximum"
        return {"type": "number", low: self.low, high: self.high}

    def _validate(self, value: Any) -> int | float:
        between = f"between {self.low:g} and {self.high:g}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number {between}, got {value!r}")
        if math.isnan(value):
            raise ValueError(f"is not a number (NaN): give a number {between}")
        if math.isinf(value):
            raise ValueError(f"must be a finite number {between}, got {value}")
        # pydantic's own errors, so they read as every other bound does
        if self.above_low and value <= self.low:
            raise PydanticKnownError("greater_than", {"gt": self.low})
        if value < self.low:
            raise PydanticKnownError("greater_than_equal", {"ge": self.low})
        if self.below_high and value >= self.high:
            raise PydanticKnownError("less_than", {"lt": self.high})
        if value > self.high:
            raise PydanticKnownError("less_than_equal", {"le": self.high})
        return value


def _over(text: str) -> str:
    """A duration a millisecond past `text` (Go's grammar adds the parts up)."""
    return f"{text}1ms" if text != "0s" else "1ms"


# A Go-style duration: the CRD checks its pattern and length in the schema, its bounds with
# CEL's duration() (Go's own parser); cxlab reads it with the same grammar
# (cxlab_contract.durations).
DURATION = Field(
    strict=True, max_length=DURATION_MAX_LENGTH, json_schema_extra={"pattern": DURATION_PATTERN}
)


def duration(low: str, high: str, valid: str | None = None) -> Check:
    """A duration's bounds, [low, high], echoing the value as written. Its cases try the bound
    `high` (or `valid`, where another rule keeps the field below it) and a millisecond past."""
    least, most = parse_duration(low), parse_duration(high)
    return Check(
        f"must be a duration between {low} and {high}",
        holds=lambda text: least <= parse_duration(text) <= most,
        cel=f"duration(self) >= duration('{low}') && duration(self) <= duration('{high}')",
        found=lambda text: f"got {text}",
        valid=valid or high,
        invalid=_over(high),
    )


RTT, HOLD = LIMITS["rtt"], LIMITS["hold"]
Tasks = Annotated[int, _limit("tasks")]
Workers = Annotated[int, _limit("workers")]
Iterations = Annotated[int, _limit("iterations")]
Gomaxprocs = Annotated[int, _limit("gomaxprocs")]
ResponseBytes = Annotated[int, _limit("responseBytes")]
Rtt = Annotated[str, DURATION, duration(RTT.min, RTT.max)]
Hold = Annotated[str, DURATION, duration(HOLD.min, HOLD.max)]
TrialTimeout = Annotated[str, DURATION, duration(MIN_TRIAL_TIMEOUT, MAX_TRIAL_TIMEOUT)]
QueueTimeout = Annotated[str, DURATION, duration(MIN_QUEUE_TIMEOUT, MAX_QUEUE_TIMEOUT)]
Priority = Annotated[int, between(MIN_PRIORITY, MAX_PRIORITY)]
# A Kueue LocalQueue's name: a Kubernetes object name, and a label value on trial Pods.
QueueName = Annotated[
    str, Field(strict=True, min_length=1, max_length=63, pattern=LABEL_VALUE_PATTERN)
]
# Kubernetes' smallest CPU unit is the millicore.
MIN_CPU = 0.001


def _millicores(value: float) -> bool:
    return round(value, 3) == value


# Whole CPUs (an int) are pinned; a fraction (0.5) is a share of the node's shared pool.
Cpu = Annotated[
    float,
    Number(MIN_CPU, MAX_CPU),
    Check(
        "is finer than a millicore: use at most 3 decimals",
        holds=_millicores,
        found=lambda value: f"got {value}",
        valid=0.125,
        invalid=0.1255,
    ),
]


def _limited(flag: str, valid: str | None = None) -> Check:
    """A duration flag's bounds, from the runner contract."""
    return duration(LIMITS[flag].min, LIMITS[flag].max, valid)


Pods = Annotated[int, _limit("pods")]
# Duration runs (workloads/CONTRACT.md, Duration runs): the runner contract's bounds.
RunDuration = Annotated[str, DURATION, _limited("duration")]
StageDuration = Annotated[str, DURATION, _limited("stage-duration")]
# A warm-up is shorter than the run, which lasts at most 24h.
Warmup = Annotated[str, DURATION, _limited("warmup", valid="23h59m59s")]
MaxLag = Annotated[str, DURATION, _limited("max-lag")]
ArrivalRate = Annotated[float, Number(LIMITS["rate"].min, LIMITS["rate"].max)]
Seed = Annotated[int, _limit("seed")]
Count = Annotated[int, between(1, MAX_LIST_ITEMS)]  # repetitions, parallelism
TtlSeconds = Annotated[int, between(0, MAX_TTL_SECONDS)]
# A latency objective: a millisecond is below any RTT worth planning for, an hour past any.
MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE = "1ms", "1h"
LatencyObjective = Annotated[str, DURATION, duration(MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE)]
# A billion tasks a second is past every service; the bound keeps the arithmetic finite.
MAX_TARGET_RATE = 1e9
# A share of something (failures, efficiency, a CPU's use) is 0 to 1; a share that must leave
# something (a tolerance, a utilization, a probability to plan for) is above 0.
Share = Annotated[float, Number(0, 1)]
Fraction = Annotated[float, Number(0, 1, above_low=True)]
# Objectives (spec.objectives): a throughput as small as a runner issues and as large as a
# capacity target; a CPU time or start skew from a microsecond (the clocks' grain) to an hour.
Throughput = Annotated[float, Number(0.001, MAX_TARGET_RATE)]
TargetRate = Annotated[float, Number(0, MAX_TARGET_RATE, above_low=True)]
# A request to the user's own service (0s is the runner's own allowance: the spec sets one).
MIN_REQUEST_TIMEOUT = "1ms"
RequestTimeout = Annotated[
    str, DURATION, duration(MIN_REQUEST_TIMEOUT, LIMITS["request-timeout"].max)
]
# A schedule's regression policy: a relative change above 0 (at most ten times the baseline),
# a false discovery rate above 0 and below a half.
RelativeChange = Annotated[float, Number(0, 10, above_low=True)]
Significance = Annotated[float, Number(0, 0.5, above_low=True, below_high=True)]
MIN_OBJECTIVE_TIME, MAX_OBJECTIVE_TIME = "1us", "1h"
ObjectiveTime = Annotated[str, DURATION, duration(MIN_OBJECTIVE_TIME, MAX_OBJECTIVE_TIME)]
DroppedCount = Annotated[int, between(0, LIMITS["tasks"].max)]
ObjectiveName = Annotated[
    str, Field(strict=True, min_length=1, max_length=63, pattern=LABEL_VALUE_PATTERN)
]


def _check_image(text: str) -> str:
    if not _IMAGE.match(text):
        raise ValueError(
            f"{text!r} is not an image reference: use [registry/]repository[:tag][@digest], "
            f"for example cxlab.dev/runner:dev"
        )
    return text


def _memory_within(low: int, high: int) -> Any:
    def holds(text: str) -> bool:
        return low <= memory_bytes(text) <= high

    return holds


# A memory quantity: the CRD checks the grammar with a pattern, the bounds with CEL's
# quantity(); cxlab says which bound, for every quantity Kubernetes reads (1Pi is one).
QUANTITY = Field(
    strict=True, max_length=DURATION_MAX_LENGTH, json_schema_extra={"pattern": _QUANTITY.pattern}
)


def memory(low: str, high: str) -> Check:
    """A memory quantity's bounds, [low, high]."""
    return Check(
        f"must be between {low} and {high}",
        holds=_memory_within(memory_bytes(low), memory_bytes(high)),
        cel=f"!isQuantity(self) || (quantity(self).compareTo(quantity('{low}')) >= 0"
        f" && quantity(self).compareTo(quantity('{high}')) <= 0)",
        found=lambda text: f"got {text}",
        valid=low,
        invalid=str(memory_bytes(high) + 1),
    )


Quantity = Annotated[str, QUANTITY, memory(MIN_MEMORY, MAX_MEMORY)]
# An objective's peak RSS: from a MiB, below any runner.
ObjectiveMemory = Annotated[str, QUANTITY, memory("1Mi", MAX_MEMORY)]
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
_LABEL_KEY = re.compile(LABEL_KEY_PATTERN)
# Structural schemas cannot bound a map's keys: the CRD checks them with CEL.
NodeSelector = Annotated[
    dict[LabelKey, LabelValue],
    Field(max_length=MAX_LIST_ITEMS),
    Check(
        "every key must be a label key: [DNS-subdomain prefix/]name, the name at most 63 "
        "letters, digits, '-', '_' or '.' (at most 317 in all)",
        holds=lambda labels: all(len(k) <= 317 and _LABEL_KEY.match(k) for k in labels),
        cel=f"self.all(k, size(k) <= 317 && k.matches(r'{LABEL_KEY_PATTERN}'))",
        valid={"example.com/pool": "bench", "a" * 63: ""},
        invalid={"pool name": "bench"},
    ),
]


class SchemaProblems(ValueError):
    """A field that breaks Kubernetes' schema, with every place below it that does:
    (path below the field, message), reported as one line each."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{where}: {message}" for where, message in problems))
        self.problems = problems


class Strict(BaseModel):
    """The base of every spec model: camelCase fields, nothing undeclared, no coercion, and
    the rules its class declares (`rules`, cxlab.rules) checked here and in the CRD."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        # No coercion ("yes" is no boolean, "5" no number): the apiserver refuses them too.
        strict=True,
        # Field docstrings become the CRD's descriptions (kubectl explain).
        use_attribute_docstrings=True,
        json_schema_extra=schema_rules,
    )
    rules: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _rules_hold(self) -> Self:
        check_rules(self)
        return self


def repeated(values: list[Any]) -> int | None:
    """The index of the first value listed before, if any."""
    seen = set()
    for index, value in enumerate(values):
        if value in seen:
            return index
        seen.add(value)
    return None


def no_repeats(what: str, valid: list[Any], invalid: list[Any]) -> Check:
    """A list without repeats: the CRD's rule on the list names it (spec.models[0].workers),
    and so does cxlab."""
    return Check(
        f"{what} is listed twice",
        holds=lambda values: repeated(values) is None,
        cel="self.all(x, self.exists_one(y, y == x))",
        found=lambda values: f"{values[repeated(values) or 0]!r}",
        valid=valid,
        invalid=invalid,
    )


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
    if isinstance(cause, RuleBroken):
        return [f"{where or 'document'}{cause.below}: {cause.message}"]
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
