"""Trial Results → the experiment's answer (status.summary): repetitions aggregated per point,
with their median, spread and confidence interval (cxlab.analysis.stats), then the knees
(cxlab.analysis.knees) and the recommendations (cxlab.analysis.recommend). Pure, shared by the
local backend and the operator, so both write the same summary into the same status shape. A
point whose CV exceeds the tolerance is flagged noisy."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cxlab.analysis.knees import AnyKnee, LatencyObjective, find_knees, find_rate_knees
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.point import AnyPoint, ArrivalPoint, MeasuredPoint, Point, SyscallSummary
from cxlab.analysis.recommend import AnyRecommendation, recommend, recommend_rates
from cxlab.analysis.service_figures import ServiceMedians, service_medians
from cxlab.analysis.stats import present_stats, stats
from cxlab.experiments.plan import Trial
from cxlab.shape import Maybe, Shape
from cxlab_contract import histogram
from cxlab_contract.figures import significant
from cxlab_contract.result import Arrival, Result


class Summary(Shape):
    """The points of the matrix, the knees and the recommendations. In a cluster
    experiment's status the compact one: the recommendations with their ties counted
    (tiedCount), how many points, and the ConfigMap holding the whole (summaryIn)."""

    tolerance: float
    """spec.tolerance, as the knees and recommendations used it."""
    points: Maybe[list[AnyPoint]] = None
    knees: Maybe[list[AnyKnee]] = None
    recommendations: list[AnyRecommendation]
    point_count: Maybe[int] = None
    summary_in: Maybe[str] = None
    """The ConfigMap holding the whole summary (cxlab.experiments.results_store)."""

    @property
    def compact(self) -> bool:
        """Whether its points and knees are elsewhere (summaryIn)."""
        return self.points is None

    @property
    def arrivals(self) -> bool:
        """An arrival run's: knees and recommendations in the rate."""
        return any(p.rate_per_second is not None for p in self.points or ())


def _task_switches(result: Result) -> float | None:
    """Context switches of the threads that ran tasks; None where the model cannot tell
    them apart (goroutines) or the Result predates the field."""
    task = result.get("taskContextSwitches")
    return None if task is None else float(task["voluntary"] + task["involuntary"])


def _syscalls(results: list[Result]) -> SyscallSummary | None:
    """Syscall counts over the repetitions that have them: the total and the futex count
    (the Result keeps futex among its top counts whenever one was made: absent means 0);
    else the reason they are unavailable, never 0; None when no trial asked for them."""
    reported = [r.get("syscalls") for r in results]
    counted = [s for s in reported if s and "total" in s]
    if counted:
        futex = [s["counts"].get("futex", 0) for s in counted]
        return SyscallSummary(total=stats([s["total"] for s in counted]), futex=stats(futex))
    unavailable = [s["unavailable"] for s in reported if s and "unavailable" in s]
    return SyscallSummary(unavailable=unavailable[0]) if unavailable else None


def syscalls_requested(points: Iterable[Point]) -> bool:
    """Whether any trial asked for syscall counts: tables leave their columns out if not."""
    return any(isinstance(p, MeasuredPoint) and p.syscalls is not None for p in points)


def _workers_started(results: list[Result]) -> int | None:
    """The median of threads or processes started (an on-demand pool may start fewer than
    its workers); None for Results written before the field."""
    started = [r["workersStarted"] for r in results if r.get("workersStarted") is not None]
    return round(statistics.median(started)) if started else None


def _memory_per_worker(result: Result) -> float:
    # per worker started: an on-demand pool of 10,000 that started 2,000 grew by 2,000 stacks
    started = int(result.get("workersStarted") or result["workers"])
    return float(result["peakRssBytes"] - result["baselineRssBytes"]) / max(started, 1)


@dataclass(frozen=True)
class PointRuns:
    """One point of the matrix (variant, Pods, workers, RTT) and its trials: the Results that count
    under the experiment's pinning, and how many did not."""

    trial: Trial  # the first repetition's: the point's model, variant, Pods, workers, RTT, rate
    members: list[TrialOutcome]
    counted: list[TrialOutcome]  # the members whose Results count, in order
    unpinned: int  # measured, but not on the cores asked for (left out under "required")
    saturated: int = 0  # measured by a generator that could not keep its rate (left out)

    @property
    def results(self) -> list[Result]:
        """The counted members' Results."""
        return [o.result for o in self.counted if o.result is not None]

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
        key = (trial.variant, trial.pods, trial.workers, trial.rtt_seconds, trial.rate_per_second)
        groups.setdefault(key, []).append(outcome)
    return [
        PointRuns(
            trial=members[0].trial,
            members=members,
            counted=[o for o in members if o.counts(pinning) and o.result is not None],
            unpinned=sum(
                o.succeeded and o.saturated is None and not o.counts(pinning) for o in members
            ),
            saturated=sum(o.succeeded and o.saturated is not None for o in members),
        )
        for members in groups.values()
    ]


def _identity(group: PointRuns) -> Point:
    """Who the point is and what became of its trials."""
    trial = group.trial
    why = next((o.saturated for o in group.members if o.saturated is not None), None)
    return Point(
        variant=trial.variant, model=trial.model, gomaxprocs=trial.gomaxprocs, pods=trial.pods,
        workers=trial.workers, rtt_seconds=trial.rtt_seconds, repetitions=len(group.results),
        failed_trials=group.failed, rate_per_second=trial.rate_per_second,
        unpinned_trials=group.unpinned or None,  # measured, but not on its own cores
        skipped_trials=group.skipped or None,  # not run (abortOnFail)
        # the generator could not keep the rate: the runner was measured
        saturated_trials=group.saturated or None, saturation=why if group.saturated else None,
    )  # fmt: skip


def _measured(
    identity: Point, results: list[Result], tolerance: float, service: ServiceMedians
) -> MeasuredPoint:
    """A point's measurements over its counted repetitions."""
    wall = stats([r["wallSeconds"] for r in results])
    cpu = stats([r["cpuUserSeconds"] + r["cpuSystemSeconds"] for r in results])
    rss = stats([r["peakRssBytes"] for r in results])
    # The checked quantities whose CV exceeds the tolerance (one repetition has CV 0: it
    # shows "n=1", not noise).
    checked = {"wallSeconds": wall, "cpuSeconds": cpu, "peakRssBytes": rss}
    noisy = [key for key, spread in checked.items() if spread.cv > tolerance]
    return MeasuredPoint(
        **dict(identity), **dict(service),
        effective_workers=results[0]["workers"], workers_started=_workers_started(results),
        pool=next((r["pool"] for r in results if r.get("pool")), None),
        tasks_failed=sum(r["tasksFailed"] for r in results), wall_seconds=wall,
        cpu_seconds=cpu, cpu_percent=stats([r["cpuPercent"] for r in results]),
        peak_rss_bytes=rss, peak_vm_bytes=present_stats([r.get("peakVmBytes") for r in results]),
        memory_per_worker_bytes=round(statistics.fmean(map(_memory_per_worker, results))),
        context_switches=stats(
            [r["voluntaryContextSwitches"] + r["involuntaryContextSwitches"] for r in results]
        ),
        task_context_switches=present_stats([_task_switches(r) for r in results]),
        syscalls=_syscalls(results), efficiency=_mean_or_none([r["efficiency"] for r in results]),
        throughput_per_second=round(statistics.fmean(r["throughputPerSecond"] for r in results), 3),
        latency_p99_seconds=significant(
            statistics.fmean(r["latencySeconds"]["p99"] for r in results)
        ),
        noisy=bool(noisy), noisy_quantities=noisy,
    )  # fmt: skip


def _arrival(measured: MeasuredPoint, results: list[Result]) -> MeasuredPoint:
    """An arrival point: the rate achieved, the latency (from the schedule: queueing in it)
    and the wait for a worker over its repetitions, the arrivals dropped; as it was when a
    repetition has no arrival (a Result before arrival runs)."""
    arrivals: list[Arrival] = [a for r in results if (a := r.get("arrival")) is not None]
    if len(arrivals) != len(results):
        return measured

    def latency(percentile: str) -> list[float]:
        return [r["latencySeconds"][percentile] for r in results]  # type: ignore[literal-required]

    return ArrivalPoint(
        **dict(measured),
        achieved_rate_per_second=stats([a["achievedRatePerSecond"] for a in arrivals]),
        completed_per_second=stats([r["throughputPerSecond"] for r in results]),
        p50_seconds=stats(latency("p50")), p90_seconds=stats(latency("p90")),
        p99_seconds=stats(latency("p99")),
        wait_p99_seconds=stats([histogram.quantile(a["waitHistogram"], 0.99) for a in arrivals]),
        service_p99_seconds=stats(
            [histogram.quantile(a["serviceHistogram"], 0.99) for a in arrivals]
        ),
        max_lag_seconds=max(a["maxLagSeconds"] for a in arrivals),
        dropped=sum(a["dropped"] for a in arrivals), max_queue=max(a["maxQueue"] for a in arrivals),
    )  # fmt: skip


def summary_points(outcomes: Iterable[TrialOutcome], pinning: str, tolerance: float) -> list[Point]:
    """Every point of the outcomes, measured where a repetition counts."""
    points = []
    for group in group_points(outcomes, pinning):
        point = _identity(group)
        if group.results:
            service = service_medians([o.service for o in group.counted])
            point = _arrival(_measured(point, group.results, tolerance, service), group.results)
        points.append(point)
    return points


def _mean_or_none(values: Sequence[float | None]) -> float | None:
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
    points = summary_points(outcomes, pinning, tolerance)
    if any(p.rate_per_second is not None for p in points):
        rate_knees = find_rate_knees(points, tolerance, objective)
        return Summary(
            tolerance=tolerance, points=points, knees=[*rate_knees],
            recommendations=[*recommend_rates(rate_knees, tolerance)],
        )  # fmt: skip
    return Summary(
        tolerance=tolerance, points=points, knees=[*find_knees(points, tolerance)],
        recommendations=[*recommend(points, tolerance)],
    )  # fmt: skip
