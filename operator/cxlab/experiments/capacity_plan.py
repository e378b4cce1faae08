"""Measured points → Pods and cores for a target load (status.capacityPlan): per model, how
many Pods of the experiment's size carry `spec.capacity.target`, and the cheapest model that
meets its latency objective. Pure: the operator and the local backend plan alike.

One trial is one Pod with k = `spec.resources.cpu` pinned cores and `spec.resources.memory`.

Points: `group_points` under the experiment's pinning, at the plan's RTT (`target.rtt`, else
the largest RTT of the matrix: the slowest backend, the conservative case; workloads without
an RTT have one), with at least one counted Result and no failed task in any of them. Per
point, medians over its repetitions (so one outlier does not move the plan):

    X   = throughputPerSecond                  tasks/s one Pod sustained
    Q   = latencySeconds[percentile]           the objective's percentile (p50, p90 or p99)
    T   = time a task holds a worker, for Little's law (the Result has no mean latency):
          with fewer workers than tasks the workers run a closed loop, so Little's law on
          the measurement itself gives the mean, W / X (it includes the per-task work
          beyond p50); with a worker per task nothing queues, and T = latencySeconds.p50
    c   = (cpuUserSeconds + cpuSystemSeconds) / tasks      CPU seconds per task
    m   = peakRssBytes

A point meets the objective when Q <= max. Its usable rate per Pod keeps the Pod's CPUs at the
target utilisation U, assuming that running below a measured load does not raise latency:

    r   = min(X, U * k / c)                    (no CPU cap when c = 0)

(A Result's latency is a task's own time from when a worker takes it: the runner's workers
loop over the tasks, so waiting for a free worker is not in it. The plan sizes workersPerPod
so that tasks need not wait, and U leaves the headroom for bursts.)

Per model (variant): of its points that meet the objective, the one with the largest r (tie:
fewer workers). For the target rate R:

    pods          = ceil(R / r)
    workersPerPod = ceil(R * T / pods)         Little's law, L = R * T; at least 1, and 1 for
                                               sequential (its pods follow from r alone)
    cores         = pods * k
    memoryBytes   = pods * m                   the peak at the measured workers: high when a
                                               Pod runs fewer
    expectedLatencySeconds = Q
    expectedCpuUtilization = (R / pods) * c / k   at the target load each Pod carries

The basis is "measured" for one Pod (it runs at or below a load that was measured) and
"extrapolated" for more: one trial is one Pod, so more Pods assume that Pods add linearly, and
the note says so. A model with no point meeting the objective, or none measured, says why.

The choice: of the models that meet the objective, the fewest cores, then the least memory,
then the spec's order."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cxlab.experiments.labels import workers_label
from cxlab.experiments.outcome import TrialOutcome
from cxlab.experiments.plan import Trial
from cxlab.experiments.spec import CapacityTarget, ExperimentSpec
from cxlab.experiments.summary import PointRuns, group_points
from cxlab.shape import Maybe, Shape, nullable
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.result import Result

# Kubernetes' documented limit of one cluster: a plan past it is no plan (and its byte
# counts would leave the int64 the apiserver stores).
MAX_PODS = 150_000
# The multiplication sign of "12 Pods x 1 CPU", escaped: ruff takes it written out for an x.
TIMES = "\u00d7"
Percentile = Literal["p50", "p90", "p99"]
Basis = Literal["measured", "extrapolated"]


class PlanTarget(Shape):
    """The load the plan is for, from spec.capacity.target."""

    rate_per_second: float
    """Tasks per second the whole fleet must sustain."""
    percentile: Literal["p50", "p90", "p99"]
    """The latency percentile of the objective."""
    latency_seconds: float
    """The most that percentile may be, in seconds."""
    cpu_utilization: float
    """The share of each Pod's CPUs the plan may use."""


class ModelPlan(Shape):
    """One model's plan: the Pods it needs for the target, or why it cannot meet it."""

    variant: str
    """The model as measured, e.g. goroutines (GOMAXPROCS 1)."""
    model: str
    """The concurrency model."""
    meets: bool
    """Whether it can carry the target rate within the latency objective."""
    workers: Maybe[int] = None
    """Workers of the measured point the plan is built on (one Pod, one trial)."""
    workers_per_pod: Maybe[int] = None
    """Workers each Pod should run: the target's concurrency (Little's law: rate times p50 latency)
    spread over the Pods."""
    pods: Maybe[int] = None
    """Pods needed for the target rate."""
    cores_per_pod: Maybe[int] = None
    """Whole CPUs per Pod: spec.resources.cpu, as measured."""
    cores: Maybe[int] = None
    """CPUs of all Pods together."""
    memory_bytes: Maybe[int] = None
    """Memory of all Pods together: each at the peak measured at the point's workers."""
    rate_per_pod: Maybe[float] = None
    """Tasks per second one Pod may carry: its measured throughput, capped so its CPUs stay at
    the target utilisation."""
    expected_latency_seconds: Maybe[float] = None
    """The objective's percentile as measured at the point."""
    expected_cpu_utilization: Maybe[float] = None
    """The share of a Pod's CPUs used at ratePerPod (at the target each Pod carries
    rate / pods, at most that)."""
    basis: Maybe[Literal["measured", "extrapolated"]] = None
    """measured: one Pod at or below a measured load; extrapolated: several Pods from
    measurements of one, assuming Pods add linearly."""
    note: Maybe[str] = None
    """What the numbers rest on."""
    reason: Maybe[str] = None
    """Why the model cannot meet the objective (meets: false)."""


class CapacityPlan(Shape):
    """Pods and cores for spec.capacity.target, per model, and the cheapest model that meets
    the latency objective."""

    target: PlanTarget
    """The target load, as planned for."""
    rtt_seconds: float | None = nullable()
    """The RTT whose measurements the plan uses; null for workloads without one."""
    models: list[ModelPlan]
    """Every model of the spec, in its order."""
    choice: Maybe[str] = None
    """The chosen model's variant: of those that meet the objective, the fewest cores, then
    the least memory. Unset when none meets it."""
    pods: Maybe[int] = None
    """Pods of the choice."""
    cores: Maybe[int] = None
    """CPUs of the choice, all Pods together."""
    memory_bytes: Maybe[int] = None
    """Memory of the choice, all Pods together."""
    basis: Maybe[Literal["measured", "extrapolated"]] = None
    """Whether the choice rests on a measured load of one Pod or is extrapolated to several."""
    display: str
    """The choice in short, e.g. "12 Pods \u00d7 1 CPU, asyncio"."""
    message: str
    """The choice in one line, with what it rests on; or why no model meets the objective."""


@dataclass(frozen=True)
class _Point:
    """One point's medians over its counted repetitions."""

    workers: int  # as run: the spec's 0 resolved to one worker per task
    throughput: float  # X, tasks/s
    latency: float  # Q, at the objective's percentile
    p50: float
    tasks: int
    cpu_per_task: float  # c, CPU seconds
    memory: int  # m, bytes


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def _measured(results: list[Result], percentile: Percentile) -> _Point:
    """Per Pod: a trial of several Pods (a merged Result) has its rate, tasks and memory
    shared by its Pods (workers are per Pod already)."""
    pods = int(results[0].get("pods", 1))
    return _Point(
        workers=int(results[0]["workers"]),
        throughput=_median([r["throughputPerSecond"] / pods for r in results]),
        latency=_median([r["latencySeconds"][percentile] for r in results]),
        p50=_median([r["latencySeconds"]["p50"] for r in results]),
        tasks=int(results[0]["tasks"]) // pods,
        cpu_per_task=_median(
            [(r["cpuUserSeconds"] + r["cpuSystemSeconds"]) / r["tasks"] for r in results]
        ),
        memory=round(_median([r["peakRssBytes"] / pods for r in results])),
    )


def _holding_time(point: _Point) -> float:
    """T: how long a task holds a worker (see the module's docstring)."""
    if point.workers >= point.tasks or point.throughput <= 0:
        return point.p50
    return max(point.p50, point.workers / point.throughput)


def _ceil(value: float) -> int:
    # Rounded first: 3 * (1/3) must not become 4 Pods through a float's last digit.
    return math.ceil(round(value, 9))


def _rate_text(rate: float) -> str:
    return f"{rate:,.3f}".rstrip("0").rstrip(".")


def _at_rtt(trial: Trial, rtt: float | None) -> bool:
    if rtt is None or trial.rtt_seconds is None:
        return rtt is None and trial.rtt_seconds is None
    return math.isclose(trial.rtt_seconds, rtt)


def _plan_rtt(spec: ExperimentSpec) -> float | None:
    target = spec.capacity.target if spec.capacity else None
    if target and target.rtt:
        return parse_duration(target.rtt)
    rtts = [r for r in spec.workload.rtt_seconds() if r is not None]
    return max(rtts) if rtts else None


def _variants(spec: ExperimentSpec) -> list[tuple[str, str]]:
    """(variant, model) in the spec's order, named as the trials name them."""
    return [
        (Trial(0, entry.model, 0, gomaxprocs, None, 1).variant, entry.model)
        for entry in spec.models
        for gomaxprocs in entry.gomaxprocs_axis()
    ]


class _Planner:
    def __init__(self, spec: ExperimentSpec, target: CapacityTarget) -> None:
        cores = spec.resources.whole_cpus
        assert cores is not None, "the spec refuses a capacity plan for a fraction of a CPU"
        self.cores_per_pod = cores
        self.rate = target.rate_per_second
        self.utilization = target.cpu_utilization
        self.percentile = target.latency.percentile
        self.objective = parse_duration(target.latency.max)
        self.objective_text = f"{self.percentile} ≤ {format_duration(self.objective)}"

    def usable_rate(self, point: _Point) -> float:
        """r = min(X, U * k / c): the CPU cap keeps a Pod at the target utilisation."""
        if point.cpu_per_task == 0:
            return point.throughput
        return min(point.throughput, self.utilization * self.cores_per_pod / point.cpu_per_task)

    @staticmethod
    def unmeasured(groups: list[PointRuns], where: str) -> str:
        """Why a model has no point to plan from."""
        if any(g.results for g in groups):
            return f"every point measured{where} had failed tasks"
        failed, unpinned = sum(g.failed for g in groups), sum(g.unpinned for g in groups)
        why = []
        if failed:
            why.append(f"{failed} trial(s) failed")
        if unpinned:
            why.append(f"{unpinned} not pinned (left out under pinning: required)")
        return f"no trial{where} has a Result" + (f" ({', '.join(why)})" if why else "")

    def model_plan(
        self, variant: str, model: str, groups: list[PointRuns], where: str
    ) -> ModelPlan:
        usable = [g for g in groups if g.results and all(r["tasksFailed"] == 0 for r in g.results)]
        points = [_measured(g.results, self.percentile) for g in usable]
        if not points:
            reason = self.unmeasured(groups, where)
            return ModelPlan(variant=variant, model=model, meets=False, reason=reason)
        meeting = [p for p in points if p.latency <= self.objective]
        if not meeting:
            best = min(points, key=lambda p: (p.latency, p.workers))
            reason = (
                f"best {self.percentile} {format_duration(best.latency)} at "
                f"{workers_label(model, best.workers)} > {format_duration(self.objective)}"
            )
            return ModelPlan(variant=variant, model=model, meets=False, reason=reason)
        point = max(meeting, key=lambda p: (self.usable_rate(p), -p.workers))
        rate_per_pod = self.usable_rate(point)
        # A throughput rounded to 0 (a day-long task) is a plan of no end of Pods.
        if rate_per_pod <= 0 or _ceil(self.rate / rate_per_pod) > MAX_PODS:
            reason = (
                f"needs more than {MAX_PODS:,} Pods ({_rate_text(rate_per_pod)} tasks/s each), "
                f"the most Kubernetes supports in one cluster"
            )
            return ModelPlan(variant=variant, model=model, meets=False, reason=reason)
        pods = _ceil(self.rate / rate_per_pod)
        workers_per_pod = (
            1 if model == "sequential" else max(1, _ceil(self.rate * _holding_time(point) / pods))
        )
        basis, note = self.basis(model, pods, point, rate_per_pod)
        return ModelPlan(
            variant=variant, model=model, meets=True, workers=point.workers,
            workers_per_pod=workers_per_pod, pods=pods, cores_per_pod=self.cores_per_pod,
            cores=pods * self.cores_per_pod, memory_bytes=pods * point.memory,
            rate_per_pod=round(rate_per_pod, 3),
            expected_latency_seconds=round(point.latency, 6),
            expected_cpu_utilization=round(
                self.rate / pods * point.cpu_per_task / self.cores_per_pod, 3
            ),
            basis=basis, note=note,
        )  # fmt: skip

    def basis(self, model: str, pods: int, point: _Point, rate_per_pod: float) -> tuple[Basis, str]:
        basis: Basis
        if pods == 1:
            basis = "measured"
            note = f"one Pod at or below the load measured at {workers_label(model, point.workers)}"
        else:
            basis = "extrapolated"
            note = (
                f"{pods} Pods from measurements of one Pod, assuming Pods add linearly "
                f"(one trial is one Pod)"
            )
        if rate_per_pod < point.throughput:
            note += (
                f"; {_rate_text(rate_per_pod)} tasks/s per Pod keeps its CPUs at "
                f"{self.utilization:.0%} (measured {_rate_text(point.throughput)} tasks/s)"
            )
        return basis, note


def capacity_plan(spec: ExperimentSpec, outcomes: Sequence[TrialOutcome]) -> CapacityPlan | None:
    """status.capacityPlan; None when the spec asks for no capacity plan."""
    if spec.capacity is None:
        return None
    target = spec.capacity.target
    planner = _Planner(spec, target)
    rtt = _plan_rtt(spec)
    where = f" at RTT {format_duration(rtt)}" if rtt is not None else ""
    groups = [g for g in group_points(outcomes, spec.pinning) if _at_rtt(g.trial, rtt)]
    models = [
        planner.model_plan(variant, model, [g for g in groups if g.trial.variant == variant], where)
        for variant, model in _variants(spec)
    ]
    plan_target = PlanTarget(
        rate_per_second=round(target.rate_per_second, 3), percentile=target.latency.percentile,
        latency_seconds=round(planner.objective, 6),
        cpu_utilization=round(target.cpu_utilization, 3),
    )  # fmt: skip
    meeting = [(index, m) for index, m in enumerate(models) if m.meets]
    if not meeting:
        display = f"no model meets {planner.objective_text}"
        reasons = "; ".join(f"{m.variant}: {m.reason}" for m in models)
        message = f"{display} for {_rate_text(planner.rate)} tasks/s{where}: {reasons}"
        return CapacityPlan(
            target=plan_target, rtt_seconds=rtt, models=models, display=display, message=message
        )
    _, choice = min(meeting, key=lambda im: (im[1].cores or 0, im[1].memory_bytes or 0, im[0]))
    pods, cpu, variant = choice.pods or 0, planner.cores_per_pod, choice.variant
    shown = f"{pods} Pod{'s' if pods != 1 else ''} {TIMES} {cpu} CPU"
    workers = choice.workers_per_pod or 0
    rtt_text = f" (RTT {format_duration(rtt)})" if rtt is not None else ""
    message = (
        f"{variant}: {shown} ({workers} worker{'s' if workers != 1 else ''} per Pod) for "
        f"{_rate_text(planner.rate)} tasks/s at {planner.objective_text}{rtt_text}, "
        f"expected {planner.percentile} "
        f"{format_duration(choice.expected_latency_seconds or 0.0)}; "
        f"{choice.basis}: {choice.note}"
    )
    return CapacityPlan(
        target=plan_target, rtt_seconds=rtt, models=models, choice=variant, pods=pods,
        cores=choice.cores, memory_bytes=choice.memory_bytes, basis=choice.basis,
        display=f"{shown}, {variant}", message=message,
    )  # fmt: skip
