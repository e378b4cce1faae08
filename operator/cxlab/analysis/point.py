"""A point of a summary (status.summary.points[]): one configuration of the matrix (variant,
Pods, workers, RTT, rate) and its counted repetitions. Three kinds, one object in the CRD
(cxlab.shape.ONE_OBJECT): a point none of whose repetitions counted (Point: who it is and why
not), a measured one (MeasuredPoint: the Results' medians, spreads and noise), and a measured
point of an arrival run (ArrivalPoint: its rates, latencies from the schedule, waits)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from cxlab.analysis.service_figures import ServiceMedians
from cxlab.analysis.stats import Spread
from cxlab.shape import ONE_OBJECT, Maybe, Shape, nullable


class SyscallSummary(Shape):
    """System calls over the repetitions that counted them, or why they could not be."""

    total: Maybe[Spread] = None
    futex: Maybe[Spread] = None
    """futex calls (0 where a Result's top counts have none: they keep futex whenever one
    was made)."""
    unavailable: Maybe[str] = None
    """Why the platform would not count them (never a count of 0)."""


class Point(Shape):
    """A point of the matrix: its configuration and what became of its trials."""

    variant: str
    """The model as measured, e.g. goroutines (GOMAXPROCS 1)."""
    model: str
    gomaxprocs: int | None = nullable()
    pods: int = 1
    """Runner Pods of each trial (1 in summaries written before trials of several Pods)."""
    workers: int
    """Workers per Pod as the spec gives them (0: one per task)."""
    rtt_seconds: float | None = nullable()
    repetitions: int
    """Repetitions that count: measured, pinned (under pinning: required), generator on time."""
    failed_trials: int
    rate_per_second: Maybe[float] = None
    """An arrival run's offered rate, the whole trial's."""
    unpinned_trials: Maybe[int] = None
    """Measured, but not on cores of their own (left out under pinning: required)."""
    skipped_trials: Maybe[int] = None
    """Not run: a point it can only do worse than broke an objective (abortOnFail)."""
    saturated_trials: Maybe[int] = None
    """Measured by a generator that could not keep its rate: the runner, not the model."""
    saturation: Maybe[str] = None
    """Why the generator could not keep the rate (the first such trial's)."""

    @property
    def measured(self) -> bool:
        return isinstance(self, MeasuredPoint)


class MeasuredPoint(Point, ServiceMedians):
    """A point with repetitions that count: the medians knees and recommendations go by (and,
    against a service subject, the service's own figures: ServiceMedians)."""

    effective_workers: int
    """Workers per Pod as run: the spec's 0 resolved to one per task."""
    workers_started: int | None = nullable()
    """The median of threads or processes started (an on-demand pool may start fewer)."""
    pool: str | None = nullable()
    """The kind of pool the Results report (threads: onDemand or fixed)."""
    tasks_failed: int
    wall_seconds: Spread
    cpu_seconds: Spread
    """User and system CPU time."""
    cpu_percent: Spread
    peak_rss_bytes: Spread
    peak_vm_bytes: Spread | None = nullable()
    memory_per_worker_bytes: int
    """Resident memory grown per worker started, the mean over the repetitions."""
    context_switches: Spread
    task_context_switches: Spread | None = nullable()
    """Only the threads that ran tasks; null where the model cannot tell them apart."""
    syscalls: SyscallSummary | None = nullable()
    """Null when no trial asked for them."""
    efficiency: float | None = nullable()
    """The floor over the wall time, the mean; null where a run has no floor."""
    throughput_per_second: float
    latency_p99_seconds: float
    """The mean of the repetitions' p99."""
    noisy: bool = False
    """A checked quantity's CV is over the tolerance (false in summaries before the check)."""
    noisy_quantities: list[str] = Field(default_factory=list)
    """Which: wallSeconds, cpuSeconds, peakRssBytes."""

    def noise_checked(self) -> dict[str, Spread]:
        """The quantities an answer depends on, by their names in the point (noisyQuantities):
        wall time (knees, the tolerance), CPU and memory (the ranking)."""
        return {
            "wallSeconds": self.wall_seconds,
            "cpuSeconds": self.cpu_seconds,
            "peakRssBytes": self.peak_rss_bytes,
        }


class ArrivalPoint(MeasuredPoint):
    """A measured point of an arrival run (workloads/CONTRACT.md, Duration runs)."""

    achieved_rate_per_second: Spread
    """Arrivals issued per second."""
    completed_per_second: Spread
    p50_seconds: Spread
    p90_seconds: Spread
    p99_seconds: Spread
    """Latency from each task's scheduled arrival: queueing for a worker is in it."""
    wait_p99_seconds: Spread
    """The wait for a worker."""
    service_p99_seconds: Spread
    """The time a task held its worker, without its wait."""
    max_lag_seconds: float
    """The most the generator may lag behind the schedule (spec: maxLag)."""
    dropped: int
    """Arrivals dropped, over the repetitions."""
    max_queue: int
    """The longest queue of arrivals waiting for a worker."""

    def latency(self, percentile: str) -> Spread:
        """The latency at p50, p90 or p99."""
        by_percentile = {"p50": self.p50_seconds, "p90": self.p90_seconds}
        return by_percentile.get(percentile, self.p99_seconds)


# A point as a summary holds it: the most specific kind first (an ArrivalPoint is also a
# MeasuredPoint and a Point).
AnyPoint = Annotated[ArrivalPoint | MeasuredPoint | Point, ONE_OBJECT]
