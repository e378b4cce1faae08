"""The report's capacity plan (status.capacityPlan): the plan per model, each model's rate
search probe by probe, the verification attempt by attempt, and the Deployment fragment."""

from __future__ import annotations

from html import escape

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.analysis.labels import share_text
from cxlab.report.tables import _table
from cxlab_contract.durations import format_duration


def _seconds(value: float | None) -> str:
    return "—" if value is None else escape(format_duration(value))


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.6g}"


def capacity_section(plan: CapacityPlan | None) -> str:
    """Nothing when the spec asks for no plan."""
    if plan is None:
        return ""
    percentile = plan.target.percentile
    parts = [
        '<section id="capacity"><h2>Capacity plan</h2>',
        f"<p><strong>{escape(plan.display)}</strong></p><p>{escape(plan.message)}</p>",
    ]
    rows = [
        [
            escape(m.variant), "yes" if m.meets else "no", _rate(m.pods),
            _rate(m.workers_per_pod), share_text(m.expected_occupancy),
            share_text(m.expected_wait_probability), _seconds(m.expected_mean_wait_seconds),
            _seconds(m.expected_latency_seconds), _rate(m.searched_rate_per_second),
            escape(f"{m.basis}: {m.note}" if m.meets else m.reason or ""),
        ]
        for m in plan.models
    ]  # fmt: skip
    headers = [
        "model", "meets", "Pods", "workers/Pod", "busy", "waiting", "mean wait",
        f"expected {percentile}", "searched rate/s", "basis",
    ]  # fmt: skip
    parts.append(_table(headers, rows, numeric={2, 3, 4, 5, 6, 7, 8}))
    probes = [(m.variant, p) for m in plan.models for p in m.search or []]
    if probes:
        parts.append("<h3>Rate search</h3>")
        rows = [
            [escape(variant), _rate(p.rate_per_second), _seconds(p.latency_seconds),
             "held" if p.holds else "fell short", escape(p.trial)]
            for variant, p in probes
        ]  # fmt: skip
        parts.append(
            _table(["model", "rate/s (one Pod)", percentile, "", "trial"], rows, numeric={1, 2})
        )
    if plan.verification:
        parts.append("<h3>Verification</h3>")
        rows = [
            [str(v.attempt), f"{v.pods} \u00d7 {v.workers_per_pod}", _rate(v.rate_per_second),
             _rate(v.achieved_rate_per_second),
             f"{_seconds(v.latency_seconds)} ≤ {_seconds(v.objective_seconds)}"
             if v.holds else _seconds(v.latency_seconds),
             _seconds(v.mean_wait_seconds), _seconds(v.wait_p99_seconds),
             "held" if v.holds else escape(v.shortfall or "fell short")]
            for v in plan.verification
        ]  # fmt: skip
        headers = [
            "attempt", "Pods \u00d7 workers", "rate/s", "achieved/s", percentile, "mean wait",
            "wait p99", "",
        ]  # fmt: skip
        parts.append(_table(headers, rows, numeric={2, 3, 4, 5, 6}))
    elif plan.unverified:
        parts.append(f"<p>Not verified: {escape(plan.unverified)}</p>")
    if plan.manifest:
        parts.append(f"<h3>As a Deployment</h3><pre>{escape(plan.manifest)}</pre>")
    parts.append("</section>")
    return "".join(parts)
