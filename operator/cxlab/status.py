"""The `status` of a ConcurrencyExperiment, built the same way by the local backend (written
to result.json) and the operator (patched onto the resource)."""

from __future__ import annotations

from typing import Any

from cxlab.plan import Trial
from cxlab.summary import TrialOutcome, summarize


def trial_entry(outcome: TrialOutcome) -> dict[str, Any]:
    trial = outcome.trial
    entry: dict[str, Any] = {
        "name": trial.name,
        "model": trial.model,
        "variant": trial.variant,
        "workers": trial.workers,
        "gomaxprocs": trial.gomaxprocs,
        "rttSeconds": trial.rtt_seconds,
        "repetition": trial.repetition,
        "phase": "Succeeded" if outcome.succeeded else "Failed",
    }
    if outcome.error:
        entry["message"] = outcome.error
    if outcome.result is not None:
        entry["result"] = outcome.result
    return entry


def experiment_status(
    trials: list[Trial], outcomes: list[TrialOutcome], tolerance: float
) -> dict[str, Any]:
    """Phase, progress and every finished trial; the summary once all have finished."""
    failed = sum(not o.succeeded for o in outcomes)
    done = len(outcomes) == len(trials)
    if not done:
        phase = "Running" if outcomes else "Pending"
    else:
        phase = "Failed" if failed else "Succeeded"
    status: dict[str, Any] = {
        "phase": phase,
        "progress": {
            "trialsTotal": len(trials),
            "trialsDone": len(outcomes),
            "trialsFailed": failed,
        },
        "trials": [trial_entry(o) for o in outcomes],
    }
    if done:
        status["summary"] = summarize(outcomes, tolerance)
    return status
