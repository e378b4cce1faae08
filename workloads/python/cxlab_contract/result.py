"""The Result (result-v1.schema.json) as a type, its limits, and the rules that shape it: the
runners build one, the operator and the local backend read, merge and summarise them.

`Result` is a TypedDict, not a model class: a Result is JSON from its first byte (a runner
prints it, a Pod's termination message carries it, a ConfigMap stores it), so a type checker
reads it as a typed document and nothing is converted or imported at a runner's start-up
(the runners' overhead is measured against bare programs). tests/contract/test_runner_contract.py
keeps the keys and the schema's properties the same.

No `from __future__ import annotations` here: on Python 3.11 a TypedDict whose annotations
are strings counts a NotRequired key as required (Result.__required_keys__), and the test
above reads the keys at run time."""

import json
import math
from typing import Any, NotRequired, TypedDict

from cxlab_contract import histogram, result_schema, runner_contract
from cxlab_contract.figures import significant
from cxlab_contract.histogram import Histogram
from cxlab_contract.timeline import Timeline, halve

SCHEMA = "cxlab.dev/result/v1"
MAX_BYTES = runner_contract().result_max_bytes  # a Pod's termination message holds 4096 bytes

_PROPERTIES = result_schema()["properties"]
# The schema's bounds on the Result's lists, which the runners and the merge keep to.
MAX_ERRORS: int = _PROPERTIES["errors"]["maxItems"]
MAX_SYSCALL_COUNTS: int = _PROPERTIES["syscalls"]["properties"]["counts"]["maxProperties"]
MAX_TIMELINE_SAMPLES: int = _PROPERTIES["rssTimeline"]["properties"]["rssBytes"]["maxItems"]


class Latencies(TypedDict):
    """Nearest-rank percentiles; p97_5 is the 97.5th (the schema says why the name)."""

    p50: float
    p90: float
    p95: NotRequired[float]  # every runner writes p95, p97_5 and p99_9; older Results have none
    p97_5: NotRequired[float]
    p99: float
    p99_9: NotRequired[float]
    max: float


class ContextSwitches(TypedDict):
    voluntary: int
    involuntary: int


class Syscalls(TypedDict, total=False):
    """Counted ({total, counts}) or {unavailable: why}; never a count of 0."""

    unavailable: str
    total: int
    counts: dict[str, int]


class RssTimeline(TypedDict):
    intervalSeconds: float
    rssBytes: list[int]


class Error(TypedDict):
    message: str
    count: int


class Lag(TypedDict):
    p50: float
    p99: float
    max: float


class Arrival(TypedDict):
    """An arrival run's schedule, generator and queue (CONTRACT.md, Duration runs)."""

    process: str
    onBusy: str
    ratePerSecond: float
    achievedRatePerSecond: float
    arrivals: int
    dropped: int
    maxQueue: int
    lagSeconds: Lag
    maxLagSeconds: float
    generatorSaturated: bool
    saturation: str | None
    waitHistogram: Histogram
    serviceHistogram: Histogram


class Warmup(TypedDict):
    seconds: float
    tasksOk: int
    latencySeconds: Latencies


class Host(TypedDict):
    """The environment a runner sees from inside its container: the schedules' environment
    fingerprint, which tells an environment change from a code change."""

    cpuModel: str
    kernel: str


class FailureKinds(TypedDict):
    """How the failed tasks failed (runner-contract.json failureKinds); they sum to
    tasksFailed."""

    connect: int
    timeout: int
    tls: int
    status: int
    other: int


FAILURE_KINDS: tuple[str, ...] = tuple(_PROPERTIES["failureKinds"]["required"])


class Result(TypedDict):
    """One trial's (or one Pod's) Result, key for key the schema's."""

    schema: str
    experiment: str
    trial: str
    pods: int
    locustWorkers: int | None
    podIndex: int | None
    model: str
    workload: str
    workers: int
    pool: str | None
    workersStarted: int
    gomaxprocs: int | None
    tasks: int
    rttSeconds: float | None
    iterations: int | None
    holdSeconds: float | None
    tasksOk: int
    tasksFailed: int
    wallSeconds: float
    startedAtUnixSeconds: float
    barrierWaitSeconds: float | None
    startSkewSeconds: float | None
    floorSeconds: float | None
    efficiency: float | None
    cpuUserSeconds: float
    cpuSystemSeconds: float
    cpuPercent: float
    peakRssBytes: int
    peakVmBytes: int
    baselineRssBytes: int
    peakThreads: int
    voluntaryContextSwitches: int
    involuntaryContextSwitches: int
    taskContextSwitches: ContextSwitches | None
    syscalls: Syscalls | None
    throughputPerSecond: float
    latencySeconds: Latencies
    latencyHistogram: Histogram
    rssTimeline: RssTimeline
    cpus: list[int]
    runtime: str
    host: NotRequired[Host]  # every runner writes it; Results written before it have none
    failureKinds: NotRequired[FailureKinds]  # every runner writes it; older Results have none
    errors: list[Error]
    durationSeconds: float | None
    arrival: Arrival | None
    timeline: Timeline | None
    warmup: Warmup | None


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted values (0 for none)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def latency_seconds(ordered: list[float]) -> Latencies:
    """The Result's latencySeconds: exact nearest-rank percentiles of sorted latencies (to
    figures.SIGNIFICANT_DIGITS significant digits)."""
    return {
        "p50": significant(percentile(ordered, 0.50)),
        "p90": significant(percentile(ordered, 0.90)),
        "p95": significant(percentile(ordered, 0.95)),
        "p97_5": significant(percentile(ordered, 0.975)),
        "p99": significant(percentile(ordered, 0.99)),
        "p99_9": significant(percentile(ordered, 0.999)),
        "max": significant(ordered[-1] if ordered else 0.0),
    }


def resolve_workers(model: str, workers: int, tasks: int) -> int:
    """Workers a trial really has: 0 means one per task, never more than tasks, and
    sequential always has one."""
    if model == "sequential":
        return 1
    return tasks if workers == 0 else min(workers, tasks)


def floor_seconds(workload: str, tasks: int, workers: int, rtt: float, hold: float) -> float | None:
    """ceil(tasks / workers) waves of one RTT (or hold) each; None for cpu, which has no
    physical floor. The planner's estimate uses this too."""
    waves = math.ceil(tasks / workers)
    if workload in ("sleep", "http"):
        return waves * rtt
    if workload == "hold":
        return waves * hold
    return None


def encode(result: Result) -> str:
    """Compact JSON whose line, newline included, fits in MAX_BYTES (a termination message).
    The contract's rule, the same in the Go runner: drop errors, least frequent first, then
    the least frequent system calls (futex last), then halve the RSS timeline's resolution,
    then a duration run's timeline's, then lower the widest histogram's schema; nothing else
    is cut (the labels, the host stay whole), so only absurd labels can still leave it too
    long."""
    while True:
        text = json.dumps(result, separators=(",", ":"))
        if len(text.encode()) + 1 <= MAX_BYTES:
            return text
        timeline = result["rssTimeline"]
        counts = (result["syscalls"] or {}).get("counts", {})
        if result["errors"]:
            result["errors"].pop()
        elif len(counts) > 1:
            del counts[min(counts, key=lambda name: (name == "futex", counts[name]))]
        elif len(timeline["rssBytes"]) > 1:
            result["rssTimeline"] = {
                "intervalSeconds": timeline["intervalSeconds"] * 2,
                "rssBytes": timeline["rssBytes"][::2],
            }
        elif result["timeline"] is not None and len(result["timeline"]["completed"]) > 1:
            result["timeline"] = halve(result["timeline"])
        elif not _narrow_widest_histogram(result):
            return text


def _narrow_widest_histogram(result: Result) -> bool:
    """Lower by one the schema of the histogram with the most buckets (latency, wait, service
    on a tie); False when none has two buckets left to pair."""
    arrival = result["arrival"]
    named: list[tuple[Any, str]] = [(result, "latencyHistogram")]
    if arrival is not None:
        named += [(arrival, "waitHistogram"), (arrival, "serviceHistogram")]
    owner, key = max(named, key=lambda pair: len(pair[0][pair[1]]["counts"]))
    if len(owner[key]["counts"]) < 2 or owner[key]["schema"] <= histogram.MIN_SCHEMA:
        return False
    owner[key] = histogram.coarser(owner[key])
    return True
