"""A schedule's history as text (`cxlab history DIR`): each point's medians run by run, the
Pods the capacity plan needed over time, the regressions of the newest run, and its capacity
plan. Pure: entries in, text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cxlab.schedules.regression import Regression
from cxlab.table import render_table, unit_cell


def _points(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every point key, in the order the runs first show them."""
    seen: dict[str, None] = {}
    for entry in entries:
        for point in entry.get("points") or []:
            seen.setdefault(point["point"], None)
    return list(seen)


def trend_tables(entries: Sequence[Mapping[str, Any]]) -> str:
    """Per point, one row per run: its medians."""
    blocks = []
    for key in _points(entries):
        rows = []
        for entry in entries:
            point = next((p for p in entry.get("points") or [] if p["point"] == key), None)
            if point is None:
                continue
            rows.append([
                entry["run"], entry.get("scheduledTime", "—"), entry["phase"], str(point["n"]),
                unit_cell(point.get("wallSeconds"), "s"),
                unit_cell(point.get("throughputPerSecond")),
                unit_cell(point.get("cpuSecondsPerTask"), "µs"),
                unit_cell(point.get("latencyP99Seconds"), "s"),
                unit_cell(point.get("peakRssBytes"), "B"),
            ])  # fmt: skip
        headers = ["run", "scheduled", "phase", "n", "wall", "tasks/s", "CPU/task", "p99", "RSS"]
        blocks.append(f"{key}\n{render_table(headers, rows)}")
    return "\n\n".join(blocks)


def plan_trend(entries: Sequence[Mapping[str, Any]]) -> str:
    """The capacity plan's answer run by run: Pods needed over time."""
    rows = [
        [e["run"], e.get("scheduledTime", "—"), e["plan"]["display"]]
        for e in entries
        if e.get("plan")
    ]
    return render_table(["run", "scheduled", "capacity plan"], rows) if rows else ""


def regressions_text(found: Sequence[Regression], newest: str | None) -> str:
    if newest is None:
        return "regressions: no succeeded run yet"
    if not found:
        return f"regressions: none in {newest} against the runs before it"
    lines = [f"regressions in {newest}:"] + [f"  {r.message()}" for r in found]
    return "\n".join(lines)
