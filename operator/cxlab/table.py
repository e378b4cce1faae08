"""The experiment's answer as plain-text tables for a terminal, and `cxlab compare`'s table."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.analysis.knees import Knee, RateKnee
from cxlab.analysis.labels import NOISE_CHECKED, rate_text, share_text, spread_cells, workers_label
from cxlab.analysis.objectives import row_figure, row_needed
from cxlab.analysis.outcome import failure_kinds_text
from cxlab.analysis.point import ArrivalPoint, MeasuredPoint, Point
from cxlab.analysis.service_plan import ServicePlan
from cxlab.analysis.stats import MIN_FOR_INTERVAL, Spread, center
from cxlab.analysis.summary import Summary, syscalls_requested
from cxlab.compare import VERDICTS, Comparison
from cxlab.conditions import condition_of
from cxlab.experiments.status import ExperimentStatus, ObjectivePoint, ObjectiveStatus, Progress
from cxlab.search_rows import SEARCH_HEADERS, search_legend, search_rows
from cxlab.service_rows import SERVICE_HEADERS, SERVICE_LEGEND, has_service_figures, service_rows
from cxlab_contract.durations import format_duration


def render_table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Columns aligned right but the first `left` ones (names)."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += [
        "  ".join(
            c.rjust(w) if i >= left else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    return "\n".join(out)


def rtt_cell(rtt_seconds: float | None) -> str:
    """An RTT in a column headed "rtt": the duration, or a dash for cpu and hold."""
    return "—" if rtt_seconds is None else format_duration(rtt_seconds)


def _mib(value: float) -> str:
    return f"{value / 2**20:.1f}"


def unit_cell(value: float | None, unit: str = "") -> str:
    """A quantity with its unit in the cell (for columns whose header names none)."""
    if value is None:
        return "—"
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.3f} s"
    if unit == "B":
        return f"{_mib(value)} MiB"
    if unit == "µs":
        return f"{value * 1e6:.1f} µs"
    return f"{value:,.1f}"


def _median(stat: Spread | None, show: Callable[[float], str]) -> str:
    """A quantity a Result may lack (written before it existed, or a model that cannot
    measure it): a dash, never a made-up 0."""
    return "—" if stat is None else show(center(stat))


def _count(value: float) -> str:
    return f"{value:.0f}"


def _workers_cell(point: MeasuredPoint) -> str:
    shown = (
        str(point.effective_workers) if point.model == "sequential" or point.workers else "per task"
    )
    started = point.workers_started
    if started is not None and started != point.effective_workers * point.pods:
        shown += f" (started {started})"
    return shown if point.pods == 1 else f"{point.pods} Pods \u00d7 {shown}"


def _syscall_cells(point: MeasuredPoint) -> tuple[str, str]:
    """The syscalls and futex columns: medians, or "unavailable" where the platform would
    not count them (never 0)."""
    syscalls = point.syscalls
    if syscalls is None:
        return "—", "—"
    if syscalls.unavailable is not None:
        return "unavailable", "unavailable"
    return _median(syscalls.total, _count), _median(syscalls.futex, _count)


def _noisy_cell(point: MeasuredPoint) -> str:
    return " ".join(NOISE_CHECKED[k] for k in point.noisy_quantities)


def _measured_row(p: MeasuredPoint, syscalls: bool) -> list[str]:
    wall, interval, cv = spread_cells(p.wall_seconds, p.repetitions, lambda v: f"{v:.3f}")
    efficiency = "" if p.efficiency is None else f"{p.efficiency:.2f}"
    return [
        wall,
        interval,
        cv,
        f"{center(p.cpu_seconds):.3f}",
        f"{center(p.cpu_percent):.0f}",
        _mib(center(p.peak_rss_bytes)),
        _median(p.peak_vm_bytes, lambda v: f"{v / 2**20:.0f}"),
        efficiency,
        _count(center(p.context_switches)),
        _median(p.task_context_switches, _count),
        *(_syscall_cells(p) if syscalls else ()),
        str(p.failed_trials + p.tasks_failed),
        _noisy_cell(p),
    ]


def _not_measured(point: Point) -> str:
    """Why a point has no measurements: skipped (abortOnFail), saturated, or failed."""
    if point.skipped_trials and not point.failed_trials:
        return "skipped"
    return "saturated" if point.saturated_trials else "failed"


def points_table(points: Sequence[Point]) -> str:
    """Every point: medians (what knees and the recommendation use), the wall time's 95 %
    interval and CV, and the columns of what the Results measured."""
    syscalls = syscalls_requested(points)
    headers = [
        "model", "workers", "rtt", "reps", "wall s", "95% CI", "cv", "cpu s", "cpu %",
        "peak MiB", "VM MiB", "eff", "ctx sw", "task ctx sw",
        *(("syscalls", "futex") if syscalls else ()), "failed", "noisy",
    ]  # fmt: skip
    rows = []
    for p in points:
        reps = str(p.repetitions)
        if not isinstance(p, MeasuredPoint):
            why = "skipped" if p.skipped_trials and not p.failed_trials else "failed"
            label = [p.variant, str(p.workers), rtt_cell(p.rtt_seconds), reps, why]
            blanks = [""] * (len(headers) - len(label) - 2)
            rows.append([*label, *blanks, str(p.failed_trials), ""])
            continue
        label = [p.variant, _workers_cell(p), rtt_cell(p.rtt_seconds), reps]
        rows.append([*label, *_measured_row(p, syscalls)])
    return render_table(headers, rows)


def rates_table(points: Sequence[Point]) -> str:
    """An arrival run's points: the rate asked and achieved, the latency from the schedule
    (queueing in it), the wait for a worker, what was dropped, CPU and memory."""
    headers = [
        "model", "workers", "rtt", "rate/s", "reps", "achieved/s", "p50", "p99", "wait p99",
        "max queue", "dropped", "cpu %", "peak MiB", "failed", "noisy",
    ]  # fmt: skip
    rows = []
    for p in points:
        workers = _workers_cell(p) if isinstance(p, MeasuredPoint) else str(p.workers)
        label = [p.variant, workers, rtt_cell(p.rtt_seconds)]
        label += [f"{p.rate_per_second or 0:g}", str(p.repetitions)]
        if not isinstance(p, ArrivalPoint):
            rows.append([*label, _not_measured(p), *[""] * (len(headers) - len(label) - 3),
                         str(p.failed_trials), ""])  # fmt: skip
            continue
        rows.append([
            *label,
            f"{center(p.achieved_rate_per_second):,.1f}",
            unit_cell(center(p.p50_seconds), "s"),
            unit_cell(center(p.p99_seconds), "s"),
            unit_cell(center(p.wait_p99_seconds), "s"),
            str(p.max_queue),
            str(p.dropped),
            f"{center(p.cpu_percent):.0f}",
            _mib(center(p.peak_rss_bytes)),
            str(p.failed_trials + p.tasks_failed),
            _noisy_cell(p),
        ])  # fmt: skip
    return render_table(headers, rows)


def rate_knees_table(knees: Sequence[Knee | RateKnee]) -> str:
    rows = [
        [
            k.variant,
            rtt_cell(k.rtt_seconds),
            workers_label(k.model, k.workers, k.pods),
            "none"
            if k.rate_per_second is None
            else f"{k.rate_per_second:g}" + ("+" if k.highest_measured else ""),
            unit_cell(k.latency_p99_seconds, "s"),
            k.criterion,
        ]
        for k in knees
        if isinstance(k, RateKnee)
    ]
    return render_table(["model", "rtt", "workers", "holds /s", "p99", "criterion"], rows)


def knees_table(knees: Sequence[Knee | RateKnee]) -> str:
    rows = [
        [
            k.variant,
            rtt_cell(k.rtt_seconds),
            workers_label(k.model, k.workers, k.pods) + (" (noisy)" if k.noisy else ""),
            f"{k.wall_seconds:.3f}",
            f"{k.best_wall_seconds:.3f}",
            f"{k.cpu_percent:.0f}",
            _mib(k.peak_rss_bytes),
        ]
        for k in knees
        if isinstance(k, Knee)
    ]
    return render_table(["model", "rtt", "knee", "wall s", "best s", "cpu %", "peak MiB"], rows)


def capacity_text(plan: CapacityPlan | None) -> str:
    """A capacity plan (status.capacityPlan), model by model."""
    if not plan:
        return "capacity plan: none (set spec.capacity.target)"
    rows = []
    for model in plan.models:
        if not model.meets:
            rows.append([model.variant, "no", *["—"] * 8, model.reason or ""])
            continue
        rows.append([
            model.variant, "yes", str(model.pods), str(model.workers_per_pod or "—"),
            share_text(model.expected_occupancy), share_text(model.expected_wait_probability),
            unit_cell(model.expected_mean_wait_seconds, "s"),
            str(model.cores), unit_cell(model.memory_bytes, "B"),
            unit_cell(model.expected_latency_seconds, "s"),
            f"{model.basis or ''}: {model.note or ''}".strip(": "),
        ])  # fmt: skip
    headers = [
        "model", "meets", "Pods", "workers/Pod", "busy", "waiting", "mean wait", "cores",
        "memory", f"expected {plan.target.percentile}", "basis",
    ]  # fmt: skip
    return f"capacity plan: {plan.display}\n{render_table(headers, rows)}"


def service_plan_text(plan: ServicePlan) -> str:
    """The service's plan (status.servicePlan), variant by variant."""
    rows = []
    for variant in plan.variants:
        measured = ", ".join(
            f"{rate_text(m.rate_per_second)}@{m.replicas}" for m in variant.measured
        )
        fit = variant.scalability
        usl = f"sigma {fit.sigma:.3g} kappa {fit.kappa:.3g}" if fit else "—"
        if not variant.meets:
            rows.append([variant.variant, "no", measured or "—", usl, *["—"] * 6,
                         variant.reason or ""])  # fmt: skip
            continue
        rows.append([
            variant.variant, "yes", measured, usl, str(variant.concurrency),
            str(variant.replicas), f"{variant.cores:g}" if variant.cores is not None else "—",
            unit_cell(variant.memory_bytes, "B"), unit_cell(variant.expected_latency_seconds, "s"),
            share_text(variant.expected_cpu_utilization), variant.basis or "",
        ])  # fmt: skip
    headers = [
        "variant", "meets", "searched (tasks/s@replicas)", "USL", "at once", "replicas",
        "cores", "memory", f"expected {plan.target.percentile}", "CPU", "basis",
    ]  # fmt: skip
    return f"service plan: {plan.display}\n{render_table(headers, rows)}\n{plan.message}"


def _interval_legend(points: Sequence[Point]) -> str:
    """What the 95% CI column holds, for the repetitions this experiment ran."""
    reps = sorted({p.repetitions for p in points if p.repetitions})
    ran = "" if not reps else str(reps[0]) if len(reps) == 1 else f"{reps[0]}-{reps[-1]}"
    if reps and reps[0] >= MIN_FOR_INTERVAL:
        return f"of the mean wall time over {ran} repetitions"
    return f"of the mean wall time, from {MIN_FOR_INTERVAL} repetitions on" + (
        f" (this experiment ran {ran})" if ran else ""
    )


def _head(name: str, status: ExperimentStatus) -> str:
    """The experiment in one line: its phase, its trials, its wait for capacity."""
    progress = status.progress or Progress()
    head = (
        f"{name}: {status.phase} — {progress.trials_done}/{progress.trials_total} trials, "
        f"{progress.trials_failed} failed"
    )
    if progress.trials_skipped:
        head += f", {progress.trials_skipped} skipped (abortOnFail)"
    if status.queue:  # waiting for capacity on a cluster
        head += f"; queued: {status.queue.message or ''}"
    elif status.queued_seconds:
        head += f"; waited {status.queued_seconds:.1f} s in the queue"
    return head


def _answer(name: str, summary: Summary) -> list[str]:
    """The points and the knees (or where they are), then the recommendations."""
    tolerance = f"{summary.tolerance:.0%}"
    points, knees, rates = summary.points, summary.knees or [], summary.arrivals
    if (
        points is None
    ):  # a cluster's compact summary: read from kubectl (stdin), or its ConfigMap is gone
        parts = [
            f"No points or knees: they are in ConfigMap {summary.summary_in}, not in this "
            f"document (cxlab summary cx/{name} reads them) or gone.",
            "",
        ]
    elif rates:
        legend = (
            "Medians of each point's repetitions; latency from each task's scheduled arrival "
            f"(queueing in it); noisy: CV over the {tolerance} tolerance."
        )
        parts = [rates_table(points), legend, ""]
    else:
        legend = (
            f"Medians of each point's repetitions; 95% CI: {_interval_legend(points)}; "
            f"noisy: CV over the {tolerance} tolerance."
        )
        parts = [points_table(points), legend, ""]
    if points and has_service_figures(points):
        parts += [render_table(SERVICE_HEADERS, service_rows(points)), SERVICE_LEGEND, ""]
    if knees and rates:
        parts += [
            "Knees (the largest rate at and below which every rate held; + : the highest "
            "measured, so perhaps more):",
            rate_knees_table(knees),
            "",
        ]
    elif knees:
        parts += [
            f"Knees (fewest workers within {tolerance} of each model's best):",
            knees_table(knees),
            "",
        ]
    return parts + ["Recommendation:"] + [f"  {r.text}" for r in summary.recommendations]


def render_summary(document: Mapping[str, Any]) -> str:
    """An experiment document (result.json, or read from the cluster) for a terminal."""
    status = ExperimentStatus.read(document["status"])
    name = document["metadata"]["name"]
    head = _head(name, status)
    if status.summary is None:
        return head
    parts = [head, "", *_answer(name, status.summary)]
    if status.rate_search:
        parts += ["", "Rate search:", render_table(SEARCH_HEADERS, search_rows(status.rate_search))]
        parts += search_legend(status.rate_search)
    if status.capacity_plan:
        parts += ["", capacity_text(status.capacity_plan)]
    if status.service_plan:
        parts += ["", service_plan_text(status.service_plan)]
    failed = [t for t in status.entries if t.failed]
    if failed:
        parts += ["", "Failed trials:"] + [f"  {t.name}: {t.message or ''}" for t in failed]
    if requests := failed_requests_text(status):
        parts += ["", requests]
    skipped = [t for t in status.entries if t.skipped]
    if skipped:
        parts += ["", "Skipped trials:"] + [f"  {t.name}: {t.message or ''}" for t in skipped]
    if status.objectives:
        parts += ["", objectives_text(status)]
    return "\n".join(parts)


# At most this many trials' failed tasks are listed; the rest are counted.
FAILED_REQUEST_ROWS = 10


def failed_requests_text(status: ExperimentStatus) -> str:
    """Each trial whose tasks failed, by kind of failure (the Result's failureKinds): a target
    refusing, timing out, failing TLS or answering errors reads differently."""
    rows = []
    for entry in status.entries:
        result = entry.result
        if not result or not result["tasksFailed"]:
            continue
        by_kind = failure_kinds_text(result)
        total = result["tasksOk"] + result["tasksFailed"]
        rows.append(
            f"  {entry.name}: {result['tasksFailed']} of {total}"
            f"{f' ({by_kind})' if by_kind else ''}"
        )
    if not rows:
        return ""
    more = len(rows) - FAILED_REQUEST_ROWS
    shown = rows[:FAILED_REQUEST_ROWS] + ([f"  ... and {more} more trials"] if more > 0 else [])
    return "\n".join(["Failed tasks by kind (connect, timeout, tls, status, other):", *shown])


_VERDICT_WORD = {"Met": "met", "Broken": "BROKEN", "Inconclusive": "inconclusive"}


def objectives_text(status: ExperimentStatus) -> str:
    """The verdict (the ObjectivesMet condition) and, per objective, its points that did not
    meet it (or its closest, all met), as `cxlab run` ends with it."""
    verdict = condition_of(status.conditions, "ObjectivesMet")
    said = {"True": "met", "False": "NOT MET", "Unknown": "INCONCLUSIVE"}
    head = f"Objectives: {said[verdict.status] if verdict else 'not judged yet'}"
    lines = [head]
    for objective in status.objectives or ():
        lines.append(f"  {_VERDICT_WORD[objective.verdict]:<12} {objective.message}")
    rows = [
        _objective_row(objective, point)
        for objective in status.objectives or ()
        for point in objective.points
        if point.verdict != "Met"
    ]
    if rows:
        headers = ["objective", "model", "workers", "rtt", "rate/s", "reps", "value [95% CI]",
                   "bound", "verdict", "reps needed"]  # fmt: skip
        lines += ["", render_table(headers, rows)]
    return "\n".join(lines)


def _objective_row(objective: ObjectiveStatus, point: ObjectivePoint) -> list[str]:
    return [
        objective.name,
        point.variant,
        workers_label(point.model, point.workers, point.pods or 1),
        rtt_cell(point.rtt_seconds),
        "—" if point.rate_per_second is None else f"{point.rate_per_second:g}",
        str(point.repetitions),
        row_figure(objective.unit, point),
        objective.bound,
        _VERDICT_WORD[point.verdict],
        row_needed(point),
    ]


# Each compared metric's unit in a cell, as the trend's (cxlab.trend.trend_tables).
_METRIC_UNITS = {
    "wallSeconds": "s",
    "throughputPerSecond": "/s",
    "cpuSecondsPerTask": "µs",
    "latencyP99Seconds": "s",
    "peakRssBytes": "B",
}
COMPARISON_HEADERS = [
    "point", "metric", "n", "before", "95% CI", "after", "95% CI", "change", "p", "verdict",
]  # fmt: skip


def metric_cell(metric: str, value: float | None) -> str:
    """A value of one of the history's metrics, with its unit."""
    unit = _METRIC_UNITS.get(metric, "")
    if value is not None and unit == "/s":
        return f"{unit_cell(value)}/s"
    return unit_cell(value, unit)


def _interval_cell(metric: str, interval: tuple[float, float] | None) -> str:
    if interval is None:
        return "—"
    low, high = interval
    return f"[{metric_cell(metric, low)}, {metric_cell(metric, high)}]"


def p_cell(p: float | None) -> str:
    if p is None:
        return "—"
    return f"{p:.2g}" if p >= 1e-4 else "< 0.0001"


def comparison_rows(comparison: Comparison) -> list[list[str]]:
    """One row per point and metric (the point named on its first), COMPARISON_HEADERS' cells:
    the terminal's table and the HTML page's."""
    rows, previous = [], None
    for c in comparison.changes:
        rows.append([
            "" if c.point == previous else c.point, c.metric, f"{c.before.n} → {c.after.n}",
            metric_cell(c.metric, c.before.median), _interval_cell(c.metric, c.before.interval),
            metric_cell(c.metric, c.after.median), _interval_cell(c.metric, c.after.interval),
            "—" if c.change is None else f"{100 * c.change:+.1f} %", p_cell(c.p_value),
            c.verdict,
        ])  # fmt: skip
        previous = c.point
    return rows


def comparison_legend(comparison: Comparison) -> str:
    """What the comparison's columns hold and when a change counts."""
    policy = comparison.policy
    return (
        "n: repetitions compared (an entry that kept only a median counts 1); before, after: "
        "medians; 95% CI: of the geometric mean, from 2 repetitions on; p: Welch's t test on "
        "the logarithms, two-sided, adjusted by Benjamini-Yekutieli over the "
        f"{comparison.tests} tests; worse or better: p at most {policy.significance:g} and a "
        f"change by a factor of at least {1 + policy.min_change:g}; n/a: fewer than 2 "
        "repetitions on a side."
    )


def comparison_tally(comparison: Comparison) -> str:
    """e.g. "B against A: 1 worse, 0 better, 8 same, 1 n/a"."""
    counts = ", ".join(f"{comparison.count(v)} {v}" for v in VERDICTS)
    return f"B against A: {counts}"


def comparison_text(comparison: Comparison, sources: tuple[str, str]) -> str:
    """`cxlab compare A B` for a terminal: which runs, the table, the points of one run only."""
    lines = [
        f"A: {comparison.before} ({sources[0]})",
        f"B: {comparison.after} ({sources[1]})",
        "",
        render_table(COMPARISON_HEADERS, comparison_rows(comparison), left=2),
    ]
    if comparison.added:
        lines.append(f"added (only in B): {', '.join(comparison.added)}")
    if comparison.removed:
        lines.append(f"removed (only in A): {', '.join(comparison.removed)}")
    lines += [textwrap.fill(comparison_legend(comparison), 100), "", comparison_tally(comparison)]
    return "\n".join(lines)
