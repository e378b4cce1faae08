"""The `status` of a ConcurrencyExperiment: its typed shape (the CRD's status schema is
generated from `ExperimentStatus`, and every status the operator patches or the local
backend writes to result.json is checked against it), and the builder shared by both."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from cxlab.plan import Trial
from cxlab.summary import TrialOutcome, summarize


class _Shape(BaseModel):
    model_config = ConfigDict(
        extra="forbid",  # a key no model declares is a builder drifting from the schema
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,  # docstrings become the CRD's descriptions
    )


def _optional(schema: dict[str, Any] | None = None) -> Any:
    """A field that may be left out but is never null: the apiserver rejects a null where the
    schema does not say nullable. (Typed without None so that validation refuses one.)"""
    return Field(default=None, json_schema_extra=schema)


def _nullable() -> Any:
    """A field written as JSON null when it does not apply (not merely left out)."""
    return Field(default=None, json_schema_extra={"nullable": True})


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class Condition(_Shape):
    """A Kubernetes condition (metav1.Condition's fields)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = _optional()
    message: str = _optional()
    last_transition_time: datetime = _optional()
    observed_generation: int = _optional()


class RunningTrial(_Shape):
    trial: str = _optional()
    pod: str = _optional()
    tasks_done: int = _optional()
    tasks: int = _optional()
    elapsed_seconds: float = _optional()


class Progress(_Shape):
    trials_total: int = _optional()
    trials_done: int = _optional()
    trials_failed: int = _optional()
    display: str = _optional()
    running: list[RunningTrial] = _optional()


class PrometheusUsage(_Shape):
    """The trial container as Prometheus saw it (cAdvisor) over the trial Pod's life, when
    the operator has a Prometheus (CXLAB_PROMETHEUS_URL)."""

    cpu_throttled_ratio: float = _optional()
    """CFS periods throttled / CFS periods."""
    memory_working_set_bytes: int = _optional()
    """Largest container_memory_working_set_bytes."""
    window_seconds: int = _optional()
    missing: list[str] = _optional()
    """Fields Prometheus had no data for (never reported 0)."""
    error: str = _optional()


class TrialEntry(_Shape):
    name: str
    model: str
    variant: str = _optional()
    workers: int
    gomaxprocs: int | None = _nullable()
    rtt_seconds: float | None = _nullable()
    repetition: int
    phase: Literal["Succeeded", "Failed"]
    message: str = _optional()
    attempts: int = _optional()
    node: str = _optional()
    metrics_scraped: bool = _optional()
    prometheus: PrometheusUsage = _optional()
    result: dict[str, Any] = _optional()
    """The runner's Result (cxlab_contract/result-v1.schema.json)."""


class ExperimentStatus(_Shape):
    """Written by the operator: progress as trials end, the summary at the end."""

    phase: Phase = _optional()
    observed_generation: int = _optional()
    start_time: datetime = _optional()
    completion_time: datetime = _optional()
    best: str = _optional()
    """The first recommendation, short."""
    progress: Progress = _optional()
    conditions: list[Condition] = _optional(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )
    attempts: dict[str, int] = _optional()
    """Pods started per unfinished trial (retries after loss)."""
    started_spec: str = _optional()
    """The spec the run started with, as JSON: it ends with that spec."""
    trials: list[TrialEntry] = _optional()
    summary: dict[str, Any] = _optional()


def checked(status: dict[str, Any]) -> dict[str, Any]:
    """The status as built, once it is known to have the typed shape (ValueError if not):
    what is written is what the CRD's schema says."""
    ExperimentStatus.model_validate(status)
    return status


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
    return checked(status)
