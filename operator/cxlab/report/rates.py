"""An arrival run's report (workloads/CONTRACT.md, Duration runs): latency, achieved rate and CPU
against the offered rate, one line per configuration, then each configuration's run at its knee
over time (the timeline: tasks ended per second and their p99), so warm-up and steadiness show;
the knees in the rate and every point in tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from cxlab.analysis.knees import Knee, RateKnee, rate_of
from cxlab.analysis.labels import rtt_label, workers_label
from cxlab.analysis.point import ArrivalPoint, Point
from cxlab.analysis.stats import Spread, center
from cxlab.experiments.status import TrialEntry
from cxlab.report import svg
from cxlab.report.data import MIB, Context, Style, by_rtt
from cxlab.report.service import service_table
from cxlab.report.tables import (
    _mib,
    _rtt_cell,
    _table,
    configured_workers,
    failed_table,
    point_workers,
    skipped_table,
    skipped_text,
)
from cxlab_contract.timeline import Timeline

_RATE_AXIS = svg.Axis("offered rate (tasks/s)", "linear", svg.format_count, include_zero=True)


def _configuration(point: Point) -> str:
    workers = workers_label(point.model, point.workers, point.pods)
    return f"{point.variant} · {workers}"


def _lines(points: Sequence[Point]) -> dict[str, list[ArrivalPoint]]:
    lines: dict[str, list[ArrivalPoint]] = {}
    for point in points:
        if isinstance(point, ArrivalPoint):
            lines.setdefault(_configuration(point), []).append(point)
    return lines


def _series(
    points: Sequence[Point],
    styles: dict[str, Style],
    value: Callable[[ArrivalPoint], svg.Point],
) -> list[svg.Series]:
    series = []
    for index, (label, members) in enumerate(_lines(points).items()):
        style = styles[members[0].variant]
        line = tuple(sorted((value(p) for p in members), key=lambda p: p.x))
        series.append(svg.Series(label, line, style.color, style.shape, dashed=index % 2 == 1))
    return series


def _at_rate(point: ArrivalPoint, stat: Spread) -> svg.Point:
    return svg.Point(rate_of(point), center(stat), stat.stddev)


def _titled(what: str, rtt: float | None) -> str:
    return what if rtt is None else f"{what} · {rtt_label(rtt)}"


def _latency_chart(rtt: float | None, points: Sequence[Point], context: Context) -> str:
    return svg.line_chart(
        _titled("p99 latency vs offered rate", rtt),
        _RATE_AXIS,
        svg.Axis("p99 latency (log scale)", "log", svg.format_seconds),
        _series(points, dict(context.styles), lambda p: _at_rate(p, p.p99_seconds)),
        "from each task's scheduled arrival, so queueing for a worker is in it",
    )


def _achieved_chart(rtt: float | None, points: Sequence[Point], context: Context) -> str:
    rates = sorted({rate_of(p) for p in points})
    asked = svg.Series(
        "offered", tuple(svg.Point(r, r) for r in rates), svg.REFERENCE_COLOR, dashed=True,
        markers=False,
    )  # fmt: skip
    series = _series(points, dict(context.styles), lambda p: _at_rate(p, p.completed_per_second))
    return svg.line_chart(
        _titled("Tasks completed per second vs offered rate", rtt),
        _RATE_AXIS,
        svg.Axis("completed per second", "linear", svg.format_count, include_zero=True),
        [*series, asked],
        "below the dashed line: the configuration falls behind and its queue grows",
    )


def _cpu_chart(rtt: float | None, points: Sequence[Point], context: Context) -> str:
    return svg.line_chart(
        _titled("CPU vs offered rate", rtt),
        _RATE_AXIS,
        svg.Axis("CPU (% of one core)", "linear", svg.format_percent, include_zero=True),
        _series(points, dict(context.styles), lambda p: _at_rate(p, p.cpu_percent)),
        "user + system time over wall time",
    )


def _same(a: Point | Knee | RateKnee, b: Point) -> bool:
    """The same configuration (variant, workers, Pods, RTT), at any rate."""
    return (a.variant, a.workers, a.pods, a.rtt_seconds) == (
        b.variant, b.workers, b.pods, b.rtt_seconds,
    )  # fmt: skip


def _knee_trials(points: Sequence[Point], context: Context) -> list[tuple[str, TrialEntry, Style]]:
    """Each configuration's first successful trial at its knee (or, holding none, its lowest
    rate): the runs the timeline charts show."""
    picked = []
    for label, members in _lines(points).items():
        first = members[0]
        knee = next((k for k in context.knees if _same(k, first)), None)
        held = knee.rate_per_second if isinstance(knee, RateKnee) else None
        rate = held or min(rate_of(p) for p in members)
        runs = [
            t for t in context.trials
            if not t.failed and t.result is not None and t.result.get("timeline") is not None
            and t.variant == first.variant and t.workers == first.workers
            and (t.pods or 1) == first.pods and t.rtt_seconds == first.rtt_seconds
            and t.rate_per_second == rate
        ]  # fmt: skip
        if runs:
            trial = min(runs, key=lambda t: t.repetition)
            style = context.styles[first.variant]
            picked.append((f"{label} at {rate:g}/s", trial, style))
    return picked


def _timeline_chart(
    title: str, picked: list[tuple[str, TrialEntry, Style]],
    value: Callable[[Timeline, int], float], axis: svg.Axis, note: str,
) -> str:  # fmt: skip
    series = []
    for index, (label, trial, style) in enumerate(picked):
        assert trial.result is not None and trial.result["timeline"] is not None
        timeline = trial.result["timeline"]
        step = float(timeline["intervalSeconds"])
        line = tuple(
            svg.Point((i + 0.5) * step, value(timeline, i))
            for i in range(len(timeline["completed"]))
        )
        series.append(svg.Series(label, line, style.color, style.shape, index % 2 == 1, False))
    x_axis = svg.Axis("time since the tasks started", "linear", svg.format_seconds, True)
    return svg.line_chart(title, x_axis, axis, series, note)


def rate_section(rtt: float | None, points: Sequence[Point], context: Context) -> str:
    picked = _knee_trials(points, context)
    warmup = (context.spec.get("workload") or {}).get("warmup")
    note = "first successful repetition at each knee" + (
        f"; the first {warmup} are the warm-up, left out of the figures" if warmup else ""
    )
    charts = [
        _latency_chart(rtt, points, context),
        _achieved_chart(rtt, points, context),
        _cpu_chart(rtt, points, context),
        _timeline_chart(
            _titled("Tasks ended per second over time", rtt), picked,
            lambda t, i: t["completed"][i] / float(t["intervalSeconds"]),
            svg.Axis("tasks per second", "linear", svg.format_count, True), note,
        ),
        _timeline_chart(
            _titled("p99 latency over time", rtt), picked,
            lambda t, i: max(float(t["p99"][i]), 1e-6),
            svg.Axis("p99 latency (log scale)", "log", svg.format_seconds), note,
        ),
    ]  # fmt: skip
    figures = "".join(f'<figure class="chart">{chart}</figure>' for chart in charts)
    title = "Charts" if rtt is None else rtt_label(rtt)
    return (
        f'<section class="rtt"><h2>{escape(title)}</h2>'
        f'<div class="charts">{figures}</div></section>'
    )


def rate_knees_table(knees: Sequence[Knee | RateKnee]) -> str:
    rows = [
        [
            escape(_rtt_cell(k.rtt_seconds)),
            escape(k.variant),
            escape(configured_workers(k)),
            escape(
                "none"
                if k.rate_per_second is None
                else f"{k.rate_per_second:,g}/s" + (" or more" if k.highest_measured else "")
            ),
            escape(svg.format_seconds(k.latency_p99_seconds)),
            escape(k.criterion),
            escape(f"{k.cpu_percent:.0f}%"),
            escape(_mib(k.peak_rss_bytes)),
        ]
        for k in knees
        if isinstance(k, RateKnee)
    ]
    if not rows:
        return ""
    headers = ["RTT", "Variant", "Workers", "Holds", "p99", "Criterion", "CPU", "Peak RSS"]
    intro = (
        "The knee of an arrival run: the largest offered rate at and below which every rate "
        'held — no task failed or was dropped and the latency met the criterion. "or more": '
        "the highest rate measured held, so the configuration may hold more."
    )
    return (
        f'<section><h2>Knees</h2><p class="note">{escape(intro)}</p>'
        f"{_table(headers, rows, {2, 3, 4, 6, 7})}</section>"
    )


def rate_points_table(points: Sequence[Point]) -> str:
    rows = []
    for p in points:
        label = [
            escape(_rtt_cell(p.rtt_seconds)), escape(p.variant), escape(point_workers(p)),
            escape(f"{rate_of(p):,g}"), str(p.repetitions),
        ]  # fmt: skip
        if not isinstance(p, ArrivalPoint):
            skipped = skipped_text(p) + " (an objective broke)" if p.skipped_trials else ""
            why = p.saturation or skipped or "no successful repetition"
            rows.append([*label, escape(why), *["—"] * 7])
            continue
        rows.append([
            *label,
            escape(f"{center(p.achieved_rate_per_second):,.1f}"),
            escape(svg.format_seconds(center(p.p50_seconds))),
            escape(svg.format_seconds(center(p.p99_seconds))),
            escape(svg.format_seconds(center(p.wait_p99_seconds))),
            escape(f"{p.max_queue:,}"),
            escape(f"{p.dropped:,}"),
            escape(f"{center(p.cpu_percent):.0f}%"),
            escape(f"{center(p.peak_rss_bytes) / MIB:,.1f} MiB"),
        ])  # fmt: skip
    headers = [
        "RTT", "Variant", "Workers", "Offered /s", "Reps", "Achieved /s", "p50", "p99",
        "Wait p99", "Max queue", "Dropped", "CPU", "Peak RSS",
    ]  # fmt: skip
    intro = (
        "Medians of each point's repetitions. Latency runs from each task's scheduled arrival "
        "(its wait for a worker is in it); a trial whose generator could not keep the rate is "
        "left out and says so."
    )
    return (
        f'<section><h2>Points</h2><p class="note">{escape(intro)}</p>'
        f"{_table(headers, rows, set(range(3, len(headers))))}</section>"
    )


def rate_sections(
    points: Sequence[Point], context: Context, trials: Sequence[TrialEntry]
) -> list[str]:
    return [
        rate_knees_table(context.knees),
        *(rate_section(rtt, members, context) for rtt, members in by_rtt(points)),
        rate_points_table(points),
        service_table(points),
        failed_table(trials),
        skipped_table(trials),
    ]
