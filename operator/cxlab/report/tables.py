"""The report's tables: knees, every point with its measurements, and the failed trials."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from cxlab.report import svg
from cxlab.report.data import MIB, Json, measured
from cxlab.summary import spread_cells, workers_label
from cxlab_runner.durations import format_duration


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: set[int]) -> str:
    """Cells are HTML already (escaped by the caller); columns in `numeric` align right."""

    def cell(tag: str, index: int, content: str) -> str:
        css = ' class="num"' if index in numeric else ""
        return f"<{tag}{css}>{content}</{tag}>"

    head = "".join(cell("th", i, escape(h)) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="table">{table}</div>'  # scrolls sideways on a narrow screen


def _workers_text(model: str, workers: int, effective: int | None) -> str:
    if model == "sequential":
        return "1"
    if workers == 0:
        return "per task" + (f" ({effective:,})" if effective else "")
    if effective is not None and effective != workers:
        return f"{workers:,} (ran {effective:,})"
    return f"{workers:,}"


def _rtt_cell(rtt: float | None) -> str:
    return "—" if rtt is None else format_duration(rtt)


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _mib(value: float) -> str:
    return f"{value / MIB:,.1f} MiB"


def knees_table(knees: Sequence[Json]) -> str:
    if not knees:
        return ""
    rows = [
        [
            escape(_rtt_cell(k.get("rttSeconds"))),
            escape(str(k["variant"])),
            escape(_workers_text(k["model"], k["workers"], k.get("effectiveWorkers"))),
            escape(svg.format_seconds(k["wallSeconds"])),
            escape(
                f"{svg.format_seconds(k['bestWallSeconds'])} with "
                f"{workers_label(k['model'], k['bestWorkers'])}"
            ),
            escape(f"{k['cpuPercent']:.0f}%"),
            escape(_mib(k["peakRssBytes"])),
        ]
        for k in knees
    ]
    headers = ["RTT", "Variant", "Knee workers", "Wall", "Best wall", "CPU", "Peak RSS"]
    intro = (
        "The knee: the fewest workers whose mean wall time is within the tolerance of the "
        "variant's best — where adding workers stops paying."
    )
    return (
        f'<section><h2>Knees</h2><p class="note">{escape(intro)}</p>'
        f"{_table(headers, rows, {2, 3, 4, 5, 6})}</section>"
    )


def _tags(point: Json, summary: Json | None) -> str:
    def same(entry: Json) -> bool:
        return (
            entry.get("variant") == point["variant"]
            and entry.get("rttSeconds") == point.get("rttSeconds")
            and entry.get("workers") == point["workers"]
        )

    tags = []
    if any(same(k) for k in (summary or {}).get("knees") or []):
        tags.append('<span class="tag">knee</span>')
    if any(same(r) for r in (summary or {}).get("recommendations") or []):
        tags.append('<span class="tag best">recommended</span>')
    return "".join(tags)


def _failures(point: Json) -> str:
    parts = []
    if point.get("failedTrials"):
        parts.append(_plural(point["failedTrials"], "trial"))
    if point.get("tasksFailed"):
        parts.append(_plural(point["tasksFailed"], "task"))
    return ", ".join(parts) or "—"


def _measurements(point: Json) -> list[str]:
    if not measured(point):
        return ["—"] * 7
    wall, cv = spread_cells(point["wallSeconds"], point["repetitions"], svg.format_seconds)
    efficiency = point.get("efficiency")
    per_worker = float(point.get("memoryPerWorkerBytes", 0))
    return [
        wall,
        cv,
        f"{point['cpuPercent']['mean']:.0f}%",
        _mib(point["peakRssBytes"]["mean"]),
        f"{per_worker / 1024:,.0f} KiB" if abs(per_worker) < MIB else _mib(per_worker),
        "—" if efficiency is None else f"{efficiency:.0%}",
        svg.format_seconds(point["latencyP99Seconds"]),
    ]


def points_table(points: Sequence[Json], summary: Json | None) -> str:
    if not points:
        return ""
    rows = [
        [
            escape(_rtt_cell(p.get("rttSeconds"))),
            escape(str(p["variant"])) + _tags(p, summary),
            escape(_workers_text(p["model"], p["workers"], p.get("effectiveWorkers"))),
            str(p.get("repetitions", 0)),
            *(escape(cell) for cell in _measurements(p)),
            escape(_failures(p)),
        ]
        for p in points
    ]
    headers = [
        "RTT", "Variant", "Workers", "Reps", "Wall (mean ± sd)", "CV", "CPU", "Peak RSS",
        "Per worker", "Efficiency", "p99 latency", "Failed",
    ]  # fmt: skip
    intro = "Efficiency is the floor over the wall time; per worker is RSS growth per worker."
    return (
        f'<section><h2>Points</h2><p class="note">{escape(intro)}</p>'
        f"{_table(headers, rows, set(range(2, 11)))}</section>"
    )


def _failure_message(trial: Json) -> str:
    if trial.get("message"):
        return str(trial["message"])
    errors = (trial.get("result") or {}).get("errors") or []
    return "; ".join(f"{e['message']} (\u00d7{e['count']})" for e in errors) or "no message"


def failed_table(trials: Sequence[Json]) -> str:
    failed = [t for t in trials if t.get("phase") != "Succeeded"]
    if not failed:
        return ""
    rows = [
        [
            escape(str(t.get("name", ""))),
            escape(str(t.get("model", ""))),
            escape(_workers_text(str(t.get("model")), int(t.get("workers", 0)), None)),
            escape(_rtt_cell(t.get("rttSeconds"))),
            str(t.get("repetition", "")),
            escape(_failure_message(t)),
        ]
        for t in failed
    ]
    headers = ["Trial", "Model", "Workers", "RTT", "Rep", "Message"]
    return f"<section><h2>Failed trials</h2>{_table(headers, rows, {2, 4})}</section>"
