"""The top of the report: what was run (workload, models, resources), its progress, and
the answer (the recommendations)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from cxlab.analysis.recommend import NoRateHeld, RateRecommendation
from cxlab.analysis.summary import Summary
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ExperimentStatus, Phase, Progress, TrialEntry
from cxlab.experiments.target import TargetSpec
from cxlab.report.data import Json
from cxlab.times import timestamp


def _how_many(workload: Json) -> str:
    """The tasks of a closed burst, or how a duration run's tasks come."""
    arrival = workload.get("arrival")
    if arrival:
        rates = arrival.get("ratesPerSecond") or [arrival.get("ratePerSecond", 0)]
        shown = ", ".join(f"{r:,g}" for r in rates)
        span = f"for {arrival['duration']}" if arrival.get("duration") else "in stages"
        if arrival.get("stages"):
            shown = f"from {arrival.get('ratePerSecond', 0):,g}"
        return f"tasks arriving at {shown}/s ({arrival.get('process', 'poisson')}) {span}"
    if workload.get("duration"):
        return f"a closed loop of tasks for {workload['duration']}"
    return f"{int(workload.get('tasks', 0)):,} tasks"


def _describe_workload(workload: Json) -> str:
    kind = str(workload.get("type", "?"))
    tasks = _how_many(workload)
    rtts = workload.get("rtts") or ([workload["rtt"]] if workload.get("rtt") else [])
    rtt_text = ", ".join(str(r) for r in rtts)
    if kind == "sleep":
        return f"sleep: {tasks}, each sleeps one RTT ({rtt_text})"
    if kind == "http" and workload.get("target"):
        target = TargetSpec.model_validate(workload["target"])
        lines = target.describe()  # secret headers as where they come from
        return (
            f"http: {tasks}, each one request to your service: {'; '.join(lines)}; "
            f"{workload.get('connection') or 'fresh'} connections. Its latency is measured, not "
            f"simulated: the latencies below are the service's, the CPU and memory the client's"
        )
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


def _runtimes(trials: Sequence[TrialEntry]) -> str:
    found = {t.result["runtime"] for t in trials if t.result is not None}
    return ", ".join(sorted(found - {""}))


def _facts(
    document: Json, typed: ExperimentSpec, status: ExperimentStatus, trials: Sequence[TrialEntry]
) -> list[tuple[str, str]]:
    spec: Json = document.get("spec") or {}
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
        ("Started", status.start_time and timestamp(status.start_time)),
        ("Completed", status.completion_time and timestamp(status.completion_time)),
    )
    facts += [(label, str(value)) for label, value in times if value]
    return [(label, value) for label, value in facts if value]


def _progress(status: ExperimentStatus) -> str:
    progress = status.progress or Progress()
    total, done = progress.trials_total or 0, progress.trials_done or 0
    failed, skipped = progress.trials_failed or 0, progress.trials_skipped or 0
    share = 100 * done / total if total else 0
    text = f"{done} of {total} trials done" + (f", {failed} failed" if failed else "")
    text += f", {skipped} skipped (abortOnFail)" if skipped else ""
    return (
        f'<div class="progress"><span class="bar"><span style="width:{share:.1f}%"></span>'
        f"</span> {escape(text)}</div>"
    )


def header_section(
    document: Json, typed: ExperimentSpec, status: ExperimentStatus, trials: Sequence[TrialEntry]
) -> str:
    name = str((document.get("metadata") or {}).get("name", "experiment"))
    phase = (status.phase or Phase.PENDING).value
    facts = "".join(
        f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>"
        for label, value in _facts(document, typed, status, trials)
    )
    return (
        f'<header><p class="kind">{escape(str(document.get("kind", "")))}</p>'
        f'<h1>{escape(name)} <span class="phase {escape(phase.lower())}">{escape(phase)}</span>'
        f'</h1>{_progress(status)}<dl class="facts">{facts}</dl></header>'
    )


def answer_section(summary: Summary | None, status: ExperimentStatus) -> str:
    if summary is None:
        phase = str(status.phase or Phase.PENDING)
        note = (
            f"The experiment is {phase.lower()}: the knees and the recommendation appear once "
            "every trial has finished. The charts show the trials done so far."
        )
        return f'<section><h2>Recommendation</h2><p class="note">{escape(note)}</p></section>'
    texts = [r.text for r in summary.recommendations]
    if not texts:
        note = "No configuration finished without failed tasks, so there is nothing to recommend."
        return f'<section><h2>Recommendation</h2><p class="note">{escape(note)}</p></section>'
    items = "".join(f"<li>{escape(text)}</li>" for text in texts)
    rates = any(isinstance(r, RateRecommendation | NoRateHeld) for r in summary.recommendations)
    return (
        f'<section><h2>Recommendation</h2><ul class="recommendations">{items}</ul>'
        f'<p class="note">{escape(_RATE_RANKING if rates else _RANKING)}</p></section>'
    )


# How a recommendation is chosen, and what "tied" means (cxlab.analysis.summary.recommend).
_RANKING = (
    "Of the configurations whose median wall time is within the tolerance of the fastest: "
    "the least CPU time, then the least peak RSS, then the fewest workers. Two that the "
    "measurements cannot separate go on to the next criterion and are named as tied: with 3 "
    "or more repetitions, when their 95% intervals overlap; with fewer, when their medians "
    "are within the tolerance of each other."
)

# An arrival run's (cxlab.analysis.recommend.recommend_rates).
_RATE_RANKING = (
    "Of the configurations holding the largest offered rate (within the tolerance): the one "
    "using the least CPU at its knee, then the fewest workers. A rate holds when no task failed "
    "or was dropped and the latency, measured from each task's scheduled arrival, met the "
    "objective, or without one stayed within the tolerance of its value at the lowest rate."
)
