"""Trial Results → the experiment's answer (status.summary): repetitions aggregated per point,
with their median, spread and confidence interval (cxlab.analysis.stats), then the knees and the
recommendations (cxlab.analysis.recommend). Pure, shared by the local backend and the
operator, so both write the same summary into the same status shape. A point whose CV
exceeds the tolerance is flagged noisy."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from cxlab.analysis.labels import NOISE_CHECKED
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.recommend import (
    LatencyObjective,
    find_knees,
    find_rate_knees,
    recommend,
    recommend_rates,
)
from cxlab.analysis.stats import present_stats, stats
from cxlab.experiments.plan import Trial
from cxlab_contract import histogram
from cxlab_contract.figures import significant
from cxlab_contract.result import Result

Point = dict[str, Any]


class Summary(TypedDict, total=False):
    """status.summary: the points of the matrix, the knees and the recommendations. In a
    cluster experiment's status the compact one: the recommendations with their ties counted
    (tiedCount), how many points, and the ConfigMap holding the whole (summaryIn)."""

    tolerance: float
    points: list[Point]
    knees: list[dict[str, Any]]
    recommendations: list[dict[str, Any]]
    pointCount: int
    summaryIn: str


def _task_switches(result: Result) -> float | None:
    """Context switches of the threads that ran tasks; None where the model cannot tell
    them apart (goroutines) or the Result predates the field."""
    task = result.get("taskContextSwitches")
    return None if task is None else float(task["voluntary"] + task["involuntary"])


def _syscalls(results: list[Result]) -> dict[str, Any] | None:
    """Syscall counts over the repetitions that have them: the total and the futex count
    (the Result keeps futex among its top counts whenever one was made: absent means 0);
    else the reason they are unavailable, never 0; None when no trial asked for them."""
    reported = [r.get("syscalls") for r in results]
    counted = [s for s in reported if s and "total" in s]
    if counted:
        futex = [s["counts"].get("futex", 0) for s in counted]
        return {"total": stats([s["total"] for s in counted]), "futex": stats(futex)}
    unavailable = [s["unavailable"] for s in reported if s and "unavailable" in s]
    return {"unavailable": unavailable[0]} if unavailable else None


def syscalls_requested(points: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any trial asked for syscall counts: tables leave their columns out if not."""
    return any(p.get("syscalls") is not None for p in points)


def _workers_started(results: list[Result]) -> int | None:
    """The median of threads or processes started (an on-demand pool may start fewer than
    its workers); None for Results written before the field."""
    started = [r["workersStarted"] for r in results if r.get("workersStarted") is not None]
    return round(statistics.median(started)) if started else None


def _memory_per_worker(result: Result) -> float:
    # per worker started: an on-demand pool of 10,000 that started 2,000 grew by 2,000 stacks
    started = int(result.get("workersStarted") or result["workers"])
    return float(result["peakRssBytes"] - result["baselineRssBytes"]) / max(started, 1)


def _noisy(point: Point, tolerance: float) -> list[str]:
    """The checked quantities whose CV exceeds the tolerance (one repetition has CV 0: it
    shows "n=1", not noise)."""
    return [key for key in NOISE_CHECKED if point[key]["cv"] > tolerance]


def _measures(results: list[Result]) -> dict[str, Any]:
    """A point's measurements over its counted repetitions."""
    return {
        "effectiveWorkers": results[0]["workers"],
        "workersStarted": _workers_started(results),
        "pool": next((r["pool"] for r in results if r.get("pool")), None),
        "tasksFailed": sum(r["tasksFailed"] for r in results),
        "wallSeconds": stats([r["wallSeconds"] for r in results]),
        "cpuSeconds": stats([r["cpuUserSeconds"] + r["cpuSystemSeconds"] for r in results]),
        "cpuPercent": stats([r["cpuPercent"] for r in results]),
        "peakRssBytes": stats([r["peakRssBytes"] for r in results]),
        "peakVmBytes": present_stats([r.get("peakVmBytes") for r in results]),
        "memoryPerWorkerBytes": round(statistics.fmean(map(_memory_per_worker, results))),
        "contextSwitches": stats(
            [r["voluntaryContextSwitches"] + r["involuntaryContextSwitches"] for r in results]
        ),
        "taskContextSwitches": present_stats([_task_switches(r) for r in results]),
        "syscalls": _syscalls(results),
        "efficiency": _mean_or_none([r["efficiency"] for r in results]),
        "throughputPerSecond": round(
            statistics.fmean(r["throughputPerSecond"] for r in results), 3
        ),
        "latencyP99Seconds": significant(
            statistics.fmean(r["latencySeconds"]["p99"] for r in results)
        ),
    } | _arrival_measures(results)


def _arrival_measures(results: list[Result]) -> dict[str, Any]:
    """An arrival point's: the rate achieved, the p99 latency (from the schedule: queueing
    in it) and the wait for a worker over its repetitions, the arrivals dropped."""
    arrivals = [a for r in results if (a := r.get("arrival")) is not None]
    if len(arrivals) != len(results):
        return {}
    return {
        "achievedRatePerSecond": stats([a["achievedRatePerSecond"] for a in arrivals]),
        "completedPerSecond": stats([r["throughputPerSecond"] for r in results]),
        "p50Seconds": stats([r["latencySeconds"]["p50"] for r in results]),
        "p90Seconds": stats([r["latencySeconds"]["p90"] for r in results]),
        "p99Seconds": stats([r["latencySeconds"]["p99"] for r in results]),
        "waitP99Seconds": stats([histogram.quantile(a["waitHistogram"], 0.99) for a in arrivals]),
        "serviceP99Seconds": stats(
            [histogram.quantile(a["serviceHistogram"], 0.99) for a in arrivals]
        ),
        "maxLagSeconds": max(a["maxLagSeconds"] for a in arrivals),
        "dropped": sum(a["dropped"] for a in arrivals),
        "maxQueue": max(a["maxQueue"] for a in arrivals),
    }


@dataclass(frozen=True)
class PointRuns:
    """One point of the matrix (variant, Pods, workers, RTT) and its trials: the Results that count
    under the experiment's pinning, and how many did not."""

    trial: Trial  # the first repetition's: the point's model, variant, Pods, workers, RTT, rate
    members: list[TrialOutcome]
    results: list[Result]
    unpinned: int  # measured, but not on the cores asked for (left out under "required")
    saturated: int = 0  # measured by a generator that could not keep its rate (left out)

    @property
    def skipped(self) -> int:
        """Not run: a point it can only do worse than broke an objective (abortOnFail)."""
        return sum(o.skipped is not None for o in self.members)

    @property
    def failed(self) -> int:
        return len(self.members) - len(self.results) - self.unpinned - self.saturated - self.skipped


def group_points(outcomes: Iterable[TrialOutcome], pinning: str) -> list[PointRuns]:
    """The outcomes by point, in the order the points first appear; shared by the summary,
    the capacity plan and a schedule's history, so all three see the same repetitions."""
    groups: dict[tuple[str, int, int, float | None, float | None], list[TrialOutcome]] = {}
    for outcome in outcomes:
        trial = outcome.trial
        key = (trial.variant, trial.pods, trial.workers, trial.rtt_seconds, trial.rate)
        groups.setdefault(key, []).append(outcome)
    return [
        PointRuns(
            trial=members[0].trial,
            members=members,
            results=[o.result for o in members if o.counts(pinning) and o.result is not None],
            unpinned=sum(
                o.succeeded and o.saturated is None and not o.counts(pinning) for o in members
            ),
            saturated=sum(o.succeeded and o.saturated is not None for o in members),
        )
        for members in groups.values()
    ]


def _points(
    outcomes: Iterable[TrialOutcome], pinning: str, tolerance: float
) -> list[dict[str, Any]]:
    points = []
    for group in group_points(outcomes, pinning):
        trial, results = group.trial, group.results
        point: dict[str, Any] = {
            "variant": trial.variant,
            "model": trial.model,
            "gomaxprocs": trial.gomaxprocs,
            "pods": trial.pods,
            "workers": trial.workers,
            "rttSeconds": trial.rtt_seconds,
            "repetitions": len(results),
            "failedTrials": group.failed,
        }
        if trial.rate is not None:
            point["ratePerSecond"] = trial.rate
        if group.unpinned:
            point["unpinnedTrials"] = group.unpinned  # measured, but not on its own cores
        if group.skipped:
            point["skippedTrials"] = group.skipped  # not run (abortOnFail)
        if group.saturated:  # the generator could not keep the rate: the runner was measured
            point["saturatedTrials"] = group.saturated
            why = next(o.saturated for o in group.members if o.saturated is not None)
            point["saturation"] = why
        if results:
            point |= _measures(results)
            noisy = _noisy(point, tolerance)
            point |= {"noisy": bool(noisy), "noisyQuantities": noisy}
        points.append(point)
    return points


def _mean_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 4) if present else None


def summarize(
    outcomes: list[TrialOutcome],
    tolerance: float,
    pinning: str = "required",
    objective: LatencyObjective | None = None,
) -> Summary:
    """The `status.summary` of an experiment; under pinning "required" an unpinned trial's
    Result stays in its entry but not in the points, knees and recommendations, nor does a
    trial whose generator could not keep its rate. Arrival runs have knees in the rate: the
    largest rate whose latency holds (`objective`, or else p99's flat part)."""
    points = _points(outcomes, pinning, tolerance)
    if any("ratePerSecond" in p for p in points):
        knees = find_rate_knees(points, tolerance, objective)
        recommendations = recommend_rates(knees, tolerance, objective)
    else:
        knees, recommendations = find_knees(points, tolerance), recommend(points, tolerance)
    return {
        "tolerance": tolerance,
        "points": points,
        "knees": knees,
        "recommendations": recommendations,
    }
