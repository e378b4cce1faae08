"""How the points of a summary are named in texts and tables (the status's recommendation
lines, the terminal tables, the report): the RTT, the configuration, a repeated measurement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cxlab.analysis.stats import Spread, center
from cxlab_contract.durations import format_duration

# The quantities an answer depends on, checked for noise, by their names in a point (its
# noisyQuantities): wall time (knees, the tolerance), CPU and memory (the ranking). Context
# switches and syscalls vary by nature and rank nothing.
NOISE_CHECKED = {"wallSeconds": "wall", "cpuSeconds": "cpu", "peakRssBytes": "rss"}


class Configured(Protocol):
    """A configuration as measured: a measured point, a knee, a recommendation's pick."""

    @property
    def variant(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def pods(self) -> int: ...
    @property
    def workers(self) -> int: ...
    @property
    def effective_workers(self) -> int: ...
    @property
    def workers_started(self) -> int | None: ...
    @property
    def pool(self) -> str | None: ...


def share_text(value: float | None) -> str:
    """A share as a whole percentage (the capacity plan's occupancy and waiting), — unset."""
    return "—" if value is None else f"{value:.0%}"


def rate_text(rate: float) -> str:
    """A rate of tasks per second, to three decimals at most (the capacity plan's)."""
    return f"{rate:,.3f}".rstrip("0").rstrip(".")


def rtt_label(rtt_seconds: float) -> str:
    return f"RTT {format_duration(rtt_seconds)}"


def spread_cells(
    stat: Spread, repetitions: int, show: Callable[[float], str]
) -> tuple[str, str, str]:
    """A repeated measurement as tables show it: the median (what knees and recommendations
    use), its 95 % interval, and the CV. One run has no spread to show, so "n=1" and no CV
    instead of a reassuring 0 %; two runs have a CV but no interval worth printing."""
    median = show(center(stat))
    if repetitions == 1:
        return median, "n=1", "—"
    interval = stat.ci95
    shown = f"[{show(interval[0])}, {show(interval[1])}]" if interval else f"n={repetitions}"
    return median, shown, f"{stat.cv:.1%}"


def workers_label(model: str, workers: int, pods: int = 1) -> str:
    """The configuration: workers, per Pod for a trial of several Pods (3 Pods x 100 workers)."""
    per_pod = "" if pods == 1 else f"{pods} Pods \u00d7 "
    if model == "sequential":
        return f"{per_pod}1 worker"
    if workers == 0:
        return f"{per_pod}one worker per task"
    return f"{per_pod}{workers} worker" + ("" if workers == 1 else "s")


def variant_text(point: Configured) -> str:
    """The variant with the kind of pool its Results report (threads (on-demand pool))."""
    variant, pool = point.variant, point.pool
    if not pool or "pool" in variant:  # none reported, or the variant names it already
        return variant
    return f"{variant} ({'on-demand' if pool == 'onDemand' else pool} pool)"


def workers_text(point: Configured) -> str:
    """workers_label, and how many started when a pool started fewer than it may."""
    text = workers_label(point.model, point.workers, point.pods)
    started = point.workers_started
    if started is not None and started != point.effective_workers * point.pods:
        text += f" ({started} started)"
    return text


def concurrency(point: Configured) -> int:
    """Workers in all: a trial's Pods x the workers each ran (knees and ties go by it)."""
    return point.pods * point.effective_workers
