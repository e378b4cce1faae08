"""A finished run (a ConcurrencyExperiment document, from the cluster or a local result.json)
as one compact history entry: per point the median of each compared metric and, with
repetitions, every repetition's value (the spread `cxlab compare` shows). Pure; the operator
keeps the entries in the schedule's status, `cxlab history` reads them from a folder."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.analysis.service_plan import ServicePlan
from cxlab.analysis.summary import group_points
from cxlab.conditions import condition_of
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.record import outcomes_of
from cxlab.experiments.resource import ConcurrencyExperiment, parse_experiment
from cxlab.experiments.status import Environment, ExperimentStatus, Phase, Verdict
from cxlab.shape import Maybe, Shape
from cxlab.times import parse_time, timestamp
from cxlab_contract.durations import format_duration
from cxlab_contract.result import Result

# Where a run's slot is written on the run itself (the operator sets it when creating it).
SCHEDULED_TIME_ANNOTATION = "cxlab.dev/scheduled-time"
# status.history in all: whatever the template's matrix (up to 1,000 trials), the schedule stays
# far below etcd's 1.5 MiB; a larger matrix keeps fewer entries than historyLimit.
MAX_HISTORY_BYTES = 512 * 1024
# Significant digits kept per value: far finer than any run-to-run noise, and it keeps an
# entry of a 20-point run near 3 KiB (docs/schedules.md).
DIGITS = 5


def _cpu_per_task(result: Result) -> float:
    cpu = float(result["cpuUserSeconds"] + result["cpuSystemSeconds"])
    return cpu / max(int(result["tasks"]), 1)


# The compared metrics, each read from one Result.
METRICS: dict[str, Callable[[Result], float]] = {
    "wallSeconds": lambda r: float(r["wallSeconds"]),
    "throughputPerSecond": lambda r: float(r["throughputPerSecond"]),
    "cpuSecondsPerTask": _cpu_per_task,
    "latencyP99Seconds": lambda r: float(r["latencySeconds"]["p99"]),
    "peakRssBytes": lambda r: float(r["peakRssBytes"]),
}


# The service's plan's figures (status.servicePlan), per variant: each a point of its own,
# "service <variant>", compared over runs as the Results' metrics are.
SERVICE_METRICS = ("capacityPerCore", "plannedReplicas")
# Every metric a point may have, as named in status, metrics and messages.
COMPARED = (*METRICS, *SERVICE_METRICS)


class HistoryPoint(Shape):
    """One point of a run: medians over its repetitions; or one variant of its service."""

    point: str
    """The point's key, the same in every run of one template: variant, workers, RTT."""
    model: str
    n: int
    """Repetitions that counted (pinned, no failed trial)."""
    wall_seconds: Maybe[float] = None
    throughput_per_second: Maybe[float] = None
    cpu_seconds_per_task: Maybe[float] = None
    latency_p99_seconds: Maybe[float] = None
    peak_rss_bytes: Maybe[float] = None
    capacity_per_core: Maybe[float] = None
    """A service variant's point: the tasks/s one core of it carries, its searched rate at
    the fewest replicas measured over the cores they request (absent when neither the
    variant nor the Deployment requests any)."""
    planned_replicas: Maybe[float] = None
    """A service variant's point: the replicas its plan needs for capacity.target (absent
    when it cannot meet it)."""
    samples: Maybe[dict[str, list[float]]] = None
    """Every repetition's value per metric (only when n > 1): the spread `cxlab compare`
    shows (the regression test compares runs by their medians)."""

    def value(self, metric: str) -> float | None:
        """The median of a metric, by its name (a key of METRICS, as the point writes it)."""
        value: float | None = getattr(self, _METRIC_FIELDS[metric])
        return value


# A metric's field in a point (wallSeconds → wall_seconds): a metric is named as written.
_METRIC_FIELDS = {
    field.alias: name
    for name, field in HistoryPoint.model_fields.items()
    if field.alias in COMPARED
}


class PlanBrief(Shape):
    """The run's capacity plan in short: Pods needed over time, and how its run went."""

    display: str
    pods: Maybe[int] = None
    cores: Maybe[int] = None
    variant: Maybe[str] = None
    workers_per_pod: Maybe[int] = None
    basis: Maybe[str] = None
    """measured, extrapolated, verified or refuted (status.capacityPlan.basis)."""
    verified_latency_seconds: Maybe[float] = None
    """The objective's percentile its last verification measured."""
    verified_rate_per_second: Maybe[float] = None
    """The arrival rate its last verification achieved."""
    verified_mean_wait_seconds: Maybe[float] = None
    """The mean wait for a worker its last verification measured."""


class ServicePlanBrief(Shape):
    """The run's service plan in short (status.servicePlan): replicas over time."""

    display: str
    variant: Maybe[str] = None
    replicas: Maybe[int] = None
    cores: Maybe[float] = None
    basis: Maybe[str] = None
    """measured, extrapolated, verified or refuted (status.servicePlan.basis)."""


class HistoryEntry(Shape):
    """One run of a schedule, compact."""

    run: str
    """The run's (experiment's) name."""
    scheduled_time: Maybe[datetime] = None
    finished_time: Maybe[datetime] = None
    phase: str
    """Succeeded or Failed (a run whose trials all ended; some may have failed)."""
    message: Maybe[str] = None
    points: Maybe[list[HistoryPoint]] = None
    plan: Maybe[PlanBrief] = None
    service_plan: Maybe[ServicePlanBrief] = None
    environment: Maybe[Environment] = None
    """The run's calibration and fingerprint (status.environment): where a regression's
    calibration moved with it, the environment is blamed, not the code."""
    regressed: Maybe[bool] = None
    """Found regressed against its baseline: kept out of later baselines until acknowledged."""
    objectives: Maybe[Verdict] = None
    """The run's verdict on spec.objectives (its ObjectivesMet condition); absent without
    objectives."""
    objectives_message: Maybe[str] = None
    """What broke, or what could not be told (absent when met)."""


def _round(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def point_key(variant: str, workers: int, rtt_seconds: float | None, rtt_axis: bool) -> str:
    """e.g. "asyncio w=1000", or "asyncio w=1000 rtt=100ms" when the matrix has several RTTs.
    With one RTT it is left out, so a template edited to another RTT (a backend that got
    slower) compares with the runs before the edit, which is what a regression is."""
    key = f"{variant} w={workers or 'per-task'}"
    if rtt_axis and rtt_seconds is not None:
        key += f" rtt={format_duration(rtt_seconds)}"
    return key


def _points(experiment: ConcurrencyExperiment, status: ExperimentStatus) -> list[HistoryPoint]:
    spec = experiment.spec
    outcomes = outcomes_of(plan_trials(spec), status.entries)
    rtt_axis = len(spec.workload.rtt_seconds()) > 1
    points = []
    for group in group_points(outcomes, spec.pinning):
        trial, results = group.trial, group.results
        point = HistoryPoint(
            point=point_key(trial.variant, trial.workers, trial.rtt_seconds, rtt_axis),
            model=trial.model,
            n=len(results),
        )
        if results:
            values = {name: [read(r) for r in results] for name, read in METRICS.items()}
            medians = {name: _round(statistics.median(v)) for name, v in values.items()}
            point = point.model_copy(update=_by_name(medians))
            if len(results) > 1:
                point.samples = {name: [_round(x) for x in v] for name, v in values.items()}
        points.append(point)
    return points


def _by_name(by_alias: Mapping[str, float]) -> dict[str, float]:
    """HistoryPoint's field names of metrics named as written (wallSeconds → wall_seconds)."""
    return {_METRIC_FIELDS[key]: value for key, value in by_alias.items()}


def entry_of(document: Mapping[str, Any], scheduled_time: str | None = None) -> dict[str, Any]:
    """history_entry as written (to a schedule's status, or read from a history folder)."""
    return history_entry(document, scheduled_time).document()


def history_entry(document: Mapping[str, Any], scheduled_time: str | None = None) -> HistoryEntry:
    """The history entry of a finished run; its slot from the run's annotation unless given."""
    metadata = document["metadata"]
    experiment = parse_experiment(dict(document))
    status = ExperimentStatus.read(document.get("status"))
    annotations = metadata.get("annotations") or {}
    scheduled = scheduled_time or annotations.get(SCHEDULED_TIME_ANNOTATION)
    failed = condition_of(status.conditions, "Failed")
    plan, served = status.capacity_plan, status.service_plan
    points = _points(experiment, status) if status.trials else None
    if served is not None:
        points = [*(points or []), *service_points(served)]
    entry = HistoryEntry(
        run=metadata["name"],
        phase=status.phase or Phase.FAILED,
        scheduled_time=parse_time(scheduled) if scheduled else status.start_time,
        finished_time=status.completion_time,
        message=failed.message[:300] if failed and failed.true and failed.message else None,
        points=points, plan=None if plan is None else plan_brief(plan),
        service_plan=None if served is None else ServicePlanBrief(
            display=served.display, variant=served.choice, replicas=served.replicas,
            cores=served.cores, basis=served.basis,
        ),
        environment=status.environment,
    )  # fmt: skip
    if status.objectives:
        verdict = condition_of(status.conditions, "ObjectivesMet")
        entry.objectives = _VERDICTS.get(verdict.status if verdict else "Unknown", "Inconclusive")
        if entry.objectives != "Met" and verdict is not None and verdict.message:
            entry.objectives_message = verdict.message[:300]
    return entry


# The ObjectivesMet condition's status as the run's verdict.
_VERDICTS: dict[str, Verdict] = {"True": "Met", "False": "Broken", "Unknown": "Inconclusive"}


def service_points(plan: ServicePlan) -> list[HistoryPoint]:
    """Each variant of the service's plan as a point: its capacity per core and its planned
    replicas, the figures a capacity regression shows in (the same rate needs more)."""
    points = []
    for variant in plan.variants:
        point = HistoryPoint(point=f"service {variant.variant}", model="service", n=1)
        fewest = min(variant.measured, key=lambda m: m.replicas, default=None)
        if fewest is not None and variant.cores_per_replica:
            cores = fewest.replicas * variant.cores_per_replica
            point.capacity_per_core = _round(fewest.rate_per_second / cores)
        if variant.meets and variant.replicas is not None:
            point.planned_replicas = float(variant.replicas)
        points.append(point)
    return points


def plan_brief(plan: CapacityPlan) -> PlanBrief:
    """The plan and its last verification's figures, in short."""
    chosen = next((m for m in plan.models if m.variant == plan.choice), None)
    last = plan.verification[-1] if plan.verification else None
    return PlanBrief(
        display=plan.display, pods=plan.pods, cores=plan.cores, variant=plan.choice,
        workers_per_pod=chosen.workers_per_pod if chosen else None, basis=plan.basis,
        verified_latency_seconds=last.latency_seconds if last else None,
        verified_rate_per_second=last.achieved_rate_per_second if last else None,
        verified_mean_wait_seconds=last.mean_wait_seconds if last else None,
    )  # fmt: skip


def newest_succeeded(history: Sequence[HistoryEntry]) -> HistoryEntry | None:
    """The newest entry of a succeeded run: what is compared, planned from and shown."""
    return next((e for e in reversed(history) if e.phase == Phase.SUCCEEDED), None)


def appended(
    history: Sequence[HistoryEntry], entry: HistoryEntry, limit: int
) -> list[HistoryEntry]:
    """The history with the entry in its place (by scheduled time, then name): at most
    `limit` entries and MAX_HISTORY_BYTES as written, the oldest going first. An entry for a
    run already there replaces it, so recording a run twice (a restart between two writes)
    keeps one. Only the newest succeeded entry keeps its repetitions' samples (the spread
    `cxlab compare` shows): the regression test compares runs by their medians."""
    kept = [e for e in history if e.run != entry.run] + [entry]
    kept.sort(key=lambda e: (timestamp(e.scheduled_time) if e.scheduled_time else "", e.run))
    newest = newest_succeeded(kept)
    kept = [e if e is newest else _without_samples(e) for e in kept][-limit:]
    while len(kept) > 1 and _size(kept) > MAX_HISTORY_BYTES:
        kept.pop(0)
    return kept


def _size(history: Sequence[HistoryEntry]) -> int:
    return len(json.dumps([e.document() for e in history], separators=(",", ":")))


def _without_samples(entry: HistoryEntry) -> HistoryEntry:
    if not entry.points:
        return entry
    points = [p.model_copy(update={"samples": None}) for p in entry.points]
    return entry.model_copy(update={"points": points})
