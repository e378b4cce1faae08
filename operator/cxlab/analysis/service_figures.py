"""The service's own figures over one trial's window (spec.service), one shape for both
backends: cxlab run reads them from /proc of the service's process tree, a cluster from the
kubelet's counters of the copy's Pods (cxlab.analysis.copy_counters). Measured, never
estimated: a figure that could not be read, or not over the whole window, is absent. A point
keeps their medians over its counted repetitions."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TypeVar

from cxlab.shape import Maybe, Shape
from cxlab_contract.figures import significant
from cxlab_contract.result import Result

N = TypeVar("N", int, float)


class ServiceFigures(Shape):
    """What the service under test used during one trial (its whole process tree, or all the
    copy's Pods)."""

    cpu_seconds: Maybe[float] = None
    """User and system CPU over the trial's window, exited workers' included; on a cluster
    absent when a container of the copy restarted or a Pod of it went away in the window
    (the CPU of what ended after the last reading is not known)."""
    cpu_per_request_seconds: Maybe[float] = None
    """cpuSeconds over the requests the trial completed in the window (its warm-up's too:
    the Result's tasksOk);
    absent when none completed."""
    peak_memory_bytes: Maybe[int] = None
    """The largest memory of the whole tree sampled in the window: locally its processes'
    PSS summed (a page shared by a master and its forked workers counted once); on a
    cluster the copy's containers' working sets summed. Absent when the samples did not
    cover the window (an operator restarted in it)."""
    restarts: int
    """Worker processes that died during the trial; on a cluster the copy's container
    restarts (restartCount), a Pod of the copy gone in the window counted as one."""
    oom_kills: Maybe[int] = None
    """Restarts of the copy's containers whose termination was OOMKilled (a cluster only;
    absent when a container restarted more than once in the window: only the last
    termination's reason is kept)."""
    cpu_throttled_ratio: Maybe[float] = None
    """CFS periods throttled over CFS periods of the copy's containers (cAdvisor), when a
    CPU limit is set and the counters moved in the window; absent otherwise, and locally
    (a process has no CPU limit there)."""
    samples: int
    """Memory samples taken in the window (a trial shorter than one sample has 1)."""
    started_at: Maybe[datetime] = None
    """When the window's first reading was taken."""
    window_seconds: Maybe[float] = None
    """From the window's first reading to its last."""
    cores: Maybe[float] = None
    """The cores the service had: locally those cxlab run pinned it to, on a cluster what
    its copy's CPU limits allow (absent without a limit)."""


def cpu_share(figures: ServiceFigures | None, result: Result | None) -> float | None:
    """The share of its cores the service used while the generator ran: its CPU in the
    trial's window over the generator's wall time (a cluster's window also holds the trial
    Pods' start and end, when the service idles); None without its cores or its CPU."""
    if figures is None or figures.cpu_seconds is None or not figures.cores or result is None:
        return None
    seconds = min(result["wallSeconds"], figures.window_seconds or result["wallSeconds"])
    return figures.cpu_seconds / (seconds * figures.cores) if seconds > 0 else None


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
    """The service's peak memory (locally its tree's PSS summed, on a cluster its
    containers' working sets), the median."""
    service_restarts: Maybe[int] = None
    """Worker processes of the service that died (on a cluster its containers' restarts),
    over the repetitions."""
    service_oom_kills: Maybe[int] = None
    """The service's containers OOMKilled, over the repetitions that know it."""
    service_cpu_throttled_ratio: Maybe[float] = None
    """The share of CFS periods throttled, the median (a cluster, with a CPU limit)."""


def service_medians(figures: Sequence[ServiceFigures | None]) -> ServiceMedians:
    """The medians of the repetitions that measured the service (none: every field absent)."""
    present = [f for f in figures if f is not None]
    if not present:
        return ServiceMedians()
    peaks = _known(f.peak_memory_bytes for f in present)
    ooms = _known(f.oom_kills for f in present)
    return ServiceMedians(
        service_cpu_seconds=_median(f.cpu_seconds for f in present),
        service_cpu_per_request_seconds=_median(f.cpu_per_request_seconds for f in present),
        service_peak_memory_bytes=round(statistics.median(peaks)) if peaks else None,
        service_restarts=sum(f.restarts for f in present),
        service_oom_kills=sum(ooms) if ooms else None,
        service_cpu_throttled_ratio=_median(f.cpu_throttled_ratio for f in present),
    )


def _known(values: Iterable[N | None]) -> list[N]:
    return [v for v in values if v is not None]


def _median(values: Iterable[float | None]) -> float | None:
    """The median of the repetitions that measured it (none: absent)."""
    known = _known(values)
    return significant(statistics.median(known)) if known else None
