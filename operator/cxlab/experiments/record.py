"""What a pass records: the whole status after the trials that have ended, the same for both
backends (pure). Phase, times, progress, every ended trial's entry, the conditions, and once
every trial has ended the summary, the capacity plan and the best line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cxlab.analysis.knees import LatencyObjective
from cxlab.analysis.objectives import judge_objectives, summed_up
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.planning import capacity_plan
from cxlab.analysis.rate_search import rate_searches
from cxlab.analysis.recommend import best_line
from cxlab.analysis.service_plan import service_plan
from cxlab.analysis.summary import summarize
from cxlab.conditions import Condition, condition_of, is_true, set_condition
from cxlab.experiments.environment import environment_of
from cxlab.experiments.plan import Trial
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import (
    SKIPPED,
    ExperimentStatus,
    Phase,
    Progress,
    QueuePlace,
    RunningTrial,
    ServiceCopyRequest,
    TrialEntry,
    TrialPhase,
)
from cxlab.times import whole_seconds
from cxlab_contract.durations import parse_duration

# A condition's message: metav1.Condition allows 32 KiB; a screenful is what anyone reads.
MAX_MESSAGE = 2000


def trial_entry(outcome: TrialOutcome) -> TrialEntry:
    """A finished trial's entry, as both backends record it."""
    trial, result = outcome.trial, outcome.result
    message = outcome.error or outcome.skipped
    if result is not None and outcome.unpinned:
        # a Result that failed (too many failed requests) says why first
        message = "; ".join(filter(None, [outcome.error, f"not pinned: {outcome.unpinned}"]))
    return TrialEntry(
        name=trial.name, model=trial.model, variant=trial.variant, workers=trial.workers,
        gomaxprocs=trial.gomaxprocs, rtt_seconds=trial.rtt_seconds,
        rate_per_second=trial.rate_per_second, repetition=trial.repetition,
        phase=_phase(outcome),
        pods=trial.pods if trial.pods > 1 else None, message=message,
        pinned=None if result is None else outcome.unpinned is None,
        result=result, pod_results=outcome.pod_results or None, service=outcome.service,
    )  # fmt: skip


def _phase(outcome: TrialOutcome) -> TrialPhase:
    if outcome.skipped:
        return SKIPPED
    return Phase.SUCCEEDED if outcome.succeeded else Phase.FAILED


def latency_objective(spec: ExperimentSpec) -> LatencyObjective | None:
    """The latency an arrival run's rates must keep: the capacity target's, if any."""
    if spec.capacity is None:
        return None
    latency = spec.capacity.target.latency
    return LatencyObjective(latency.percentile, parse_duration(latency.max))


def outcome_of(trial: Trial, entry: TrialEntry) -> TrialOutcome:
    """A recorded trial entry back as the summary's input."""
    unpinned = (entry.message or "not pinned") if entry.pinned is False else None
    error = entry.message if entry.failed else None
    skipped = (entry.message or "skipped") if entry.skipped else None
    return TrialOutcome(
        trial, entry.result, error, unpinned, entry.pod_results, skipped, entry.service
    )


def outcomes_of(trials: Iterable[Trial], entries: Iterable[TrialEntry]) -> list[TrialOutcome]:
    """The recorded entries of the planned trials back as the summary's input (entries of
    trials the plan no longer has are left out)."""
    planned = {t.name: t for t in trials}
    return [outcome_of(planned[e.name], e) for e in entries if e.name in planned]


@dataclass(frozen=True)
class Live:
    """What a backend knows of the trials that have not ended. None of it is needed to resume
    after a restart, except attempts (Pods started per unfinished trial)."""

    running: list[RunningTrial] = field(default_factory=list)  # progress.running
    attempts: dict[str, int] = field(default_factory=dict)
    starting: bool = False  # trials are being started: Running before any has ended
    failure: str | None = None  # the experiment cannot go on (no node could hold a trial)
    failure_reason: str | None = None  # its Failed condition's reason (else Unschedulable)
    waiting_for_target: bool = False
    queue: QueuePlace | None = None  # waiting for capacity: its place in the queue, no Pods
    queued_seconds: float | None = None  # set once, when it is admitted


@dataclass(frozen=True)
class Recording:
    """One build of the status: what it is built from."""

    spec: ExperimentSpec
    trials: Sequence[Trial]
    entries: Sequence[TrialEntry]
    live: Live
    generation: int
    now: datetime
    unverified: str | None = None  # why a verification asked for does not run
    host: str | None = None  # the local backend's machine (trials there have no node)

    @property
    def failed(self) -> int:
        """Failed trials of the sweep: a probe or a verification that failed did not hold,
        it does not fail the experiment."""
        follows = {t.name for t in self.trials if t.follows}
        return sum(e.failed for e in self.entries if e.name not in follows)

    @property
    def skipped(self) -> int:
        """Trials not run because an objective broke (abortOnFail)."""
        return sum(e.skipped for e in self.entries)

    @property
    def done(self) -> bool:
        return len(self.entries) == len(self.trials)

    @property
    def queued(self) -> bool:
        return self.live.queue is not None and not self.done

    def phase(self) -> Phase:
        if self.done:
            return Phase.FAILED if self.failed else Phase.SUCCEEDED
        if self.queued and not self.entries:  # its Pods may exist (gated by Kueue): none ran
            return Phase.PENDING
        live = self.live
        return Phase.RUNNING if self.entries or live.running or live.starting else Phase.PENDING

    def set(
        self, conditions: list[Condition], type_: str, value: bool | None, reason: str,
        message: str,
    ) -> list[Condition]:  # fmt: skip
        return set_condition(
            conditions, type_, value, reason, message, generation=self.generation, now=self.now
        )


def build_status(
    *,
    spec: ExperimentSpec,
    trials: Sequence[Trial],
    entries: Sequence[TrialEntry],
    live: Live,
    old: ExperimentStatus | None,
    started_spec: str,
    generation: int,
    now: datetime,
    spec_changed: bool = False,
    unverified: str | None = None,
    host: str | None = None,
) -> ExperimentStatus:
    """The whole status, the same for both backends. `old` is the status written before (its
    start time, queue wait and conditions carry over); `entries` every ended trial's."""
    old = old or ExperimentStatus()
    made = Recording(spec, trials, entries, live, generation, now, unverified, host)
    status = ExperimentStatus(
        phase=made.phase(), observed_generation=generation,
        started_spec=old.started_spec or started_spec, progress=_progress(made),
        trials=list(entries), attempts=dict(live.attempts),
    )  # fmt: skip
    if made.queued:  # no trial has started: no start time yet, as for a suspended Job
        status.queue = live.queue
    else:
        status.start_time = old.start_time or whole_seconds(now)
    waited = old.queued_seconds if old.queued_seconds is not None else live.queued_seconds
    if waited is not None:
        status.queued_seconds = round(waited, 1)
    conditions = list(old.conditions or [])
    if made.done:
        conditions = _finish(status, old, made, conditions)
    else:
        waiting = " (waiting for the delay target)" if live.waiting_for_target else ""
        progressing = f"{len(entries)} of {len(trials)} trials done{waiting}"
        conditions = made.set(conditions, "Progressing", True, "TrialsRunning", progressing)
    conditions = _queue_conditions(made, conditions, waited)
    conditions = _measurement_conditions(made, conditions)
    if spec_changed:
        conditions = made.set(
            conditions, "SpecChanged", True, "SpecIsImmutableWhileRunning",
            "the spec changed after the experiment started; it goes on with the spec it "
            "started with (status.startedSpec): create a new experiment to run the new one",
        )  # fmt: skip
    status.conditions = conditions
    return status


def _copy_facts(
    old: ExperimentStatus, made: Recording, outcomes: Sequence[TrialOutcome]
) -> tuple[float | None, str | None, str | None]:
    """What the service's plan needs of the Deployment: the CPU one replica requests, its
    name and its container's."""
    service = made.spec.service
    if service is None:
        return None, None, None
    copy = old.service_copy
    container = copy.container if copy is not None else service.container
    return copy_cores(made.spec, copy, outcomes), service.deployment, container


def copy_cores(
    spec: ExperimentSpec, copy: ServiceCopyRequest | None, outcomes: Sequence[TrialOutcome]
) -> float | None:
    """The CPU one replica of the service requests, for the variants that do not set
    theirs: on a cluster the copy's request the queue read from the Deployment (`copy`:
    status.serviceCopy; none when a variant sizes its own); locally the cores cxlab run
    pinned the process to."""
    if spec.service is None:
        return None
    if copy is not None:
        sized = any(v.cpu is not None for v in spec.service.variant_list())
        return None if sized or copy.cpu <= 0 else copy.cpu
    return next((o.service.cores for o in outcomes if o.service and o.service.cores), None)


def _progress(made: Recording) -> Progress:
    done, total = len(made.entries), len(made.trials)
    display = f"{done}/{total}"
    queue = made.live.queue
    if made.queued and queue is not None:
        display = f"queued {queue.position}/{queue.length}" if queue.position else "queued (Kueue)"
    return Progress(
        trials_total=total, trials_done=done, trials_failed=made.failed,
        trials_skipped=made.skipped or None, display=display,
        running=list(made.live.running),
    )  # fmt: skip


def _finish(
    status: ExperimentStatus, old: ExperimentStatus, made: Recording, conditions: list[Condition]
) -> list[Condition]:
    """Every trial has ended: the summary, the plan, the completion time and the verdict."""
    outcomes = outcomes_of(made.trials, made.entries)
    sweep = [o for o in outcomes if not o.trial.follows]  # probes and checks are the plan's
    summary = summarize(sweep, made.spec.tolerance, made.spec.pinning, latency_objective(made.spec))
    status.summary = summary
    status.capacity_plan = capacity_plan(made.spec, outcomes, made.unverified)
    status.rate_search = rate_searches(made.spec, outcomes) or None
    status.service_plan = service_plan(
        made.spec, outcomes, *_copy_facts(old, made, outcomes), unverified=made.unverified
    )
    status.environment = environment_of(made.trials, made.entries, made.host)
    status.objectives = judge_objectives(made.spec, outcomes, summary) or None
    met, why, verdict = summed_up(status.objectives or [])
    conditions = made.set(conditions, "ObjectivesMet", met, why, verdict[:MAX_MESSAGE])
    status.completion_time = old.completion_time or whole_seconds(made.now)
    if summary.recommendations:  # saying so when it is noisy or tied
        status.best = best_line(summary.recommendations[0])
    total, failed = len(made.trials), made.failed
    conditions = made.set(conditions, "Progressing", False, "Finished", f"all {total} trials ended")
    succeeded = f"{total - failed - made.skipped} of {total} trials succeeded"
    if made.skipped:
        succeeded += f", {made.skipped} skipped (an objective broke: abortOnFail)"
    if failed:
        live = made.live
        follows = {t.name for t in made.trials if t.follows}
        failures = [
            f"{e.name}: {e.message or ''}"
            for e in made.entries
            if e.failed and e.name not in follows
        ]
        message = live.failure or f"{failed} trial(s) failed: " + "; ".join(failures)
        reason = (live.failure_reason or "Unschedulable") if live.failure else "TrialsFailed"
        conditions = made.set(conditions, "Complete", False, "TrialsFailed", succeeded)
        conditions = made.set(conditions, "Failed", True, reason, message[:1000])
    else:
        conditions = made.set(conditions, "Complete", True, "AllTrialsSucceeded", succeeded)
        conditions = made.set(conditions, "Failed", False, "NoFailures", "no trial failed")
    status.attempts = {}
    assert status.progress is not None
    status.progress.running = []
    return conditions


def _queue_conditions(
    made: Recording, conditions: list[Condition], waited: float | None
) -> list[Condition]:
    queue = made.live.queue
    if made.queued and queue is not None:
        reason = (
            "WaitingForService" if queue.service
            else "WaitingBehind" if queue.behind
            else "WaitingForCapacity"
        )  # fmt: skip
        if queue.position is None:
            reason = "WaitingForKueue"
        return made.set(conditions, "Queued", True, reason, queue.message or "")
    if is_true(conditions, "Queued"):  # admitted after a wait: how long, and what held it
        held = condition_of(conditions, "Queued")
        admitted = f"waited {waited:.1f} s" if waited is not None else "admitted"
        if held is not None and held.message:
            admitted += f"; it was {held.message}"
        return made.set(conditions, "Queued", False, "Admitted", admitted)
    return conditions


def _measurement_conditions(made: Recording, conditions: list[Condition]) -> list[Condition]:
    """Pinned: whether the trials ran on cores of their own; MetricsCollected: whether every
    trial's runners were read once their tasks had ended (or, a long trial, while it ran)."""
    pinned, why = _pinned(made.spec, made.entries)
    pinned_reason = {True: "ExclusiveCPUs", False: "SharedCPUs", None: "NoResults"}[pinned]
    conditions = made.set(conditions, "Pinned", pinned, pinned_reason, why)
    missed = [e.name for e in made.entries if e.has_result and not e.metrics_scraped]
    return made.set(
        conditions, "MetricsCollected", not missed if made.entries else None,
        "Scraped" if not missed else "NotScraped",
        "every trial's /metrics was read"
        if not missed
        else f"{len(missed)} trial(s) ended without a read of their /metrics (is the runners' "
        f"metrics port reachable from the operator?): {', '.join(missed[:5])}",
    )  # fmt: skip


def _pinned(spec: ExperimentSpec, entries: Sequence[TrialEntry]) -> tuple[bool | None, str]:
    results = [e for e in entries if e.has_result]
    if not results:
        return None, "no trial has finished yet"
    cpu = spec.resources.cpu
    if spec.resources.whole_cpus is None:
        return False, (
            f"resources.cpu {cpu} is a fraction of a CPU: every trial ran in a shared CPU "
            f"pool, unpinned, counted all the same (pinning: preferred)"
        )
    shared = [e.name for e in results if e.pinned is False]
    if shared:
        counted = "counted all the same (pinning: preferred)"
        if spec.pinning == "required":
            counted = "left out of the knees and recommendations (pinning: required)"
        return False, (
            f"{len(shared)} of {len(results)} trials did not run on {cpu} exclusive CPU(s) "
            f"of their own (no static CPU manager?), {counted}: {', '.join(shared[:5])}"
        )
    return True, f"every trial ran on {cpu} exclusive CPU(s)"


def rejected_status(
    old: ExperimentStatus, message: str, *, generation: int, now: datetime
) -> ExperimentStatus:
    """A spec that cannot run: Failed at once, with an InvalidSpec condition saying why."""
    conditions = set_condition(
        old.conditions, "Failed", True, "InvalidSpec", f"the spec cannot run: {message}",
        generation=generation, now=now,
    )  # fmt: skip
    return old.model_copy(
        update={
            "phase": Phase.FAILED,
            "observed_generation": generation,
            "completion_time": whole_seconds(now),
            "conditions": conditions,
        }
    )
