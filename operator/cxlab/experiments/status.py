"""The `status` of a ConcurrencyExperiment: its typed shape (the CRD's status schema is
generated from `ExperimentStatus`, and every status the operator patches or the local
backend writes to result.json is checked against it), and the builder shared by both."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from cxlab.experiments.capacity_plan import CapacityPlan, capacity_plan
from cxlab.experiments.plan import Trial
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.summary import TrialOutcome, best_line, summarize
from cxlab.shape import Shape, nullable, optional, shaped


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class Condition(Shape):
    """A Kubernetes condition (metav1.Condition's fields)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = optional()
    message: str = optional()
    last_transition_time: datetime = optional()
    observed_generation: int = optional()


class RunningTrial(Shape):
    trial: str = optional()
    pod: str = optional()
    tasks_done: int = optional()
    tasks: int = optional()
    elapsed_seconds: float = optional()


class Progress(Shape):
    trials_total: int = optional()
    trials_done: int = optional()
    trials_failed: int = optional()
    display: str = optional()
    running: list[RunningTrial] = optional()


class PrometheusUsage(Shape):
    """The trial container as Prometheus saw it (cAdvisor) over the trial Pod's life, when
    the operator has a Prometheus (CXLAB_PROMETHEUS_URL)."""

    cpu_throttled_ratio: float = optional()
    """CFS periods throttled / CFS periods."""
    memory_working_set_bytes: int = optional()
    """Largest container_memory_working_set_bytes."""
    window_seconds: int = optional()
    missing: list[str] = optional()
    """Fields Prometheus had no data for (never reported 0)."""
    error: str = optional()


class TrialEntry(Shape):
    name: str
    model: str
    variant: str = optional()
    workers: int
    gomaxprocs: int | None = nullable()
    rtt_seconds: float | None = nullable()
    repetition: int
    phase: Literal["Succeeded", "Failed"]
    message: str = optional()
    pods: int = optional()
    """Runner Pods of a trial of several (absent: one)."""
    attempts: int = optional()
    node: str = optional()
    nodes: list[str] = optional()
    """Each Pod's node, in Pod order, for a trial of several Pods."""
    pinned: bool = optional()
    """Whether the trial ran on exactly the cores it asked for (set once it has a Result)."""
    metrics_scraped: bool = optional()
    prometheus: PrometheusUsage = optional()
    wall_seconds: float = optional()
    """The Result's headline figures, in a cluster experiment's compact entry."""
    throughput_per_second: float = optional()
    latency_p99_seconds: float = optional()
    results_in: str = optional()
    """The ConfigMap holding the full entry (Result, each Pod's, Prometheus'), in a cluster
    experiment (cxlab.experiments.results_store); the local backend keeps it inline."""
    result: dict[str, Any] = optional()
    """The runner's Result (cxlab_contract/result-v1.schema.json); a trial of several Pods:
    their merged Result (cxlab.experiments.merge)."""
    pod_results: list[dict[str, Any]] = optional()
    """Each Pod's own Result, in Pod order, for a trial of several Pods."""


class QueuePlace(Shape):
    """Where an experiment waiting for capacity stands (cxlab.experiments.queue)."""

    position: int = optional()
    """1 = next to be admitted."""
    length: int = optional()
    """Experiments waiting, this one included."""
    behind: str = optional()
    """namespace/name of the experiment ahead that does not fit yet, if any."""
    since: datetime = optional()
    message: str = optional()


class ExperimentStatus(Shape):
    """Written by the operator: progress as trials end, the summary at the end."""

    phase: Phase = optional()
    observed_generation: int = optional()
    start_time: datetime = optional()
    completion_time: datetime = optional()
    best: str = optional()
    """The first recommendation, short."""
    progress: Progress = optional()
    conditions: list[Condition] = optional(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )
    attempts: dict[str, int] = optional()
    """Pods started per unfinished trial (retries after loss)."""
    started_spec: str = optional()
    """The spec the run started with, as JSON: it ends with that spec."""
    trials: list[TrialEntry] = optional()
    summary: dict[str, Any] = optional()
    queue: QueuePlace = optional()
    """While it waits for capacity (phase Pending, condition Queued)."""
    queued_seconds: float = optional()
    """How long it waited for capacity before its first trial started."""
    capacity_plan: CapacityPlan = optional()
    """Pods and cores for spec.capacity.target, from the measured points (once finished)."""


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
    if trial.pods > 1:
        entry["pods"] = trial.pods
    if outcome.error:
        entry["message"] = outcome.error
    if outcome.result is not None:
        entry["pinned"] = outcome.unpinned is None
        if outcome.unpinned:
            entry["message"] = f"not pinned: {outcome.unpinned}"
        entry["result"] = outcome.result
    if outcome.pod_results:
        entry["podResults"] = outcome.pod_results
    return entry


def has_result(entry: Mapping[str, Any]) -> bool:
    """Whether a trial entry had a Result, full or compact (a cluster experiment's status keeps
    the Result elsewhere): `pinned` is set exactly when there was one."""
    return "result" in entry or "pinned" in entry


def condition_of(conditions: Iterable[Mapping[str, Any]], type_: str) -> dict[str, Any]:
    """The condition of that type, or {} when there is none."""
    return dict(next((c for c in conditions if c.get("type") == type_), {}))


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """The conditions with one set; its transition time moves only when its status does."""
    value = "Unknown" if status is None else str(status)
    previous = condition_of(conditions, type_)
    since: str | None
    if not previous or previous.get("status") != value:
        since = timestamp(now)
    else:
        since = previous.get("lastTransitionTime")
    condition = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
    return [c for c in conditions if c.get("type") != type_] + [condition]


def timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def spec_json(spec: Any) -> str:
    """The spec as status.startedSpec keeps it: compact, keys sorted."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Live:
    """What a backend knows of the trials that have not ended. None of it is needed to resume
    after a restart, except attempts (Pods started per unfinished trial)."""

    running: list[dict[str, Any]] = field(default_factory=list)  # progress.running
    attempts: dict[str, int] = field(default_factory=dict)
    starting: bool = False  # trials are being started: Running before any has ended
    failure: str | None = None  # the experiment cannot go on (no node could hold a trial)
    failure_reason: str | None = None  # its Failed condition's reason (else Unschedulable)
    waiting_for_target: bool = False
    # Waiting for capacity: its place in the queue (a QueuePlace as written), no Pods yet.
    queue: dict[str, Any] | None = None
    queued_seconds: float | None = None  # set once, when it is admitted


def queue_place(
    position: int | None, length: int | None, behind: str | None, since: datetime, message: str
) -> dict[str, Any]:
    """status.queue; position and length None when Kueue keeps the queue."""
    return shaped(
        QueuePlace, position=position, length=length, behind=behind, since=since,
        message=message,
    )  # fmt: skip


def running_entry(
    trial: str, pod: str, tasks: int, tasks_done: int | None, elapsed_seconds: float | None
) -> dict[str, Any]:
    """progress.running's entry for a trial whose Pod runs."""
    elapsed = None if elapsed_seconds is None else round(elapsed_seconds, 1)
    return shaped(
        RunningTrial, trial=trial, pod=pod, tasks=tasks, tasks_done=tasks_done,
        elapsed_seconds=elapsed,
    )  # fmt: skip


def prometheus_usage(
    window_seconds: int | None,
    found: dict[str, float | int],
    missing: list[str],
    error: str | None = None,
) -> dict[str, Any]:
    """A trial entry's `prometheus`: what Prometheus had (cAdvisor), and what it had not."""
    return shaped(
        PrometheusUsage, window_seconds=window_seconds,
        cpu_throttled_ratio=found.get("cpuThrottledRatio"),
        memory_working_set_bytes=found.get("memoryWorkingSetBytes"),
        missing=missing or None, error=error,
    )  # fmt: skip


def outcome_of(trial: Trial, entry: dict[str, Any]) -> TrialOutcome:
    """A recorded trial entry back as the summary's input."""
    failed = entry["phase"] == "Failed"
    unpinned = (entry.get("message") or "not pinned") if entry.get("pinned") is False else None
    return TrialOutcome(
        trial,
        entry.get("result"),
        entry.get("message") if failed else None,
        unpinned,
        entry.get("podResults"),
    )


def outcomes_of(
    trials: Iterable[Trial], entries: Iterable[Mapping[str, Any]]
) -> list[TrialOutcome]:
    """The recorded entries of the planned trials back as the summary's input (entries of
    trials the plan no longer has are left out)."""
    planned = {t.name: t for t in trials}
    return [outcome_of(planned[e["name"]], dict(e)) for e in entries if e["name"] in planned]


def _pinned(spec: ExperimentSpec, entries: list[dict[str, Any]]) -> tuple[bool | None, str]:
    results = [e for e in entries if has_result(e)]
    if not results:
        return None, "no trial has finished yet"
    cpu = spec.resources.cpu
    if spec.resources.whole_cpus is None:
        return False, (
            f"resources.cpu {cpu} is a fraction of a CPU: every trial ran in a shared CPU "
            f"pool, unpinned, counted all the same (pinning: preferred)"
        )
    shared = [e["name"] for e in results if e.get("pinned") is False]
    if shared:
        counted = "counted all the same (pinning: preferred)"
        if spec.pinning == "required":
            counted = "left out of the knees and recommendations (pinning: required)"
        return False, (
            f"{len(shared)} of {len(results)} trials did not run on {cpu} exclusive CPU(s) "
            f"of their own (no static CPU manager?), {counted}: {', '.join(shared[:5])}"
        )
    return True, f"every trial ran on {cpu} exclusive CPU(s)"


def build_status(
    *,
    spec: ExperimentSpec,
    trials: list[Trial],
    entries: list[dict[str, Any]],
    live: Live,
    old: dict[str, Any] | None,
    started_spec: str,
    generation: int,
    now: datetime,
    spec_changed: bool = False,
) -> dict[str, Any]:
    """The whole status, the same for both backends: phase, times, progress, every ended
    trial's entry, conditions, and the summary and best once every trial has ended. `old`
    is the status written before (its start time and conditions carry over)."""
    old = old or {}
    failed = sum(e["phase"] == "Failed" for e in entries)
    done = len(entries) == len(trials)
    if done:
        phase = Phase.FAILED if failed else Phase.SUCCEEDED
    else:
        phase = Phase.RUNNING if entries or live.running or live.starting else Phase.PENDING
    queued = live.queue is not None and not done
    if queued and not entries:  # its Pods may exist (gated by Kueue): none has started
        phase = Phase.PENDING
    status: dict[str, Any] = {
        "phase": phase.value,
        "observedGeneration": generation,
        "startedSpec": old.get("startedSpec") or started_spec,
        "progress": {
            "trialsTotal": len(trials),
            "trialsDone": len(entries),
            "trialsFailed": failed,
            "display": f"{len(entries)}/{len(trials)}",
            "running": live.running,
        },
        "trials": entries,
        "attempts": live.attempts,
    }
    if queued:  # no trial has started: no start time yet, as for a suspended Job
        assert live.queue is not None
        status["queue"] = live.queue
        where = live.queue.get("position")
        shown = f"queued {where}/{live.queue['length']}" if where else "queued (Kueue)"
        status["progress"]["display"] = shown
    else:
        status["startTime"] = old.get("startTime") or timestamp(now)
    waited = old.get("queuedSeconds", live.queued_seconds)
    if waited is not None:
        status["queuedSeconds"] = round(waited, 1)
    conditions = list(old.get("conditions") or [])

    def condition(type_: str, value: bool | None, reason: str, message: str) -> None:
        nonlocal conditions
        conditions = set_condition(
            conditions, type_, value, reason, message, generation=generation, now=now
        )

    if done:
        outcomes = outcomes_of(trials, entries)
        summary = summarize(outcomes, spec.tolerance, spec.pinning)
        status["summary"] = summary
        plan = capacity_plan(spec, outcomes)
        if plan:
            status["capacityPlan"] = plan
        status["completionTime"] = old.get("completionTime") or timestamp(now)
        if summary["recommendations"]:  # saying so when it is noisy or tied
            status["best"] = best_line(summary["recommendations"][0])
        condition("Progressing", False, "Finished", f"all {len(trials)} trials ended")
        succeeded = f"{len(trials) - failed} of {len(trials)} trials succeeded"
        if failed:
            failures = [
                e["name"] + ": " + e.get("message", "") for e in entries if e["phase"] == "Failed"
            ]
            message = live.failure or f"{failed} trial(s) failed: " + "; ".join(failures)
            reason = (live.failure_reason or "Unschedulable") if live.failure else "TrialsFailed"
            condition("Complete", False, "TrialsFailed", succeeded)
            condition("Failed", True, reason, message[:1000])
        else:
            condition("Complete", True, "AllTrialsSucceeded", succeeded)
            condition("Failed", False, "NoFailures", "no trial failed")
        status["attempts"] = {}
        status["progress"]["running"] = []
    else:
        waiting = " (waiting for the delay target)" if live.waiting_for_target else ""
        progressing = f"{len(entries)} of {len(trials)} trials done{waiting}"
        condition("Progressing", True, "TrialsRunning", progressing)
    if queued:
        assert live.queue is not None
        reason = "WaitingBehind" if live.queue.get("behind") else "WaitingForCapacity"
        if live.queue.get("position") is None:
            reason = "WaitingForKueue"
        condition("Queued", True, reason, live.queue["message"])
    elif any(c.get("type") == "Queued" and c.get("status") == "True" for c in conditions):
        admitted = f"waited {waited:.1f} s for capacity" if waited is not None else "admitted"
        condition("Queued", False, "Admitted", admitted)
    pinned, why = _pinned(spec, entries)
    pinned_reason = {True: "ExclusiveCPUs", False: "SharedCPUs", None: "NoResults"}[pinned]
    condition("Pinned", pinned, pinned_reason, why)
    missed = [e["name"] for e in entries if has_result(e) and not e.get("metricsScraped")]
    condition(
        "MetricsCollected",
        not missed if entries else None,
        "Scraped" if not missed else "NotScraped",
        "every trial's /metrics was read while it ran"
        if not missed
        else f"{len(missed)} trial(s) ended before a scrape: {', '.join(missed[:5])}",
    )
    if spec_changed:
        condition(
            "SpecChanged",
            True,
            "SpecIsImmutableWhileRunning",
            "the spec changed after the experiment started; it goes on with the spec it "
            "started with (status.startedSpec): create a new experiment to run the new one",
        )
    status["conditions"] = conditions
    return checked(status)


def rejected_status(
    old: dict[str, Any], message: str, *, generation: int, now: datetime
) -> dict[str, Any]:
    """A spec that cannot run: Failed at once, with an InvalidSpec condition saying why."""
    conditions = set_condition(
        list(old.get("conditions") or []), "Failed", True, "InvalidSpec",
        f"the spec cannot run: {message}", generation=generation, now=now,
    )  # fmt: skip
    status = old | {
        "phase": Phase.FAILED.value,
        "observedGeneration": generation,
        "completionTime": timestamp(now),
        "conditions": conditions,
    }
    return checked(status)
