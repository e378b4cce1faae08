"""Trial Pods as the deciding step sees them, and one decision over them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cxlab.config import OperatorConfig
from cxlab.experiments.decide import Observed, decide
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import TrialEntry
from helpers.specs import document

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def spec(**change: Any) -> ExperimentSpec:
    base = {"models": [{"model": "threads", "workers": [1, 2, 4]}]}
    return parse_experiment(document(**(base | change))).spec


def pod(trial: str, attempt: int = 1, phase: str = "Running", **fields: Any) -> PodView:
    base = PodView(
        name=f"x-{trial}-a{attempt}", component="trial", trial=trial, attempt=attempt,
        phase=phase, reason=None, deleting=False, created=NOW - timedelta(seconds=30),
        ip="10.244.0.9", node="node-1", ready=phase == "Running", exit_code=None,
        termination_reason=None, termination_message=None, unschedulable=None,
        container_started=phase == "Running",
    )  # fmt: skip
    return replace(base, **fields)


def run(s: ExperimentSpec, pods: list[PodView], recorded: dict[str, Any] | None = None,
        attempts: dict[str, int] | None = None, target_ready: bool = True,
        capacity_exists: bool = True) -> Any:  # fmt: skip
    """The decision, its new entries as status writes them (documents)."""
    entries = {name: TrialEntry.model_validate(e) for name, e in (recorded or {}).items()}
    observed = Observed(
        spec=s, trials=plan_trials(s), recorded=entries, attempts=attempts or {}, pods=pods,
        now=NOW, target_ready=target_ready, capacity_exists=capacity_exists,
    )  # fmt: skip
    decision = decide(observed, CONFIG)
    return replace(decision, finished=[e.document() for e in decision.finished])


CONFIG = OperatorConfig(max_attempts=3, unschedulable_grace_seconds=15)
