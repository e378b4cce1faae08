"""The SVG charts of one RTT: wall time, CPU, peak memory and memory over time against
workers, with the floor where one exists."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape

from cxlab.analysis.knees import Knee, RateKnee
from cxlab.analysis.labels import concurrency, rtt_label
from cxlab.analysis.point import MeasuredPoint
from cxlab.analysis.stats import Spread, center
from cxlab.experiments.status import TrialEntry
from cxlab.report import svg
from cxlab.report.data import MIB, Context, Json, Style, by_variant, first_success, floor_unit
from cxlab_contract.result import floor_seconds as runner_floor_seconds

# More lines than this and a memory-over-time chart stops being readable.
MAX_TIMELINES = 8
# Peak memory gets a log axis when it spans more than this factor (threads vs coroutines).
LOG_MEMORY_RATIO = 10
# Memory-over-time lines share a seconds axis only while their runs last within this factor
# of each other; beyond it (sequential vs goroutines) x becomes the share of each run.
SAME_TIMESCALE = 5

_WORKERS_AXIS = svg.Axis("workers (log scale)", "log", svg.format_count)


def _variant_series(
    points: Sequence[MeasuredPoint],
    styles: Mapping[str, Style],
    metric: Callable[[MeasuredPoint], svg.Point],
) -> list[svg.Series]:
    series = []
    for variant, members in by_variant(points).items():
        style = styles[variant]
        line = tuple(sorted((metric(p) for p in members), key=lambda p: p.x))
        series.append(svg.Series(variant, line, style.color, style.shape))
    return series


def _stat(point: MeasuredPoint, stats: Spread, scale: float = 1.0) -> svg.Point:
    """The median, as knees and the recommendation read it, with a ±1 stddev bar."""
    return svg.Point(float(concurrency(point)), center(stats) / scale, stats.stddev / scale)


def _floor_series(
    points: Sequence[MeasuredPoint], spec: Json, rtt: float | None
) -> list[svg.Series]:
    workload: Json = spec.get("workload") or {}
    unit = floor_unit(workload, rtt)
    tasks = workload.get("tasks")
    if unit is None or not tasks:
        return []
    seconds, name = unit
    workers = sorted({concurrency(p) for p in points})  # a floor of ceil(tasks / W) waves
    rtt, hold = (seconds, 0.0) if name == "RTT" else (0.0, seconds)
    floors = [
        (w, runner_floor_seconds(workload["type"], int(tasks), w, rtt, hold)) for w in workers
    ]
    # the runners' own formula (the contract's floor); cpu has none
    line = tuple(svg.Point(w, floor) for w, floor in floors if floor is not None)
    if not line:
        return []
    label = f"floor: ⌈tasks / workers⌉ \u00d7 {name}"
    return [svg.Series(label, line, svg.REFERENCE_COLOR, dashed=True, markers=False)]


def _repetitions_note(points: Sequence[MeasuredPoint]) -> str:
    """What a marker is: a running experiment has fewer repetitions for some points."""
    counts = sorted({p.repetitions for p in points})
    if counts == [1]:
        return "one repetition per point"
    reps = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"median of {reps} repetitions, bars ±1 stddev"


def _wall_chart(rtt: float | None, points: Sequence[MeasuredPoint], context: Context) -> str:
    series = _variant_series(points, context.styles, lambda p: _stat(p, p.wall_seconds))
    floor = _floor_series(points, context.spec, rtt)
    note = _repetitions_note(points) + ("; dashed: the floor" if floor else "")
    return svg.line_chart(
        _titled("Wall time vs workers", rtt),
        _WORKERS_AXIS,
        svg.Axis("wall time (log scale)", "log", svg.format_seconds),
        series + floor,
        note,
    )


def _cpu_chart(rtt: float | None, points: Sequence[MeasuredPoint], context: Context) -> str:
    return svg.line_chart(
        _titled("CPU vs workers", rtt),
        _WORKERS_AXIS,
        svg.Axis("CPU (% of one core)", "linear", svg.format_percent, include_zero=True),
        _variant_series(points, context.styles, lambda p: _stat(p, p.cpu_percent)),
        "user + system time over wall time; above 100% on several cores",
    )


def _memory_chart(rtt: float | None, points: Sequence[MeasuredPoint], context: Context) -> str:
    peaks = [center(p.peak_rss_bytes) for p in points]
    log = min(peaks) > 0 and max(peaks) / min(peaks) > LOG_MEMORY_RATIO
    axis = (
        svg.Axis("peak RSS (log scale)", "log", svg.format_mib)
        if log
        else svg.Axis("peak RSS", "linear", svg.format_mib, include_zero=True)
    )
    return svg.line_chart(
        _titled("Peak memory vs workers", rtt),
        _WORKERS_AXIS,
        axis,
        _variant_series(points, context.styles, lambda p: _stat(p, p.peak_rss_bytes, MIB)),
        "resident set size, children included for processes",
    )


def _timeline_picks(
    points: Sequence[MeasuredPoint], knees: Sequence[Knee | RateKnee]
) -> list[tuple[MeasuredPoint, str]]:
    """Which points get a memory-over-time line: every variant's knee first, then its
    most-workers point, until the chart is full."""
    knee_workers = {(k.variant, k.rtt_seconds): (k.pods, k.workers) for k in knees}
    groups = by_variant(points)
    picks: list[tuple[MeasuredPoint, str]] = []
    for variant, members in groups.items():
        for point in members:
            configuration = (point.pods, point.workers)
            if knee_workers.get((variant, point.rtt_seconds)) == configuration:
                picks.append((point, "knee"))
    for members in groups.values():
        most = max(members, key=concurrency)
        if all(most is not picked for picked, _ in picks):
            picks.append((most, "most workers"))
    return picks[:MAX_TIMELINES]


def _timeline_series(
    point: MeasuredPoint, role: str, trial: TrialEntry, style: Style, *, dashed: bool, share: bool
) -> svg.Series:
    """RSS against seconds, or against the share of the trial's wall time (`share`) so runs
    of 50 ms and of 50 s fit one chart; the legend keeps the absolute duration."""
    result = trial.result
    assert result is not None  # first_success picks only trials with a Result
    step = float(result["rssTimeline"]["intervalSeconds"])
    scale = 100 / max(float(result["wallSeconds"]), step) if share else 1.0
    line = tuple(
        svg.Point(i * step * scale, b / MIB)
        for i, b in enumerate(result["rssTimeline"]["rssBytes"])
    )
    workers = concurrency(point)
    label = (
        f"{point.variant} · {svg.format_count(workers)} worker{'s' * (workers != 1)} "
        f"({role}, {svg.format_seconds(result['wallSeconds'])})"
    )
    return svg.Series(label, line, style.color, style.shape, dashed, markers=False)


def _timeline_chart(rtt: float | None, points: Sequence[MeasuredPoint], context: Context) -> str:
    picks = [
        (point, role, trial)
        for point, role in _timeline_picks(points, context.knees)
        if (trial := first_success(context.trials, point)) is not None
    ]
    walls = [float(trial.result["wallSeconds"]) for _, _, trial in picks if trial.result]
    share = bool(walls) and max(walls) > SAME_TIMESCALE * max(min(walls), 1e-9)
    # Dashes tell a variant's two lines apart; with no knees yet every line is solid.
    with_knees = any(role == "knee" for _, role, _ in picks)
    series = [
        _timeline_series(
            point,
            role,
            trial,
            context.styles[point.variant],
            dashed=with_knees and role != "knee",
            share=share,
        )
        for point, role, trial in picks
    ]
    x_axis = (
        svg.Axis("share of the trial's wall time", "linear", svg.format_percent, True)
        if share
        else svg.Axis("time since the tasks started", "linear", svg.format_seconds, True)
    )
    note = "solid: the knee, dashed: the most workers" if with_knees else "the most workers"
    return svg.line_chart(
        _titled("Memory over time", rtt),
        x_axis,
        svg.Axis("RSS", "linear", svg.format_mib, include_zero=True),
        series,
        f"first successful repetition; {note}",
    )


def _titled(what: str, rtt: float | None) -> str:
    return what if rtt is None else f"{what} · {rtt_label(rtt)}"


def rtt_section(rtt: float | None, points: Sequence[MeasuredPoint], context: Context) -> str:
    charts = (_wall_chart, _cpu_chart, _memory_chart, _timeline_chart)
    figures = "".join(f'<figure class="chart">{c(rtt, points, context)}</figure>' for c in charts)
    title = "Charts" if rtt is None else rtt_label(rtt)
    return (
        f'<section class="rtt"><h2>{escape(title)}</h2>'
        f'<div class="charts">{figures}</div></section>'
    )
