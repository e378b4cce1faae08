"""The service's own figures over one trial's window (spec.service), one shape for both
backends: cxlab run reads them from /proc of the service's process tree, a cluster from the
copy's cgroup counters. Measured, never estimated: a figure that could not be read is absent.
A point keeps their medians over its counted repetitions."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from cxlab.shape import Maybe, Shape
from cxlab_contract.figures import significant
from cxlab_contract.result import Result


class ServiceFigures(Shape):
    """What the service under test used during one trial (its whole process tree, or all the
    copy's Pods)."""

    cpu_seconds: float
    """User and system CPU over the trial's window, exited workers' included."""
    cpu_per_request_seconds: Maybe[float] = None
    """cpuSeconds over the requests the trial completed in the window (its warm-up's too:
    the Result's tasksOk);
    absent when none completed."""
    peak_memory_bytes: int
    """The largest memory of the whole tree sampled in the window: locally its processes'
    PSS summed (a page shared by a master and its forked workers counted once)."""
    restarts: int
    """Worker processes that died during the trial."""
    samples: int
    """Memory samples taken in the window (a trial shorter than one sample has 1)."""
    window_seconds: Maybe[float] = None
    """How long the window lasted."""
    cores: Maybe[float] = None
    """The cores the service had (locally those cxlab run pinned it to)."""

    @property
    def cpu_share(self) -> float | None:
        """The share of its cores the service used over the window (1: all of them busy)."""
        if not self.window_seconds or not self.cores:
            return None
        return self.cpu_seconds / (self.window_seconds * self.cores)


def completed_requests(result: Result) -> int:
    """The requests a trial completed in its whole window: its ok tasks, its warm-up's
    included (tasksOk keeps them, and the service's CPU in the window served both)."""
    return result["tasksOk"]


def per_request(cpu_seconds: float, requests: int) -> float | None:
    return significant(cpu_seconds / requests) if requests > 0 else None


class ServiceMedians(Shape):
    """A point's service figures: the medians over its repetitions that have them."""

    service_cpu_seconds: Maybe[float] = None
    """The service's CPU per trial (spec.service), the median."""
    service_cpu_per_request_seconds: Maybe[float] = None
    """The service's CPU per completed request, the median."""
    service_peak_memory_bytes: Maybe[int] = None
    """The service's peak memory (locally its tree's PSS summed), the median."""
    service_restarts: Maybe[int] = None
    """Worker processes of the service that died, over the repetitions."""


def service_medians(figures: Sequence[ServiceFigures | None]) -> ServiceMedians:
    """The medians of the repetitions that measured the service (none: every field absent)."""
    present = [f for f in figures if f is not None]
    if not present:
        return ServiceMedians()
    per_request_values = [
        f.cpu_per_request_seconds for f in present if f.cpu_per_request_seconds is not None
    ]
    return ServiceMedians(
        service_cpu_seconds=significant(statistics.median(f.cpu_seconds for f in present)),
        service_cpu_per_request_seconds=(
            significant(statistics.median(per_request_values)) if per_request_values else None
        ),
        service_peak_memory_bytes=round(statistics.median(f.peak_memory_bytes for f in present)),
        service_restarts=sum(f.restarts for f in present),
    )
