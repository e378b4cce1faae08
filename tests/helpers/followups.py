"""A swept experiment's outcomes and entries, for what follows the sweep (verification, search,
calibration)."""

from __future__ import annotations

from typing import Any

from cxlab.analysis.outcome import TrialOutcome
from cxlab.experiments.plan import Trial, plan_trials
from cxlab.experiments.record import trial_entry
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from helpers.results import CONSTANT, arrival_result, result


def experiment(
    verify: dict[str, Any] | None = None, model: str = "asyncio", **target: Any
) -> ExperimentSpec:
    capacity: dict[str, Any] = {"target": TARGET | target}
    if verify is not None:
        capacity["verify"] = verify
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "verify"},
        "spec": {
            "workload": {"type": "sleep", "tasks": 400, "rtt": "100ms"},
            "models": [{"model": model, "workers": [4]}], "capacity": capacity,
        },
    }  # fmt: skip
    return parse_experiment(document).spec


def sweep_outcomes(spec: ExperimentSpec) -> list[TrialOutcome]:
    """The hand-calculated plan's point (tests/analysis/test_capacity_plan.py): 2 Pods x 6
    workers."""
    measured = result(4, x=40, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
    return [TrialOutcome(t, measured) for t in plan_trials(spec)]


def entries(outcomes: list[TrialOutcome]) -> list[Any]:
    return [trial_entry(o) for o in outcomes]


TARGET = {"ratePerSecond": 60, "latency": {"max": "250ms"}}


def checked(trial: Trial, p99: float, waits: float = 0.0, dropped: int = 0) -> TrialOutcome:
    """A probe's or verification's merged Result: its rate, 100 ms each, p99 as given."""
    rate = trial.rate_per_second or 0.0
    measured = arrival_result(rate, CONSTANT, [waits] * 100, dropped)
    measured["latencySeconds"]["p99"] = p99
    measured["arrival"] |= {"achievedRatePerSecond": rate, "waitHistogram": result(
        1, 1, 0, 0, 0, service=[waits] * 100)["latencyHistogram"]}  # fmt: skip
    return TrialOutcome(trial, measured)
