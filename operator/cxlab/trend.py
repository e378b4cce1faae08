"""A schedule's history as text (`cxlab history DIR`): each point's medians run by run, the
Pods the capacity plan needed over time, the regressions of the newest run, and its capacity
plan. Pure: entries in, text out."""

from __future__ import annotations

from collections.abc import Sequence

from cxlab.schedules.history import HistoryEntry
from cxlab.schedules.regression import Regression
from cxlab.table import render_table, unit_cell
from cxlab.times import timestamp


def _points(entries: Sequence[HistoryEntry]) -> list[str]:
    """Every point key, in the order the runs first show them."""
    seen: dict[str, None] = {}
    for entry in entries:
        for point in entry.points or []:
            seen.setdefault(point.point, None)
    return list(seen)


def _scheduled(entry: HistoryEntry) -> str:
    return timestamp(entry.scheduled_time) if entry.scheduled_time else "—"


def trend_tables(entries: Sequence[HistoryEntry]) -> str:
    """Per point, one row per run: its medians."""
    blocks = []
    for key in _points(entries):
        rows = []
        for entry in entries:
            point = next((p for p in entry.points or [] if p.point == key), None)
            if point is None:
                continue
            rows.append([
                entry.run, _scheduled(entry), entry.phase, str(point.n),
                unit_cell(point.wall_seconds, "s"), unit_cell(point.throughput_per_second),
                unit_cell(point.cpu_seconds_per_task, "µs"),
                unit_cell(point.latency_p99_seconds, "s"), unit_cell(point.peak_rss_bytes, "B"),
            ])  # fmt: skip
        headers = ["run", "scheduled", "phase", "n", "wall", "tasks/s", "CPU/task", "p99", "RSS"]
        blocks.append(f"{key}\n{render_table(headers, rows)}")
    return "\n\n".join(blocks)


def plan_trend(entries: Sequence[HistoryEntry]) -> str:
    """The capacity plan's answer run by run: Pods needed over time."""
    rows = [[e.run, _scheduled(e), e.plan.display] for e in entries if e.plan]
    return render_table(["run", "scheduled", "capacity plan"], rows) if rows else ""


def regressions_text(found: Sequence[Regression], newest: str | None) -> str:
    if newest is None:
        return "regressions: no succeeded run yet"
    if not found:
        return f"regressions: none in {newest} against the runs before it"
    lines = [f"regressions in {newest}:"] + [f"  {r.message()}" for r in found]
    return "\n".join(lines)
