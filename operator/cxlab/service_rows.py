"""The service subject's table (spec.service): per point, what the generator did beside what
the service used, its CPU beside the generator's; rows for cxlab.table and the report."""

from __future__ import annotations

from collections.abc import Sequence

from cxlab.analysis.point import MeasuredPoint, Point
from cxlab.analysis.stats import center

SERVICE_HEADERS = [
    "variant / model", "workers", "reps", "throughput/s", "generator cpu s", "service cpu s",
    "service cpu/req", "service peak MiB", "throttled", "restarts", "oom kills",
]  # fmt: skip
SERVICE_LEGEND = (
    "The service's own figures (its whole process tree locally, its copy's containers on a "
    "cluster): medians over the repetitions; cpu/req over the requests completed in the "
    "trial (warm-up included); throttled: the share of CFS periods throttled (a CPU limit); "
    "— where it was not measured."
)


def _measured(point: Point) -> bool:
    # restarts are counted whenever the service was measured at all (its CPU may not be)
    return isinstance(point, MeasuredPoint) and point.service_restarts is not None


def has_service_figures(points: Sequence[Point]) -> bool:
    return any(_measured(p) for p in points)


def _or_dash(value: float | int | None, text: str) -> str:
    return "—" if value is None else text


def service_rows(points: Sequence[Point]) -> list[list[str]]:
    """A row per measured point that has the service's figures."""
    rows = []
    for p in points:
        if not isinstance(p, MeasuredPoint) or not _measured(p):
            continue
        cpu, per_request = p.service_cpu_seconds, p.service_cpu_per_request_seconds
        peak, throttled = p.service_peak_memory_bytes, p.service_cpu_throttled_ratio
        rows.append([
            p.variant, str(p.workers), str(p.repetitions), f"{p.throughput_per_second:,.1f}",
            f"{center(p.cpu_seconds):.3f}", _or_dash(cpu, f"{cpu or 0:.3f}"),
            _or_dash(per_request, f"{(per_request or 0) * 1e3:.2f} ms"),
            _or_dash(peak, f"{(peak or 0) / 2**20:.1f}"),
            _or_dash(throttled, f"{(throttled or 0) * 100:.1f} %"),
            str(p.service_restarts or 0),
            _or_dash(p.service_oom_kills, str(p.service_oom_kills)),
        ])  # fmt: skip
    return rows
