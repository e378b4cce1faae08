"""The report's objectives (status.objectives): a verdict banner under the header, as the
ObjectivesMet condition sums them up, and per objective the table of its points."""

from __future__ import annotations

from html import escape

from cxlab.analysis.objectives import row_figure, row_label, row_needed, summed_up
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ExperimentStatus, ObjectiveStatus, Verdict
from cxlab.report.tables import _table

# The condition's status as the banner says it, and its colour (page.py's .verdict).
_SAID: dict[bool | None, tuple[str, str]] = {
    True: ("Objectives met", "met"),
    False: ("Objectives broken", "broken"),
    None: ("Objectives inconclusive", "inconclusive"),
}
# A verdict's badge: page.py's .phase colours, as compare.py colours its verdicts.
_BADGES: dict[Verdict, str] = {
    "Met": "phase succeeded",
    "Broken": "phase failed",
    "Inconclusive": "phase inconclusive",
}


def verdict_badge(verdict: Verdict) -> str:
    return f'<span class="{_BADGES[verdict]}">{escape(verdict)}</span>'


def verdict_banner(typed: ExperimentSpec, status: ExperimentStatus) -> str:
    """Met, broken or inconclusive with each objective's message; while the experiment runs,
    that they are judged at its end; nothing when the spec has no objectives."""
    if not typed.objectives:
        return ""
    if status.objectives is None:
        note = (
            "Not judged: this status predates status.objectives."
            if status.finished
            else "Not judged yet: each objective is judged once every trial has ended."
        )
        return (
            f'<div class="verdict pending"><strong>Objectives</strong><p>{escape(note)}</p></div>'
        )
    met, _, _ = summed_up(status.objectives)
    said, css = _SAID[met]
    items = "".join(f"<li>{escape(o.message)}</li>" for o in status.objectives)
    return f'<div class="verdict {css}"><strong>{escape(said)}</strong><ul>{items}</ul></div>'


def _objective(objective: ObjectiveStatus) -> str:
    counts = (
        f"{objective.met} met, {objective.broken} broken, {objective.inconclusive} inconclusive"
    )
    total = objective.met + objective.broken + objective.inconclusive
    if len(objective.points) < total:  # status keeps 100: broken, then inconclusive, then met
        counts += f"; the first {len(objective.points)} listed"
    if objective.skipped_trials:
        counts += f"; {objective.skipped_trials} trial(s) skipped (abortOnFail)"
    rows = [
        [
            escape(row_label(p)), str(p.repetitions), escape(row_figure(objective.unit, p)),
            escape(objective.bound), verdict_badge(p.verdict), escape(row_needed(p)),
        ]
        for p in objective.points
    ]  # fmt: skip
    headers = ["Configuration", "Reps", "Mean [95% CI]", "Bound", "Verdict", "Reps needed"]
    return (
        f"<h3>{escape(objective.name)} {verdict_badge(objective.verdict)}</h3>"
        f'<p class="note">{escape(f"{objective.metric} {objective.bound}: {counts}")}</p>'
        f"{_table(headers, rows, {1, 2, 5})}"
    )


def objectives_section(status: ExperimentStatus) -> str:
    """Nothing until the objectives are judged (or with none)."""
    if not status.objectives:
        return ""
    intro = (
        "Each point's repetitions against each objective: met when the 95% interval of their "
        "mean (Student t) is within the bound, broken when it is wholly beyond, inconclusive "
        "when it straddles the bound, with the repetitions in all that would decide it if the "
        "mean and spread held. One repetition has no interval: its value decides."
    )
    parts = "".join(_objective(o) for o in status.objectives)
    return (
        f'<section id="objectives"><h2>Objectives</h2><p class="note">{escape(intro)}</p>'
        f"{parts}</section>"
    )
