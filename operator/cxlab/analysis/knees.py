"""The knees of a summary's points (status.summary.knees): per model variant and RTT, where adding
workers stops paying; for arrival runs, per configuration, the largest rate it holds. Pure; by
each point's median (cxlab.analysis.stats), so one outlier does not move them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated

from cxlab.analysis.labels import concurrency
from cxlab.analysis.point import ArrivalPoint, MeasuredPoint, Point
from cxlab.analysis.stats import center
from cxlab.shape import ONE_OBJECT, Shape, nullable
from cxlab_contract.durations import format_duration


class Configuration(Shape):
    """The configuration a knee (or an arrival run's recommendation) names."""

    variant: str
    model: str
    gomaxprocs: int | None = nullable()
    rtt_seconds: float | None = nullable()
    pods: int = 1
    """Runner Pods of each trial (1 in summaries written before trials of several Pods)."""
    workers: int
    """Workers per Pod as the spec gives them (0: one per task)."""
    effective_workers: int
    """As run: the spec's 0 resolved to one per task."""
    workers_started: int | None = nullable()
    pool: str | None = nullable()


class Knee(Configuration):
    """The fewest workers in all whose median wall time is within the tolerance of the
    variant's best at this RTT."""

    wall_seconds: float
    best_wall_seconds: float
    best_workers: int
    best_pods: int = 1
    cpu_seconds: float
    cpu_percent: float
    peak_rss_bytes: float
    peak_vm_bytes: float | None = nullable()
    noisy: bool = False


class RateKnee(Configuration):
    """An arrival run's knee: the largest rate at and below which every measured rate held."""

    rate_per_second: float | None = nullable()
    """Null when not even the lowest rate held."""
    highest_measured: bool
    """The highest rate measured held: the configuration may hold more."""
    criterion: str
    """What holding meant: the objective, or p99's flat part."""
    latency_p99_seconds: float
    """At the knee (or, holding none, at the lowest rate)."""
    cpu_percent: float
    peak_rss_bytes: float
    noisy: bool = False


# The knees of a summary are all of one kind: in the workers, or for arrival runs in the rate.
AnyKnee = Annotated[RateKnee | Knee, ONE_OBJECT]


def answers(points: Iterable[Point]) -> list[MeasuredPoint]:
    """The points that can be an answer: they ran and none of their tasks failed."""
    return [p for p in points if isinstance(p, MeasuredPoint) and p.tasks_failed == 0]


def wall(point: MeasuredPoint) -> float:
    return center(point.wall_seconds)


def within(
    members: Sequence[MeasuredPoint], tolerance: float
) -> tuple[MeasuredPoint, list[MeasuredPoint]]:
    """The fastest point by median wall time, and every point within `tolerance` of it."""
    fastest = min(members, key=wall)
    return fastest, [p for p in members if wall(p) <= wall(fastest) * (1 + tolerance)]


def _configuration(point: MeasuredPoint) -> Configuration:
    return Configuration(
        variant=point.variant, model=point.model, gomaxprocs=point.gomaxprocs,
        rtt_seconds=point.rtt_seconds, pods=point.pods, workers=point.workers,
        effective_workers=point.effective_workers, workers_started=point.workers_started,
        pool=point.pool,
    )  # fmt: skip


def find_knees(points: Iterable[Point], tolerance: float) -> list[Knee]:
    """Per model variant and RTT: the fewest workers in all (Pods x workers per Pod) whose
    median wall time is within `tolerance` of that variant's best — where adding workers
    stops paying; of equal totals, the fewest Pods."""
    groups: dict[tuple[str, float | None], list[MeasuredPoint]] = {}
    for point in answers(points):
        groups.setdefault((point.variant, point.rtt_seconds), []).append(point)
    knees = []
    for members in groups.values():
        best, close = within(members, tolerance)
        knee = min(close, key=lambda p: (concurrency(p), p.pods, wall(p)))
        vm = knee.peak_vm_bytes
        knees.append(
            Knee(
                **dict(_configuration(knee)),
                wall_seconds=wall(knee),
                best_wall_seconds=wall(best),
                best_workers=best.workers,
                best_pods=best.pods,
                cpu_seconds=center(knee.cpu_seconds),
                cpu_percent=center(knee.cpu_percent),
                peak_rss_bytes=center(knee.peak_rss_bytes),
                peak_vm_bytes=None if vm is None else center(vm),
                noisy=knee.noisy,
            )
        )
    return knees


# Arrival runs (workloads/CONTRACT.md, Duration runs): the knee is in the rate, not in the
# workers. A rate "holds" when no task failed or was dropped and the latency meets the
# objective — or, without one, when p99 is still on its flat part, where no task queues: within
# the tolerance of a task's own p99 service time at the lowest rate measured (what a task takes
# when nothing waits), plus the lag the generator may have (maxLag). Against the service time,
# not the lowest rate's latency: a configuration that already queues at its lowest rate (or
# measured at one rate only) is not flat there.


@dataclass(frozen=True)
class LatencyObjective:
    """The latency a rate must keep (spec.capacity.target.latency)."""

    percentile: str  # p50, p90 or p99
    seconds: float

    @property
    def text(self) -> str:
        return f"{self.percentile} ≤ {format_duration(self.seconds)}"


def _rate_holds(point: ArrivalPoint, objective: LatencyObjective | None, flat: float) -> bool:
    if point.tasks_failed or point.dropped:
        return False
    if objective is not None:
        return center(point.latency(objective.percentile)) <= objective.seconds
    return center(point.p99_seconds) <= flat


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def rate_of(point: Point) -> float:
    """A point's offered rate (every point of an arrival run has one)."""
    return point.rate_per_second or 0.0


def find_rate_knees(
    points: Iterable[Point], tolerance: float, objective: LatencyObjective | None = None
) -> list[RateKnee]:
    """Per configuration (variant, Pods, workers, RTT): the largest rate at and below which
    every measured rate holds (see above); None when not even the lowest does."""
    groups: dict[tuple[str, int, int, float | None], list[ArrivalPoint]] = {}
    for point in points:
        if isinstance(point, ArrivalPoint):
            key = (point.variant, point.pods, point.workers, point.rtt_seconds)
            groups.setdefault(key, []).append(point)
    knees = []
    for members in groups.values():
        members.sort(key=rate_of)
        lowest = members[0]
        service = center(lowest.service_p99_seconds)
        flat = service * (1 + tolerance) + lowest.max_lag_seconds
        held = None
        for point in members:
            if not _rate_holds(point, objective, flat):
                break
            held = point
        criterion = (
            objective.text
            if objective is not None
            else f"p99 within {tolerance:.0%} of a task's own {ms(service)} (p99 service "
            f"time at {rate_of(lowest):g}/s) + {ms(lowest.max_lag_seconds)} of lag"
        )
        shown = held or lowest
        knees.append(
            RateKnee(
                **dict(_configuration(shown)),
                rate_per_second=None if held is None else held.rate_per_second,
                highest_measured=held is not None and held is members[-1],
                criterion=criterion,
                latency_p99_seconds=center(shown.p99_seconds),
                cpu_percent=center(shown.cpu_percent),
                peak_rss_bytes=center(shown.peak_rss_bytes),
                noisy=shown.noisy,
            )
        )
    return knees
