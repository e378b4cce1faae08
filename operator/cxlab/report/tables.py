"""The report's tables: knees, every point with its measurements, and the failed and skipped
trials."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from html import escape

from cxlab.analysis.labels import NOISE_CHECKED, spread_cells, variant_text, workers_label
from cxlab.analysis.stats import center
from cxlab.analysis.summary import syscalls_requested
from cxlab.experiments.status import TrialEntry
from cxlab.report import svg
from cxlab.report.data import MIB, Json, measured
from cxlab_contract.durations import format_duration


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


def _workers_text(
    model: str, workers: int, effective: int | None, started: int | None = None, pods: int = 1
) -> str:
    """Workers (per Pod: "3 Pods x 100" for a trial of several Pods)."""
    if pods > 1:
        total = None if started is None else -(-started // pods)  # per Pod, as the rest
        return f"{pods} Pods \u00d7 " + _workers_text(model, workers, effective, total)
    if model == "sequential":
        return "1"
    if workers == 0:
        text = "per task" + (f" ({effective:,})" if effective else "")
    elif effective is not None and effective != workers:
        text = f"{workers:,} (ran {effective:,})"  # a Result from before workersStarted
    else:
        text = f"{workers:,}"
    if started is not None and started != (effective or workers):
        text += f" (started {started:,})"  # an on-demand pool started fewer
    return text


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
            escape(_knee_workers(k)),
            escape(svg.format_seconds(k["wallSeconds"])),
            escape(
                f"{svg.format_seconds(k['bestWallSeconds'])} with "
                f"{workers_label(k['model'], k['bestWorkers'], k.get('bestPods', 1))}"
            ),
            escape(f"{k['cpuPercent']:.0f}%"),
            escape(_mib(k["peakRssBytes"])),
        ]
        for k in knees
    ]
    headers = ["RTT", "Variant", "Knee workers", "Wall", "Best wall", "CPU", "Peak RSS"]
    intro = (
        "The knee: the fewest workers whose median wall time is within the tolerance of the "
        "variant's best — where adding workers stops paying."
    )
    return (
        f'<section><h2>Knees</h2><p class="note">{escape(intro)}</p>'
        f"{_table(headers, rows, {2, 3, 4, 5, 6})}</section>"
    )


def _knee_workers(knee: Json) -> str:
    text = _workers_text(
        knee["model"], knee["workers"], knee.get("effectiveWorkers"),
        knee.get("workersStarted"), knee.get("pods", 1),
    )  # fmt: skip
    return text + (" (noisy)" if knee.get("noisy") else "")


def _configured(entry: Json, point: Json) -> bool:
    return bool(
        entry.get("variant") == point["variant"]
        and entry.get("workers") == point["workers"]
        and entry.get("pods", 1) == point.get("pods", 1)
    )


def _same(entry: Json, point: Json) -> bool:
    return _configured(entry, point) and entry.get("rttSeconds") == point.get("rttSeconds")


def _tied(point: Json, recommendations: Sequence[Json]) -> bool:
    """Whether a recommendation of the point's RTT names it as tied with its pick."""
    return any(
        r.get("rttSeconds") == point.get("rttSeconds")
        and any(_configured(t, point) for t in r.get("tiedWith") or [])
        for r in recommendations
    )


def _tags(point: Json, summary: Json | None) -> str:
    recommendations = (summary or {}).get("recommendations") or []
    tags = []
    if any(_same(k, point) for k in (summary or {}).get("knees") or []):
        tags.append('<span class="tag">knee</span>')
    if any(_same(r, point) for r in recommendations):
        tags.append('<span class="tag best">recommended</span>')
    if _tied(point, recommendations):
        tags.append('<span class="tag tied">tied</span>')
    if point.get("skippedTrials"):  # not run (abortOnFail): not failed
        tags.append(f'<span class="tag skipped">{escape(skipped_text(point))}</span>')
    if point.get("noisy"):
        names = ", ".join(NOISE_CHECKED.get(k, k) for k in point.get("noisyQuantities") or [])
        tags.append(f'<span class="tag noisy">noisy: {escape(names)}</span>')
    return "".join(tags)


def skipped_text(point: Json) -> str:
    """A point's trials not run because an objective broke (abortOnFail)."""
    return f"skipped: {_plural(point['skippedTrials'], 'trial')}"


def _failures(point: Json) -> str:
    parts = []
    if point.get("failedTrials"):
        parts.append(_plural(point["failedTrials"], "trial"))
    if point.get("tasksFailed"):
        parts.append(_plural(point["tasksFailed"], "task"))
    return ", ".join(parts) or "—"


def _median(stat: Json | None, show: Callable[[float], str]) -> str:
    """A quantity a Result may lack (older Results, or a model that cannot measure it)."""
    return "—" if stat is None else show(center(stat))


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _syscall_cells(point: Json) -> list[str]:
    """HTML cells: median counts, or "unavailable" with the reason on hover (never 0)."""
    syscalls = point.get("syscalls")
    if syscalls is None:
        return ["—", "—"]
    if "unavailable" in syscalls:
        cell = f'<span title="{escape(str(syscalls["unavailable"]))}">unavailable</span>'
        return [cell, cell]
    total = _count(center(syscalls["total"]))
    return [escape(total), escape(_median(syscalls.get("futex"), _count))]


def _point_workers(point: Json) -> str:
    return _workers_text(
        point["model"], point["workers"], point.get("effectiveWorkers"),
        point.get("workersStarted"), point.get("pods", 1),
    )  # fmt: skip


def _measurements(point: Json) -> list[str]:
    if not measured(point):
        return ["—"] * 12
    wall, interval, cv = spread_cells(
        point["wallSeconds"], point["repetitions"], svg.format_seconds
    )
    efficiency = point.get("efficiency")
    per_worker = float(point.get("memoryPerWorkerBytes", 0))
    return [
        wall,
        interval,
        cv,
        svg.format_seconds(center(point["cpuSeconds"])),
        f"{center(point['cpuPercent']):.0f}%",
        _mib(center(point["peakRssBytes"])),
        _median(point.get("peakVmBytes"), _mib),
        f"{per_worker / 1024:,.0f} KiB" if abs(per_worker) < MIB else _mib(per_worker),
        "—" if efficiency is None else f"{efficiency:.0%}",
        svg.format_seconds(point["latencyP99Seconds"]),
        _median(point.get("contextSwitches"), _count),
        _median(point.get("taskContextSwitches"), _count),
    ]


def points_table(points: Sequence[Json], summary: Json | None) -> str:
    if not points:
        return ""
    syscalls = syscalls_requested(points)
    rows = [
        [
            escape(_rtt_cell(p.get("rttSeconds"))),
            escape(variant_text(p)) + _tags(p, summary),
            escape(_point_workers(p)),
            str(p.get("repetitions", 0)),
            *(escape(cell) for cell in _measurements(p)),
            *(_syscall_cells(p) if syscalls else ()),
            escape(_failures(p)),
        ]
        for p in points
    ]
    headers = [
        "RTT", "Variant", "Workers", "Reps", "Wall (median)", "95% CI", "CV", "CPU time",
        "CPU", "Peak RSS", "Peak VM", "Per worker", "Efficiency", "p99 latency", "Ctx sw",
        "Task ctx sw", *(("Syscalls", "Futex") if syscalls else ()), "Failed",
    ]  # fmt: skip
    intro = (
        "Medians of each point's repetitions; the 95% confidence interval is of the mean wall "
        "time (Student t, from 3 repetitions); CV is the wall time's. Noisy: a CV of wall "
        "time, CPU or peak RSS over the tolerance. Efficiency is the floor over the wall time; "
        "per worker is RSS growth per worker started. Task ctx sw counts only the threads "
        "that ran tasks (— where the model cannot tell them apart)."
    )
    return (
        f'<section><h2>Points</h2><p class="note">{escape(intro)}</p>'
        f"{_table(headers, rows, set(range(2, len(headers) - 1)))}</section>"
    )


def _failure_message(trial: TrialEntry) -> str:
    if trial.message:
        return trial.message
    errors = trial.result["errors"] if trial.result is not None else []
    return "; ".join(f"{e['message']} (\u00d7{e['count']})" for e in errors) or "no message"


def _trials_table(
    title: str, trials: Sequence[TrialEntry], message: Callable[[TrialEntry], str]
) -> str:
    if not trials:
        return ""
    rows = [
        [
            escape(t.name),
            escape(t.model),
            escape(_workers_text(t.model, t.workers, None)),
            escape(_rtt_cell(t.rtt_seconds)),
            str(t.repetition),
            escape(message(t)),
        ]
        for t in trials
    ]
    headers = ["Trial", "Model", "Workers", "RTT", "Rep", "Message"]
    return f"<section><h2>{escape(title)}</h2>{_table(headers, rows, {2, 4})}</section>"


def failed_table(trials: Sequence[TrialEntry]) -> str:
    return _trials_table("Failed trials", [t for t in trials if t.failed], _failure_message)


def skipped_table(trials: Sequence[TrialEntry]) -> str:
    """Trials not run because a point they can only do worse than broke an objective."""
    skipped = [t for t in trials if t.skipped]
    return _trials_table("Skipped trials", skipped, lambda t: t.message or "skipped")
