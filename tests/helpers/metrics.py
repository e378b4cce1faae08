"""Objective verdicts as the operator's metrics report them."""

from __future__ import annotations

from cxlab.experiments.status import ObjectiveStatus, Verdict


def judged(name: str, verdict: Verdict) -> ObjectiveStatus:
    """An objective as status.objectives holds it (its points do not reach the metrics)."""
    return ObjectiveStatus(
        name=name, metric="latency p99", bound="≤ 250ms", unit="seconds", verdict=verdict,
        message=f"{name}: {verdict}", met=0, broken=0, inconclusive=0, points=[],
    )  # fmt: skip
