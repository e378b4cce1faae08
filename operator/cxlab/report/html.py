"""The experiment document (spec + status) → one self-contained HTML page: the answer first
(recommendations, knees), then the curves behind it per RTT, then every number in tables.

Pure and deterministic: everything shown comes from the document, so the same document
renders to the same bytes and a report can be regenerated from result.json at any time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from cxlab.plan import plan_trials
from cxlab.report import svg
from cxlab.spec import ExperimentSpec
from cxlab.status import outcome_of
from cxlab.summary import rtt_label, summarize, workers_label
from cxlab_runner.durations import format_duration, parse_duration
from cxlab_runner.result import floor_seconds as runner_floor_seconds

Json = Mapping[str, Any]
MIB = 2**20
# More lines than this and a memory-over-time chart stops being readable.
MAX_TIMELINES = 8
# Peak memory gets a log axis when it spans more than this factor (threads vs coroutines).
LOG_MEMORY_RATIO = 10
# Memory-over-time lines share a seconds axis only while their runs last within this factor
# of each other; beyond it (sequential vs goroutines) x becomes the share of each run.
SAME_TIMESCALE = 5


@dataclass(frozen=True)
class _Style:
    color: str
    shape: str


@dataclass(frozen=True)
class _Context:
    """What every chart of the report shares."""

    spec: Json
    trials: Sequence[Json]
    knees: Sequence[Json]
    styles: Mapping[str, _Style]


def render_report(document: Json) -> str:
    """The report of one experiment as a complete HTML page (no scripts, no external files)."""
    spec: Json = document.get("spec") or {}
    typed = ExperimentSpec.model_validate(spec)  # its defaults, not the report's own
    status: Json = document.get("status") or {}
    summary: Json | None = status.get("summary")
    trials: list[Json] = list(status.get("trials") or [])
    points = _points(summary, trials, typed)
    context = _Context(
        spec=spec,
        trials=trials,
        knees=list((summary or {}).get("knees") or []),
        styles=_styles(points),
    )
    sections = [
        _header(document, typed, trials),
        _answer(summary, status),
        _knees_table(context.knees),
        *(_rtt_section(rtt, members, context) for rtt, members in _by_rtt(points)),
        _points_table(points, summary),
        _failed_table(trials),
    ]
    name = str((document.get("metadata") or {}).get("name", "experiment"))
    return _page(f"cxlab · {name}", "".join(sections), document)


# --- the data ------------------------------------------------------------------------------


def _points(summary: Json | None, trials: Sequence[Json], spec: ExperimentSpec) -> list[Json]:
    """The summary's points; for an unfinished run, the same aggregation over the trials done
    so far (the planned trials, read back from their entries as the status builder does), so
    a running experiment already shows its curves."""
    if summary is not None:
        return list(summary.get("points") or [])
    planned = {t.name: t for t in plan_trials(spec)}
    outcomes = [outcome_of(planned[t["name"]], dict(t)) for t in trials if t["name"] in planned]
    if not outcomes:
        return []
    points: list[Json] = summarize(outcomes, spec.tolerance, spec.pinning)["points"]
    return points


def _measured(point: Json) -> bool:
    return int(point.get("repetitions", 0)) > 0


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _styles(points: Sequence[Json]) -> dict[str, _Style]:
    """One colour and marker per variant, the same in every chart."""
    variants = _ordered(str(p["variant"]) for p in points)
    return {
        variant: _Style(
            svg.PALETTE[i % len(svg.PALETTE)],
            svg.SHAPES[i % len(svg.SHAPES)],
        )
        for i, variant in enumerate(variants)
    }


def _by_rtt(points: Sequence[Json]) -> list[tuple[float | None, list[Json]]]:
    groups: dict[float | None, list[Json]] = {}
    for point in filter(_measured, points):
        groups.setdefault(point.get("rttSeconds"), []).append(point)
    return sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or 0.0))


def _by_variant(points: Sequence[Json]) -> dict[str, list[Json]]:
    groups: dict[str, list[Json]] = {}
    for point in points:
        groups.setdefault(str(point["variant"]), []).append(point)
    return groups


def _same_config(trial: Json, point: Json) -> bool:
    keys = ("model", "gomaxprocs", "workers", "rttSeconds")
    return all(trial.get(key) == point.get(key) for key in keys)


def _first_success(trials: Sequence[Json], point: Json) -> Json | None:
    """The point's successful trial of the lowest repetition that recorded a timeline."""
    runs = [
        t
        for t in trials
        if _same_config(t, point)
        and t.get("phase") == "Succeeded"
        and ((t.get("result") or {}).get("rssTimeline") or {}).get("rssBytes")
    ]
    return min(runs, key=lambda t: int(t.get("repetition", 0)), default=None)


def _floor_unit(workload: Json, rtt: float | None) -> tuple[float, str] | None:
    """Seconds one wave of tasks takes at best, and its name; None where no floor exists."""
    if rtt is not None:
        return rtt, "RTT"
    if workload.get("type") == "hold" and workload.get("hold"):
        return parse_duration(str(workload["hold"])), "hold"
    return None


# --- charts --------------------------------------------------------------------------------

_WORKERS_AXIS = svg.Axis("workers (log scale)", "log", svg.format_count)


def _variant_series(
    points: Sequence[Json], styles: Mapping[str, _Style], metric: Callable[[Json], svg.Point]
) -> list[svg.Series]:
    series = []
    for variant, members in _by_variant(points).items():
        style = styles[variant]
        line = tuple(sorted((metric(p) for p in members), key=lambda p: p.x))
        series.append(svg.Series(variant, line, style.color, style.shape))
    return series


def _stat(point: Json, key: str, scale: float = 1.0) -> svg.Point:
    stats = point[key]
    return svg.Point(
        float(point["effectiveWorkers"]), stats["mean"] / scale, stats["stddev"] / scale
    )


def _floor_series(points: Sequence[Json], spec: Json, rtt: float | None) -> list[svg.Series]:
    workload: Json = spec.get("workload") or {}
    unit = _floor_unit(workload, rtt)
    tasks = workload.get("tasks")
    if unit is None or not tasks:
        return []
    seconds, name = unit
    workers = sorted({int(p["effectiveWorkers"]) for p in points})
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


def _repetitions_note(points: Sequence[Json]) -> str:
    """What a marker is: a running experiment has fewer repetitions for some points."""
    counts = sorted({int(p["repetitions"]) for p in points})
    if counts == [1]:
        return "one repetition per point"
    reps = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"mean of {reps} repetitions, bars ±1 stddev"


def _wall_chart(rtt: float | None, points: Sequence[Json], context: _Context) -> str:
    series = _variant_series(points, context.styles, lambda p: _stat(p, "wallSeconds"))
    floor = _floor_series(points, context.spec, rtt)
    note = _repetitions_note(points) + ("; dashed: the floor" if floor else "")
    return svg.line_chart(
        _titled("Wall time vs workers", rtt),
        _WORKERS_AXIS,
        svg.Axis("wall time (log scale)", "log", svg.format_seconds),
        series + floor,
        note,
    )


def _cpu_chart(rtt: float | None, points: Sequence[Json], context: _Context) -> str:
    return svg.line_chart(
        _titled("CPU vs workers", rtt),
        _WORKERS_AXIS,
        svg.Axis("CPU (% of one core)", "linear", svg.format_percent, include_zero=True),
        _variant_series(points, context.styles, lambda p: _stat(p, "cpuPercent")),
        "user + system time over wall time; above 100% on several cores",
    )


def _memory_chart(rtt: float | None, points: Sequence[Json], context: _Context) -> str:
    peaks = [float(p["peakRssBytes"]["mean"]) for p in points]
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
        _variant_series(points, context.styles, lambda p: _stat(p, "peakRssBytes", MIB)),
        "resident set size, children included for processes",
    )


def _timeline_picks(points: Sequence[Json], knees: Sequence[Json]) -> list[tuple[Json, str]]:
    """Which points get a memory-over-time line: every variant's knee first, then its
    most-workers point, until the chart is full."""
    knee_workers = {(k["variant"], k.get("rttSeconds")): k["workers"] for k in knees}
    groups = _by_variant(points)
    picks: list[tuple[Json, str]] = []
    for variant, members in groups.items():
        for point in members:
            if knee_workers.get((variant, point.get("rttSeconds"))) == point["workers"]:
                picks.append((point, "knee"))
    for members in groups.values():
        most = max(members, key=lambda p: int(p["effectiveWorkers"]))
        if all(most is not picked for picked, _ in picks):
            picks.append((most, "most workers"))
    return picks[:MAX_TIMELINES]


def _timeline_series(
    point: Json, role: str, trial: Json, style: _Style, *, dashed: bool, share: bool
) -> svg.Series:
    """RSS against seconds, or against the share of the trial's wall time (`share`) so runs
    of 50 ms and of 50 s fit one chart; the legend keeps the absolute duration."""
    result = trial["result"]
    step = float(result["rssTimeline"]["intervalSeconds"])
    scale = 100 / max(float(result["wallSeconds"]), step) if share else 1.0
    line = tuple(
        svg.Point(i * step * scale, b / MIB)
        for i, b in enumerate(result["rssTimeline"]["rssBytes"])
    )
    workers = int(point["effectiveWorkers"])
    label = (
        f"{point['variant']} · {svg.format_count(workers)} worker{'s' * (workers != 1)} "
        f"({role}, {svg.format_seconds(result['wallSeconds'])})"
    )
    return svg.Series(label, line, style.color, style.shape, dashed, markers=False)


def _timeline_chart(rtt: float | None, points: Sequence[Json], context: _Context) -> str:
    picks = [
        (point, role, trial)
        for point, role in _timeline_picks(points, context.knees)
        if (trial := _first_success(context.trials, point)) is not None
    ]
    walls = [float(trial["result"]["wallSeconds"]) for _, _, trial in picks]
    share = bool(walls) and max(walls) > SAME_TIMESCALE * max(min(walls), 1e-9)
    # Dashes tell a variant's two lines apart; with no knees yet every line is solid.
    with_knees = any(role == "knee" for _, role, _ in picks)
    series = [
        _timeline_series(
            point,
            role,
            trial,
            context.styles[str(point["variant"])],
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


def _rtt_section(rtt: float | None, points: Sequence[Json], context: _Context) -> str:
    charts = (_wall_chart, _cpu_chart, _memory_chart, _timeline_chart)
    figures = "".join(f'<figure class="chart">{c(rtt, points, context)}</figure>' for c in charts)
    title = "Charts" if rtt is None else rtt_label(rtt)
    return (
        f'<section class="rtt"><h2>{escape(title)}</h2>'
        f'<div class="charts">{figures}</div></section>'
    )


# --- header and answer ---------------------------------------------------------------------


def _describe_workload(workload: Json) -> str:
    kind = str(workload.get("type", "?"))
    tasks = f"{int(workload.get('tasks', 0)):,} tasks"
    rtts = workload.get("rtts") or ([workload["rtt"]] if workload.get("rtt") else [])
    rtt_text = ", ".join(str(r) for r in rtts)
    if kind == "sleep":
        return f"sleep: {tasks}, each sleeps one RTT ({rtt_text})"
    if kind == "http":
        connection = workload.get("connection") or "fresh"
        return (
            f"http: {tasks}, each one request answered after one RTT ({rtt_text}), "
            f"{connection} connections"
        )
    if kind == "cpu":
        return f"cpu: {tasks}, each counts down {int(workload.get('iterations', 0)):,} iterations"
    if kind == "hold":
        return f"hold: {tasks}, each stays alive for {workload.get('hold')}"
    return f"{kind}: {tasks}"


def _describe_model(entry: Json) -> str:
    model = str(entry.get("model", "?"))
    workers = entry.get("workers") or [0]
    counts = [f"{w:,}" for w in workers if w]
    parts = [", ".join(counts) + " workers"] if counts else []
    if 0 in workers:
        parts.append("one worker per task")
    text = "1 worker" if model == "sequential" else ", ".join(parts)
    gomaxprocs = entry.get("gomaxprocs")
    if gomaxprocs:
        text += "; GOMAXPROCS " + ", ".join(str(g or "default") for g in gomaxprocs)
    return f"{model} ({text})"


def _runtimes(trials: Sequence[Json]) -> str:
    found = {str((t.get("result") or {}).get("runtime", "")) for t in trials}
    return ", ".join(sorted(found - {""}))


def _facts(document: Json, typed: ExperimentSpec, trials: Sequence[Json]) -> list[tuple[str, str]]:
    spec: Json = document.get("spec") or {}
    status: Json = document.get("status") or {}
    facts = [
        ("Workload", _describe_workload(spec.get("workload") or {})),
        ("Models", " · ".join(_describe_model(m) for m in spec.get("models") or [])),
        ("Repetitions", str(typed.repetitions)),
        ("Per trial", f"{typed.resources.cpu} CPU, {typed.resources.memory}"),
        ("Tolerance", f"{typed.tolerance:.0%} of the fastest"),
        ("Runtimes", _runtimes(trials)),
    ]
    times = (
        ("Created", (document.get("metadata") or {}).get("creationTimestamp")),
        ("Started", status.get("startTime")),
        ("Completed", status.get("completionTime")),
    )
    facts += [(label, str(value)) for label, value in times if value]
    return [(label, value) for label, value in facts if value]


def _progress(status: Json) -> str:
    progress: Json = status.get("progress") or {}
    total = int(progress.get("trialsTotal", 0))
    done = int(progress.get("trialsDone", 0))
    failed = int(progress.get("trialsFailed", 0))
    share = 100 * done / total if total else 0
    text = f"{done} of {total} trials done" + (f", {failed} failed" if failed else "")
    return (
        f'<div class="progress"><span class="bar"><span style="width:{share:.1f}%"></span>'
        f"</span> {escape(text)}</div>"
    )


def _header(document: Json, typed: ExperimentSpec, trials: Sequence[Json]) -> str:
    name = str((document.get("metadata") or {}).get("name", "experiment"))
    status: Json = document.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    facts = "".join(
        f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>"
        for label, value in _facts(document, typed, trials)
    )
    return (
        f'<header><p class="kind">{escape(str(document.get("kind", "")))}</p>'
        f'<h1>{escape(name)} <span class="phase {escape(phase.lower())}">{escape(phase)}</span>'
        f'</h1>{_progress(status)}<dl class="facts">{facts}</dl></header>'
    )


def _answer(summary: Json | None, status: Json) -> str:
    if summary is None:
        phase = str(status.get("phase") or "Pending")
        note = (
            f"The experiment is {phase.lower()}: the knees and the recommendation appear once "
            "every trial has finished. The charts show the trials done so far."
        )
        return f'<section><h2>Recommendation</h2><p class="note">{escape(note)}</p></section>'
    texts = [str(r.get("text", "")) for r in summary.get("recommendations") or []]
    if not texts:
        note = "No configuration finished without failed tasks, so there is nothing to recommend."
        return f'<section><h2>Recommendation</h2><p class="note">{escape(note)}</p></section>'
    items = "".join(f"<li>{escape(text)}</li>" for text in texts)
    return f'<section><h2>Recommendation</h2><ul class="recommendations">{items}</ul></section>'


# --- tables --------------------------------------------------------------------------------


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


def _knees_table(knees: Sequence[Json]) -> str:
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
    if not _measured(point):
        return ["—"] * 7
    wall = point["wallSeconds"]
    efficiency = point.get("efficiency")
    per_worker = float(point.get("memoryPerWorkerBytes", 0))
    return [
        f"{svg.format_seconds(wall['mean'])} ± {svg.format_seconds(wall['stddev'])}",
        f"{wall['cv']:.1%}",
        f"{point['cpuPercent']['mean']:.0f}%",
        _mib(point["peakRssBytes"]["mean"]),
        f"{per_worker / 1024:,.0f} KiB" if abs(per_worker) < MIB else _mib(per_worker),
        "—" if efficiency is None else f"{efficiency:.0%}",
        svg.format_seconds(point["latencyP99Seconds"]),
    ]


def _points_table(points: Sequence[Json], summary: Json | None) -> str:
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


def _failed_table(trials: Sequence[Json]) -> str:
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


# --- page ----------------------------------------------------------------------------------

_CSS = """
:root { color-scheme: light; }
body { margin: 0; background: #f4f5f7; color: #1c1e21;
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 40px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 6px; }
h2 { font-size: 18px; margin: 30px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #e3e5e8; }
.kind { margin: 0; color: #6b7280; font-size: 12px; letter-spacing: .04em;
  text-transform: uppercase; }
.phase { font-size: 12px; font-weight: 600; padding: 2px 10px; border-radius: 10px;
  vertical-align: middle; background: #e5e7eb; color: #374151; }
.phase.succeeded { background: #dcf2e3; color: #166534; }
.phase.failed { background: #fde2e1; color: #991b1b; }
.phase.running { background: #dbeafe; color: #1e40af; }
.progress { color: #4b5563; margin: 4px 0 12px; }
.bar { display: inline-block; width: 160px; height: 8px; border-radius: 4px; background: #e5e7eb;
  vertical-align: middle; overflow: hidden; margin-right: 6px; }
.bar span { display: block; height: 100%; background: #0072b2; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0; }
dl.facts dt { color: #6b7280; }
dl.facts dd { margin: 0; }
.recommendations { margin: 0; padding: 12px 18px 12px 34px; background: #eef6fc;
  border-left: 4px solid #0072b2; font-size: 15px; font-weight: 500; }
.recommendations li + li { margin-top: 6px; }
.note { color: #6b7280; margin: 0 0 8px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(540px, 1fr)); gap: 18px; }
figure.chart { margin: 0; }
figure.chart svg { width: 100%; height: auto; max-width: 560px; display: block; }
.table { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eceef1; text-align: left;
  vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; white-space: nowrap; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.tag { font-size: 10.5px; padding: 0 5px; margin-left: 5px; border-radius: 3px;
  background: #eef2f7; color: #374151; }
.tag.best { background: #dcf2e3; color: #166534; }
footer { margin-top: 30px; color: #9ca3af; font-size: 12px; }
@media print {
  body { background: #fff; }
  main { max-width: none; padding: 0; }
  figure.chart, tr { break-inside: avoid; }
  h2 { break-after: avoid; }
}
"""


def _page(title: str, body: str, document: Json) -> str:
    origin = f"{document.get('kind', '')} {document.get('apiVersion', '')}".strip()
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{body}<footer>Generated by cxlab from the {escape(origin)} document."
        "</footer></main></body></html>\n"
    )
