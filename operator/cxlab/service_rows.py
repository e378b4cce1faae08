"""The service subject's table (spec.service): per point, what the generator did beside what
the service used, its CPU beside the generator's; rows for cxlab.table to render."""

from __future__ import annotations

from collections.abc import Sequence

from cxlab.analysis.point import MeasuredPoint, Point
from cxlab.analysis.stats import center

SERVICE_HEADERS = [
    "variant / model", "workers", "reps", "throughput/s", "generator cpu s", "service cpu s",
    "service cpu/req", "service peak MiB", "restarts",
]  # fmt: skip
SERVICE_LEGEND = (
    "The service's own figures (its whole process tree locally): medians over the "
    "repetitions; cpu/req over the requests completed in the trial (warm-up included)."
)


def has_service_figures(points: Sequence[Point]) -> bool:
    return any(isinstance(p, MeasuredPoint) and p.service_cpu_seconds is not None for p in points)


def _per_request(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:.2f} ms"


def service_rows(points: Sequence[Point]) -> list[list[str]]:
    """A row per measured point that has the service's figures."""
    rows = []
    for p in points:
        if not isinstance(p, MeasuredPoint) or p.service_cpu_seconds is None:
            continue
        peak = p.service_peak_memory_bytes
        rows.append([
            p.variant, str(p.workers), str(p.repetitions), f"{p.throughput_per_second:,.1f}",
            f"{center(p.cpu_seconds):.3f}", f"{p.service_cpu_seconds:.3f}",
            _per_request(p.service_cpu_per_request_seconds),
            "—" if peak is None else f"{peak / 2**20:.1f}", str(p.service_restarts or 0),
        ])  # fmt: skip
    return rows
