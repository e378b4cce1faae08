"""The report's tables: knees, every point with its measurements, and the failed and skipped
trials."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from html import escape

from cxlab.analysis.knees import Knee, RateKnee
from cxlab.analysis.labels import (
    NOISE_CHECKED,
    Configured,
    spread_cells,
    variant_text,
    workers_label,
)
from cxlab.analysis.point import MeasuredPoint, Point
from cxlab.analysis.recommend import AnyRecommendation, NoRateHeld
from cxlab.analysis.stats import Spread, center
from cxlab.analysis.summary import Summary, syscalls_requested
from cxlab.experiments.status import TrialEntry
from cxlab.report import svg
from cxlab.report.data import MIB
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


def knees_table(knees: Sequence[Knee | RateKnee]) -> str:
    rows = [
        [
            escape(_rtt_cell(k.rtt_seconds)),
            escape(k.variant),
            escape(_knee_workers(k)),
            escape(svg.format_seconds(k.wall_seconds)),
            escape(
                f"{svg.format_seconds(k.best_wall_seconds)} with "
                f"{workers_label(k.model, k.best_workers, k.best_pods)}"
            ),
            escape(f"{k.cpu_percent:.0f}%"),
            escape(_mib(k.peak_rss_bytes)),
        ]
        for k in knees
        if isinstance(k, Knee)
    ]
    if not rows:
        return ""
    headers = ["RTT", "Variant", "Knee workers", "Wall", "Best wall", "CPU", "Peak RSS"]
    intro = (
        "The knee: the fewest workers whose median wall time is within the tolerance of the "
        "variant's best — where adding workers stops paying."
    )
    return (
        f'<section><h2>Knees</h2><p class="note">{escape(intro)}</p>'
        f"{_table(headers, rows, {2, 3, 4, 5, 6})}</section>"
    )


def configured_workers(point: Configured) -> str:
    """A knee's or a measured point's workers as the tables show them."""
    return _workers_text(
        point.model, point.workers, point.effective_workers, point.workers_started, point.pods
    )


def _knee_workers(knee: Knee) -> str:
    return configured_workers(knee) + (" (noisy)" if knee.noisy else "")


def _configured(entry: Configured, point: Point) -> bool:
    return (entry.variant, entry.workers, entry.pods) == (point.variant, point.workers, point.pods)


def _at(rtt: float | None, point: Point) -> bool:
    return rtt == point.rtt_seconds


def _tied(point: Point, recommendations: Sequence[AnyRecommendation]) -> bool:
    """Whether a recommendation of the point's RTT names it as tied with its pick."""
    return any(
        not isinstance(r, NoRateHeld)
        and _at(r.rtt_seconds, point)
        and any(_configured(t, point) for t in r.tied_with or [])
        for r in recommendations
    )


def _tags(point: Point, summary: Summary | None) -> str:
    recommendations = summary.recommendations if summary else []
    knees = summary.knees or [] if summary else []
    tags = []
    if any(_configured(k, point) and _at(k.rtt_seconds, point) for k in knees):
        tags.append('<span class="tag">knee</span>')
    if any(
        not isinstance(r, NoRateHeld) and _configured(r, point) and _at(r.rtt_seconds, point)
        for r in recommendations
    ):
        tags.append('<span class="tag best">recommended</span>')
    if _tied(point, recommendations):
        tags.append('<span class="tag tied">tied</span>')
    if point.skipped_trials:  # not run (abortOnFail): not failed
        tags.append(f'<span class="tag skipped">{escape(skipped_text(point))}</span>')
    if isinstance(point, MeasuredPoint) and point.noisy:
        names = ", ".join(NOISE_CHECKED.get(k, k) for k in point.noisy_quantities)
        tags.append(f'<span class="tag noisy">noisy: {escape(names)}</span>')
    return "".join(tags)


def skipped_text(point: Point) -> str:
    """A point's trials not run because an objective broke (abortOnFail)."""
    return f"skipped: {_plural(point.skipped_trials or 0, 'trial')}"


def _failures(point: Point) -> str:
    parts = []
    if point.failed_trials:
        parts.append(_plural(point.failed_trials, "trial"))
    if isinstance(point, MeasuredPoint) and point.tasks_failed:
        parts.append(_plural(point.tasks_failed, "task"))
    return ", ".join(parts) or "—"


def _median(stat: Spread | None, show: Callable[[float], str]) -> str:
    """A quantity a Result may lack (older Results, or a model that cannot measure it)."""
    return "—" if stat is None else show(center(stat))


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _syscall_cells(point: Point) -> list[str]:
    """HTML cells: median counts, or "unavailable" with the reason on hover (never 0)."""
    syscalls = point.syscalls if isinstance(point, MeasuredPoint) else None
    if syscalls is None:
        return ["—", "—"]
    if syscalls.unavailable is not None:
        cell = f'<span title="{escape(syscalls.unavailable)}">unavailable</span>'
        return [cell, cell]
    return [escape(_median(syscalls.total, _count)), escape(_median(syscalls.futex, _count))]


def point_workers(point: Point) -> str:
    """A point's workers: as run where it was measured, else as the spec gives them."""
    if isinstance(point, MeasuredPoint):
        return configured_workers(point)
    return _workers_text(point.model, point.workers, None, None, point.pods)


def point_variant(point: Point) -> str:
    """A point's variant, with the kind of pool its Results report where it was measured."""
    return variant_text(point) if isinstance(point, MeasuredPoint) else point.variant


def _measurements(point: Point) -> list[str]:
    if not isinstance(point, MeasuredPoint):
        return ["—"] * 12
    wall, interval, cv = spread_cells(point.wall_seconds, point.repetitions, svg.format_seconds)
    efficiency = point.efficiency
    per_worker = float(point.memory_per_worker_bytes)
    return [
        wall,
        interval,
        cv,
        svg.format_seconds(center(point.cpu_seconds)),
        f"{center(point.cpu_percent):.0f}%",
        _mib(center(point.peak_rss_bytes)),
        _median(point.peak_vm_bytes, _mib),
        f"{per_worker / 1024:,.0f} KiB" if abs(per_worker) < MIB else _mib(per_worker),
        "—" if efficiency is None else f"{efficiency:.0%}",
        svg.format_seconds(point.latency_p99_seconds),
        _median(point.context_switches, _count),
        _median(point.task_context_switches, _count),
    ]


def points_table(points: Sequence[Point], summary: Summary | None) -> str:
    if not points:
        return ""
    syscalls = syscalls_requested(points)
    rows = [
        [
            escape(_rtt_cell(p.rtt_seconds)),
            escape(point_variant(p)) + _tags(p, summary),
            escape(point_workers(p)),
            str(p.repetitions),
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
