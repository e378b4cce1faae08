"""The ConcurrencyExperiment resource as typed models: the one reading of the YAML a user
`kubectl apply`s, shared by the CLI (local backend) and the operator.

Every rule lives here, with a message that names the field and says what to change; the CRD
schema repeats what the apiserver can check and a test keeps the two in agreement.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from cxlab import placement
from cxlab.inputs import InputError, load_yaml_documents
from cxlab_contract import runner_contract
from cxlab_contract.durations import DURATION_PATTERN, format_duration, parse_duration

API_VERSION = "cxlab.dev/v1alpha1"
KIND = "ConcurrencyExperiment"

GO_MODELS = ("goroutines",)

# A cluster experiment's status keeps a compact entry per trial (about 0.5 KiB) and its
# Results go to ConfigMaps of 100 trials each (cxlab.experiments.results_store): at 1,000
# trials the status is about 0.5 MiB, a third of etcd's limit on one object. A trial of N > 1
# Pods keeps N + 1 Results (each Pod's and the merged one): MAX_RESULTS counts them, so that
# a chunk of 100 trials stays under the 1 MiB a ConfigMap holds (about 0.6 KiB gzip'd each).
MAX_TRIALS = 1000
MAX_RESULTS = 2000
# Limits that let the apiserver bound the cost of the CRD's validation rules.
MAX_MODELS = 7
MAX_LIST_ITEMS = 32
DEFAULT_RESPONSE_BYTES = 64  # body size the delay target sends when responseBytes is unset
# One OS process per worker: past this a trial measures fork storms, not the model.
MAX_PROCESS_WORKERS = 512
# One OS thread per worker: every thread stack is two memory mappings, and the kernel's
# default vm.max_map_count (65530) runs out near 32,000 threads in one process.
MAX_THREAD_WORKERS = 30_000

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
for _literal, _contract in (
    (Model, runner_contract().models),
    (WorkloadType, runner_contract().workloads),
    (Connection, runner_contract().connections),
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


def _between(low: int, high: int) -> Any:
    """A whole number in [low, high]; strict: "5" and 5.0 are not numbers here, as for the
    apiserver."""
    return Field(strict=True, ge=low, le=high)


def _limit(flag: str) -> Any:
    """A runner flag's bounds, from the runner contract."""
    return _between(LIMITS[flag].min, LIMITS[flag].max)


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
Priority = Annotated[int, _between(MIN_PRIORITY, MAX_PRIORITY)]
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
Count = Annotated[int, _between(1, MAX_LIST_ITEMS)]  # repetitions, parallelism
TtlSeconds = Annotated[int, _between(0, MAX_TTL_SECONDS)]
# A latency objective: a millisecond is below any RTT worth planning for, an hour past any.
MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE = "1ms", "1h"
LatencyObjective = Annotated[
    str,
    _duration_field(MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE),
    _duration_check(MIN_LATENCY_OBJECTIVE, MAX_LATENCY_OBJECTIVE),
]
# A billion tasks a second is past every service; the bound keeps the arithmetic finite.
MAX_TARGET_RATE = 1e9


def _check_quantity(text: str) -> str:
    size = memory_bytes(text)
    if not memory_bytes(MIN_MEMORY) <= size <= memory_bytes(MAX_MEMORY):
        raise ValueError(f"must be between {MIN_MEMORY} and {MAX_MEMORY}, got {text}")
    return text


def _check_image(text: str) -> str:
    if not _IMAGE.match(text):
        raise ValueError(
            f"{text!r} is not an image reference: use [registry/]repository[:tag][@digest], "
            f"for example cxlab.dev/runner:dev"
        )
    return text


# The patterns only go into the CRD schema; here the validators give the friendlier message.
Quantity = Annotated[
    str,
    Field(
        strict=True,
        max_length=DURATION_MAX_LENGTH,
        json_schema_extra={
            "pattern": _QUANTITY.pattern,
            **_cel(
                f"!isQuantity(self) || (quantity(self).compareTo(quantity('{MIN_MEMORY}')) >= 0"
                f" && quantity(self).compareTo(quantity('{MAX_MEMORY}')) <= 0)",
                f"must be between {MIN_MEMORY} and {MAX_MEMORY}",
            ),
        },
    ),
    AfterValidator(_check_quantity),
]
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


class _Strict(BaseModel):
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


def _unique(values: list[Any], what: str) -> None:
    seen = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} {value!r} is listed twice")
        seen.add(value)


def _no_repeats(what: str) -> AfterValidator:
    """A list field's own check, so the error names the list (spec.models[0].workers) as the
    CRD's rule on that list does."""

    def check(values: list[Any]) -> list[Any]:
        _unique(values, what)
        return values

    return AfterValidator(check)


class WorkloadSpec(_Strict):
    """What each task does, and how many tasks a trial runs."""

    type: WorkloadType
    """sleep (one RTT per task), http (one GET to the delay target), cpu (a count loop),
    hold (tasks that stay alive: memory per task)."""
    tasks: Tasks
    """Tasks in every trial."""
    rtt: Rtt | None = None
    """Round-trip time of each task (sleep, http), e.g. 100ms. Or rtts."""
    rtts: Annotated[list[Rtt], Field(min_length=1, max_length=MAX_LIST_ITEMS)] | None = None
    """Several round-trip times: a matrix axis (sleep, http). Or rtt."""
    iterations: Iterations | None = None
    """Count-loop iterations per task (cpu only)."""
    hold: Hold | None = None
    """How long every task stays alive (hold only)."""
    connection: Connection | None = None
    """http only: a new connection per task (fresh, the default) or one per worker (reuse)."""
    response_bytes: ResponseBytes | None = None
    """http only: bytes in each response body (default 64)."""

    @model_validator(mode="after")
    def _parameters_match_type(self) -> WorkloadSpec:
        timed = self.type in ("sleep", "http")
        if timed and (self.rtt is None) == (self.rtts is None):
            raise ValueError(f"workload {self.type} needs exactly one of rtt or rtts")
        if not timed and (self.rtt is not None or self.rtts is not None):
            raise ValueError(f"rtt/rtts apply to sleep and http only, not to {self.type}")
        if (self.type == "cpu") != (self.iterations is not None):
            raise ValueError("iterations is required for cpu and applies to cpu only")
        if (self.type == "hold") != (self.hold is not None):
            raise ValueError("hold is required for the hold workload and applies to it only")
        if self.type != "http" and (self.connection or self.response_bytes is not None):
            raise ValueError("connection and responseBytes apply to the http workload only")
        if self.rtts:
            seconds = [parse_duration(r) for r in self.rtts]
            for rtt in self.rtts:
                if seconds.count(parse_duration(rtt)) > 1:
                    raise ValueError(f"rtts lists {rtt} twice (or the same time written twice)")
        return self

    def rtt_seconds(self) -> list[float | None]:
        """The RTT axis of the matrix: one None for workloads without an RTT."""
        if self.rtts is not None:
            return [parse_duration(r) for r in self.rtts]
        return [parse_duration(self.rtt) if self.rtt is not None else None]


class ModelSpec(_Strict):
    """One concurrency model and the worker counts (and GOMAXPROCS) to try it with."""

    model: Model
    """The concurrency model."""
    workers: Annotated[
        list[Workers],
        Field(min_length=1, max_length=MAX_LIST_ITEMS),
        _no_repeats("worker count"),
    ] = [0]
    """Worker counts to try; 0 = one worker per task."""
    gomaxprocs: (
        Annotated[
            list[Gomaxprocs],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            _no_repeats("gomaxprocs value"),
        ]
        | None
    ) = None
    """GOMAXPROCS values to try (goroutines only); 0 = the Go default."""
    pods: Annotated[
        list[Pods], Field(min_length=1, max_length=MAX_LIST_ITEMS), _no_repeats("Pod count")
    ] = [1]
    """Runner Pods per trial to try (processes locally). A trial of N Pods splits its tasks
    across them (each gets tasks / N, the first tasks mod N one more), starts them together
    at a barrier and merges their Results; workers are per Pod, so it runs N x workers."""
    pool: Literal["onDemand", "prestarted"] | None = None
    """How a pool starts its workers (threads and processes only). threads: onDemand, the
    default, starts a thread when a task is submitted and no thread is idle, as
    concurrent.futures.ThreadPoolExecutor does, so far fewer than W may start; prestarted
    starts all W first (with one worker per task: a thread per task). processes: prestarted
    only, as ProcessPoolExecutor does with Linux's fork."""

    @model_validator(mode="after")
    def _rules(self) -> ModelSpec:
        if self.model == "sequential" and self.workers not in ([0], [1]):
            raise ValueError("sequential runs one task at a time: leave workers out")
        if self.gomaxprocs is not None and self.model != "goroutines":
            raise ValueError(
                f"gomaxprocs applies to goroutines only, not to the Python model {self.model}"
            )
        if self.pool is not None and self.model not in ("threads", "processes"):
            raise ValueError(f"pool applies to threads and processes only, not to {self.model}")
        if self.model == "processes" and self.pool == "onDemand":
            raise ValueError(
                "processes run a prestarted pool only (as ProcessPoolExecutor with fork): "
                "set pool: prestarted or leave it out"
            )
        return self

    def gomaxprocs_axis(self) -> list[int | None]:
        if self.model != "goroutines":
            return [None]
        return list(self.gomaxprocs) if self.gomaxprocs is not None else [0]


class Resources(_Strict):
    """What each trial Pod gets: whole CPUs (pinned) or a fraction of one, and memory."""

    cpu: Cpu = 1
    """CPUs per trial Pod (requests = limits: Guaranteed QoS). Whole CPUs are pinned by the
    static CPU manager; a fraction (0.5) runs in the node's shared pool, unpinned, and needs
    pinning: preferred."""
    memory: Quantity = "512Mi"
    """Memory per trial Pod (requests = limits); locally only reported."""

    @property
    def whole_cpus(self) -> int | None:
        """The CPUs a trial Pod is pinned to; None for a fraction (the shared pool)."""
        return int(self.cpu) if float(self.cpu).is_integer() else None


class Placement(_Strict):
    """Where trial Pods may run; passed to the Pod as written, checked with Kubernetes' own
    schemas of a Pod's fields."""

    node_selector: (
        Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_LIST_ITEMS)] | None
    ) = None
    """Node labels a trial Pod requires."""
    tolerations: Tolerations | None = None
    """Tolerations of trial Pods, as in a Pod spec."""
    affinity: Affinity | None = None
    """Affinity of trial Pods, as in a Pod spec."""


class LatencyTarget(_Strict):
    """The latency every task must meet, at one of the percentiles the runners report."""

    percentile: Literal["p50", "p90", "p99"] = "p99"
    """The percentile of task latency the objective is about."""
    max: LatencyObjective
    """The most that percentile may be, e.g. 250ms."""


class CapacityTarget(_Strict):
    """The load a capacity plan is for."""

    rate_per_second: Annotated[float, Field(strict=True, gt=0, le=MAX_TARGET_RATE)]
    """Tasks per second the whole fleet must sustain."""
    latency: LatencyTarget
    """The latency objective (e.g. p99 at most 250ms)."""
    cpu_utilization: Annotated[float, Field(strict=True, gt=0, le=1)] = 0.7
    """The share of each Pod's CPUs the plan may use: headroom for bursts and noisy
    neighbours."""
    rtt: Rtt | None = None
    """The RTT the plan is for when the workload has several (rtts); unset: the largest."""


class Capacity(_Strict):
    """Turn the measurements into Pods and cores for a target load (status.capacityPlan)."""

    target: CapacityTarget
    """The load to plan for."""


class ExperimentSpec(_Strict):
    workload: WorkloadSpec
    """What each task does."""
    models: Annotated[list[ModelSpec], Field(min_length=1, max_length=MAX_MODELS)]
    """The models to compare, each once."""
    repetitions: Count = 1
    """Runs of every point, for mean, standard deviation and coefficient of variation."""
    resources: Resources = Resources()
    """What one trial gets."""
    tolerance: Annotated[float, Field(strict=True, gt=0, le=1)] = 0.10
    """The knee is the fewest workers whose wall time is within this fraction of the best."""
    trial_timeout: TrialTimeout = "15m"
    """A trial still running after this is stopped and counted as failed."""
    pinning: Literal["required", "preferred"] = "required"
    """required: a trial that did not run on exactly its own cores is marked unpinned
    (pinned: false) and left out of knees and recommendations. preferred: it counts all the
    same (a cluster without the kubelet's static CPU manager)."""
    syscalls: bool = False
    """Count every trial's system calls with strace -c -f (futex included). It slows the
    trials, so it is off by default; where strace is missing or may not trace (the runner
    image, a restricted Pod), the Result says the counts are unavailable, never 0."""
    # What follows only a cluster uses; the local backend ignores it.
    placement: Placement = Placement()
    """Where trial Pods may run."""
    parallelism: Count = 1
    """Trials running at once."""
    queue_timeout: QueueTimeout | None = None
    """Fail the experiment if it has waited this long (from its creation) for capacity;
    unset: it waits as long as it takes."""
    priority: Priority = 0
    """Its place among experiments waiting for capacity: higher first, then the oldest."""
    queue_name: QueueName | None = None
    """A Kueue LocalQueue (in the experiment's namespace) that admits its trial Pods, where
    Kueue runs with its plain-Pod integration: quotas and fair sharing are then Kueue's.
    Unset: cxlab's own queue."""
    exclusive: bool = False
    """No two trial Pods on one node (Pod anti-affinity)."""
    image: Image | None = None
    """The runner image; the operator's default when unset."""
    ttl_seconds_after_finished: TtlSeconds | None = None
    """Delete the experiment this long after it finished; kept when unset."""
    keep_pods_on_failure: bool = False
    """Keep the Pods of failed trials for inspection (kubectl logs)."""
    capacity: Capacity | None = None
    """A capacity plan for a target load, from this experiment's measured points."""

    @model_validator(mode="after")
    def _rules(self) -> ExperimentSpec:
        names = [m.model for m in self.models]
        _unique(names, "model")
        if "locust" in names and self.workload.type != "http":
            raise ValueError(
                f"model locust drives HTTP users and needs workload type http, "
                f"not {self.workload.type}"
            )
        for entry in self.models:
            most = max(self.workload.tasks if w == 0 else w for w in entry.workers)
            if entry.model == "processes" and most > MAX_PROCESS_WORKERS:
                raise ValueError(
                    f"processes would start {most} worker processes; "
                    f"the most allowed is {MAX_PROCESS_WORKERS}"
                )
            if entry.model == "threads" and most > MAX_THREAD_WORKERS:
                raise ValueError(
                    f"threads would start {most} threads in one process; the most allowed is "
                    f"{MAX_THREAD_WORKERS} (the kernel's default vm.max_map_count runs out near "
                    f"32,000)"
                )
        target = self.capacity.target if self.capacity else None
        if target and target.rtt and parse_duration(target.rtt) not in self.workload.rtt_seconds():
            raise ValueError(
                f"capacity.target.rtt {target.rtt} is not one of the workload's RTTs: "
                f"name one of them or leave it out"
            )
        most_pods = max(p for m in self.models for p in m.pods)
        if most_pods > self.workload.tasks:
            raise ValueError(
                f"a trial of {most_pods} Pods needs at least {most_pods} tasks (one each): "
                f"raise workload.tasks or lower models[].pods"
            )
        if self.resources.whole_cpus is None and self.pinning == "required":
            raise ValueError(
                f"resources.cpu {self.resources.cpu} is a fraction of a CPU, which no core "
                f"can be pinned to: set pinning: preferred (or whole CPUs)"
            )
        if self.resources.whole_cpus is None and self.capacity is not None:
            raise ValueError(
                f"capacity: a capacity plan counts whole cores per Pod, and resources.cpu "
                f"{self.resources.cpu} is a fraction of a CPU: set whole CPUs, or leave "
                f"capacity out"
            )
        count = self.trial_count()
        if count > MAX_TRIALS:
            raise ValueError(
                f"the matrix has {count} trials (models x workers x gomaxprocs x pods x "
                f"rtts x repetitions); the most allowed is {MAX_TRIALS}: split the experiment"
            )
        results = self.result_count()
        if results > MAX_RESULTS:
            raise ValueError(
                f"the matrix's trials keep {results} Results in status (a trial of N > 1 "
                f"Pods keeps N + 1: each Pod's and the merged one; distributed Locust also its "
                f"master's); the most allowed is "
                f"{MAX_RESULTS}: lower models[].pods or split the experiment"
            )
        return self

    def trial_count(self) -> int:
        per_repetition = sum(
            len(m.workers) * len(m.gomaxprocs_axis()) * len(m.pods) for m in self.models
        )
        return per_repetition * len(self.workload.rtt_seconds()) * self.repetitions

    def result_count(self) -> int:
        """Results the trials keep in status: one per trial of one Pod, N + 1 for N Pods
        (N + 2 for distributed Locust: its master's too)."""
        per_repetition = sum(
            len(m.workers)
            * len(m.gomaxprocs_axis())
            * sum(1 if p == 1 else p + 1 + (m.model == "locust") for p in m.pods)
            for m in self.models
        )
        return per_repetition * len(self.workload.rtt_seconds()) * self.repetitions


class Metadata(BaseModel):
    # Kubernetes metadata carries more (labels, uid, ...); only the name matters here.
    model_config = ConfigDict(extra="allow", frozen=True)

    name: Annotated[str, Field(strict=True, max_length=NAME_MAX_LENGTH, pattern=_NAME.pattern)]
    namespace: str | None = None


class ConcurrencyExperiment(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    api_version: Literal["cxlab.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["ConcurrencyExperiment"]
    metadata: Metadata
    spec: ExperimentSpec

    @property
    def name(self) -> str:
        return self.metadata.name


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


def _describe(error: ErrorDetails) -> list[str]:
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


def parse_experiment(document: Any) -> ConcurrencyExperiment:
    """Validate a loaded YAML/JSON document; SpecError lists every broken rule."""
    if not isinstance(document, dict):
        raise SpecError(["document: is not a mapping; expected a ConcurrencyExperiment"])
    if document.get("kind") != KIND or document.get("apiVersion") != API_VERSION:
        raise SpecError(
            [
                f"document: is not a ConcurrencyExperiment (apiVersion {API_VERSION}, "
                f"kind {KIND}); got apiVersion {document.get('apiVersion')!r}, "
                f"kind {document.get('kind')!r}"
            ]
        )
    try:
        return ConcurrencyExperiment.model_validate(document)
    except ValidationError as error:
        raise SpecError([line for e in error.errors() for line in _describe(e)]) from None


def load_experiments(path: Path) -> list[ConcurrencyExperiment]:
    """Every ConcurrencyExperiment in a YAML file (several documents, as `kubectl apply -f`
    takes them); SpecError names the document and field of each broken rule, or what is
    wrong with the file itself (cxlab.inputs: size, encoding, YAML, nesting, aliases)."""
    try:
        documents = load_yaml_documents(path)
    except InputError as error:
        raise SpecError([str(error)]) from None
    if not documents:
        raise SpecError(["holds no document; expected a ConcurrencyExperiment"])
    experiments, problems = [], []
    for number, document in enumerate(documents, start=1):
        where = f"document {number}: " if len(documents) > 1 else ""
        try:
            experiments.append(parse_experiment(document))
        except SpecError as error:
            problems += [where + problem for problem in error.problems]
    names = [e.name for e in experiments]
    problems += [
        f"metadata.name: {n!r} is used twice" for n in sorted(set(names)) if names.count(n) > 1
    ]
    if problems:
        raise SpecError(problems)
    return experiments


def spec_json(spec: Any) -> str:
    """The spec as status.startedSpec keeps it: compact, keys sorted."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
