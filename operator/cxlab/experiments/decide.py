"""One level-based decision: from the trials already in status and the Pods that exist now,
what to record, what to start, what to delete (pure; cxlab.controller.experiment_pass carries
it out). Each trial is decided on its own (`_decide_trial`), then the experiment as a whole
(a Pod the apiserver refused, an image no node can start, a trial no node can place, the
slots left to start trials in), then what follows it (`follow`: the trials once this decision
is recorded, planned from the outcomes once every trial has ended).

Rules that make a restart safe: a trial is recorded from its Pod before the Pod is deleted;
an attempt is counted in status before its Pod is created, and Pod names carry the attempt,
so a trial never runs twice unless its Pod was really lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cxlab.analysis.outcome import (
    ResultError,
    TrialOutcome,
    classify,
    failure_bound,
    parse_result,
)
from cxlab.config import OperatorConfig
from cxlab.experiments.diagnose import (
    POD_REJECTED,
    UNSCHEDULABLE,
    busy,
    not_starting,
    refused_failure,
    unschedulable_failure,
    why_failed,
)
from cxlab.experiments.followups import Fits, Planned, after
from cxlab.experiments.hosts import hosts_of, plan_hosts, unlisted
from cxlab.experiments.plan import LOCUST_MASTER_PORT, Trial, locust_master, pod_indexes
from cxlab.experiments.pod_view import HOLDING, PodPhase, PodView
from cxlab.experiments.pods import COMPONENT_TARGET, COMPONENT_TRIAL
from cxlab.experiments.record import trial_entry
from cxlab.experiments.refusal import Refusal as Refusal
from cxlab.experiments.service_run import ServiceGate
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ServiceCopyRequest, TrialEntry
from cxlab_contract.durations import parse_duration


@dataclass(frozen=True)
class Observed:
    """What a pass decides from: the spec it runs with, its trials, what status recorded,
    and the Pods as they are now."""

    spec: ExperimentSpec
    trials: Sequence[Trial]
    recorded: dict[str, TrialEntry]  # ended trials, by name
    attempts: dict[str, int]  # Pods started per unfinished trial, as status counts them
    pods: Sequence[PodView]
    now: datetime
    target_ready: bool = True  # the delay target of an http experiment answers
    capacity_exists: bool = True  # some node could hold a trial if it were empty
    skipped: Mapping[str, str] = field(default_factory=dict)  # abortOnFail's: trial -> why
    # One-Pod trials that fit on the nodes now, and once this experiment's Pods on their way
    # out (recorded, deleting) have gone; None when none of its Pods is on its way out.
    room: tuple[int, int] | None = None
    unverified: str | None = None  # why a verification asked for does not run, as recorded
    # The recorded entries with their Results (a cluster keeps them in ConfigMaps), when the
    # pass read them: what follows the sweep and the summary are made from them. None: the
    # status's compact entries only (`follow` asks for them: Decision.needs_full).
    full: Mapping[str, TrialEntry] | None = None
    fits: Fits | None = None  # why the Nodes read with `full` cannot hold a verification
    service_copy: ServiceCopyRequest | None = None  # status.serviceCopy: the service's plan's
    refused: Refusal | None = None  # a Pod the last pass's act step could not create
    service: ServiceGate | None = None  # spec.service: the variant whose copy runs (service_run)

    def image(self, config: OperatorConfig) -> str:
        return self.spec.image or config.runner_image


@dataclass
class Decision:
    finished: list[TrialEntry] = field(default_factory=list)  # new status.trials entries
    create: list[tuple[Trial, int, int]] = field(default_factory=list)  # (trial, attempt, Pod)
    delete: list[str] = field(default_factory=list)  # Pod names
    attempts: dict[str, int] = field(default_factory=dict)  # for trials not finished
    running: list[tuple[Trial, PodView]] = field(default_factory=list)  # one per live Pod
    # Trials of several Pods whose Pods all wait at the start barrier: release them now.
    release: list[tuple[Trial, list[PodView]]] = field(default_factory=list)
    # A distributed Locust trial's master, once it has an address: its workers' to reach.
    locust_masters: dict[str, str] = field(default_factory=dict)
    failure: str | None = None  # the whole experiment cannot go on
    failure_reason: str | None = None  # why, as a condition reason (Unschedulable, ...)
    waiting_for_target: bool = False
    # isolation: process: the trial hosts to create (indexes), and which host runs each
    # trial this decision starts (trial name → host Pod name).
    hosts_create: list[int] = field(default_factory=list)
    hosted: dict[str, str] = field(default_factory=dict)
    planned: Planned | None = None  # what follows this decision (`follow`)
    # What follows needs the full entries (Observed.full): the pass reads them, decides again
    needs_full: bool = False
    _ended: set[str] = field(default_factory=set, repr=False)  # names in finished

    def record(self, outcome: TrialOutcome, pods: Sequence[PodView]) -> None:
        self.finished.append(_entry(outcome, pods))
        self._ended.add(outcome.trial.name)

    def fail(self, trial: Trial, why: str, pods: Sequence[PodView]) -> None:
        """The one way a trial leaves as failed: its entry (with `pods`' attempt and nodes),
        and nothing more of it runs, starts or is released; its live Pods go."""
        if trial.name in self._ended:
            return
        self.record(TrialOutcome(trial, None, why), pods)
        self.attempts.pop(trial.name, None)
        mine = [p for t, p in self.running if t.name == trial.name]
        self.delete += [p.name for p in mine if p.name not in self.delete]
        self.running = [(t, p) for t, p in self.running if t.name != trial.name]
        self.release = [(t, p) for t, p in self.release if t.name != trial.name]
        self.create = [c for c in self.create if c[0].name != trial.name]

    def fail_all(self, observed: Observed, failure: str, reason: str) -> Decision:
        """The experiment cannot go on: every trial not yet recorded fails with the reason."""
        self.failure, self.failure_reason = failure, reason
        running: dict[str, list[PodView]] = {}
        for trial, pod in self.running:
            running.setdefault(trial.name, []).append(pod)
        for trial in observed.trials:
            if trial.name not in observed.recorded:
                self.fail(trial, failure, running.get(trial.name, []))
        return self


def _entry(outcome: TrialOutcome, pods: Sequence[PodView]) -> TrialEntry:
    entry = trial_entry(outcome)
    if pods:
        entry.attempts = pods[0].attempt
        entry.node = pods[0].node or None
        if outcome.trial.calibrate:  # part of the environment's fingerprint
            entry.image = pods[0].image_id
        if len(pods) > 1:
            entry.nodes = [p.node or "" for p in pods]
    return entry


def _whose(trial: Trial, pod: PodView) -> str:
    return f"Pod {pod.pod}: " if trial.pods > 1 else ""


def _lost(pod: PodView) -> bool:
    """Gone through no fault of the trial: evicted, node lost, or deleted by someone before
    it succeeded (the operator deletes Pods only after recording their trial)."""
    return pod.lost or (pod.deleting and pod.phase != PodPhase.SUCCEEDED)


@dataclass
class _Stuck:
    """A Pod that will not start (its container) or cannot be placed (the scheduler)."""

    trial: Trial | None  # None: the delay target
    pod: PodView
    reason: str = ""
    message: str = ""


@dataclass
class _Pass:
    """What deciding the trials one by one gathers for the decision on the whole."""

    decision: Decision = field(default_factory=Decision)
    pending: list[tuple[Trial, list[int]]] = field(default_factory=list)  # Pods to create
    stuck: list[_Stuck] = field(default_factory=list)  # containers that will not start
    unplaced: list[tuple[str, PodView]] = field(default_factory=list)  # (whose, Pod)
    terminating: int = 0  # lost Pods still shutting down: they hold their cores a while
    # isolation: process: a host's trials not read yet, so a trial not seen may run there
    hosts_unlisted: bool = False


def decide(observed: Observed, config: OperatorConfig) -> Decision:
    """A trial of several Pods is one attempt of all of them: it succeeds when every one has,
    fails when one fails, and a lost one (deleted, evicted) loses the whole attempt, whose
    Pods all go before the next attempt starts them again together."""
    by_trial: dict[str, list[PodView]] = {}
    for pod in observed.pods:
        if pod.component == COMPONENT_TRIAL:
            by_trial.setdefault(pod.trial or "", []).append(pod)
    gathered = _Pass(hosts_unlisted=unlisted(observed.pods))
    for trial in observed.trials:
        mine = sorted(by_trial.get(trial.name, []), key=lambda p: (p.attempt, p.pod))
        why = observed.service.failed.get(trial.service_variant) if observed.service else None
        if why is not None and trial.name not in observed.recorded:  # its copy never got Ready
            gathered.decision.fail(trial, why, mine)
            continue
        _decide_trial(trial, mine, observed, config, gathered)
    decision = _decide_experiment(observed, config, gathered)
    if observed.service is not None:  # before the summary: it keeps the service's figures
        observed.service.attach(decision.finished)
    return follow(observed, decision)


def follow(observed: Observed, decision: Decision) -> Decision:
    """The decision with what follows it (followups.after), planned once and handed on: the
    record step writes it, the next pass starts from it. Needing the full entries the pass
    has not read, it asks for them (Decision.needs_full) instead of planning from less."""
    decision.planned = after(
        observed.spec, observed.trials, observed.recorded, decision.finished,
        full=observed.full, fits=observed.fits, unverified=observed.unverified,
        copy=observed.service_copy,
    )  # fmt: skip
    decision.needs_full = decision.planned is None
    return decision


def _decide_trial(
    trial: Trial,
    mine: list[PodView],
    observed: Observed,
    config: OperatorConfig,
    gathered: _Pass,
) -> None:
    decision, spec = gathered.decision, observed.spec
    recorded = observed.recorded.get(trial.name)
    if recorded is not None:
        keep = spec.keep_pods_on_failure and recorded.failed
        decision.delete += [p.name for p in mine if not p.deleting and not keep]
        return
    why_skipped = observed.skipped.get(trial.name)
    if why_skipped is not None and not mine and not observed.attempts.get(trial.name):
        # Not started, and an objective says it can only do worse: recorded as skipped.
        decision.record(TrialOutcome(trial, None, skipped=why_skipped), [])
        return
    latest = max((p.attempt for p in mine), default=0)
    current = [p for p in mine if p.attempt == latest]
    succeeded = [p for p in current if p.phase == PodPhase.SUCCEEDED]
    failed = [p for p in current if p.phase == PodPhase.FAILED and not _lost(p)]
    lost = [p for p in mine if _lost(p)]
    lost_now = [p for p in current if _lost(p)]
    # Pods of an earlier attempt, and every Pod of an attempt one of them lost, go.
    doomed = [p for p in mine if p.attempt != latest] + (current if lost_now and not failed else [])
    decision.delete += [p.name for p in doomed if not p.deleting]
    # A trial recorded in this pass loses its Pods in this pass too, once the status that
    # records it is written (the reconciler's order): they free their cores at once.
    if len(succeeded) == len(pod_indexes(trial)):
        decision.record(_from_succeeded(trial, succeeded, spec), succeeded)
        decision.delete += [p.name for p in current if not p.deleting]
    elif failed:
        why = f"{_whose(trial, failed[0])}{why_failed(failed[0], spec)}"
        decision.record(TrialOutcome(trial, None, why), failed)
        kept = failed if spec.keep_pods_on_failure else []
        decision.delete += [p.name for p in current if not p.deleting and p not in kept]
    elif current and not lost_now:
        _running(trial, current, latest, observed, config, gathered)
    elif any(p.deleting and p.phase in HOLDING for p in lost + doomed) or (
        not mine and gathered.hosts_unlisted and observed.attempts.get(trial.name)
    ):
        # Retry once the lost Pods are gone, so two attempts never share the node's cores;
        # or once every trial host has been read: its attempt may be running on one.
        gathered.terminating += 1
        decision.attempts[trial.name] = observed.attempts.get(trial.name, 0)
    else:
        _start_again(trial, lost, observed, config, gathered)
    # Lost Pods of an unfinished trial go; the trial starts again.
    decision.delete += [p.name for p in lost if not p.deleting and p.name not in decision.delete]


def _from_succeeded(trial: Trial, pods: list[PodView], spec: ExperimentSpec) -> TrialOutcome:
    """Every Pod of the attempt succeeded (in Pod order): their Results, merged if several."""
    results = []
    for pod in pods:
        try:
            results.append(parse_result(pod.termination_message or ""))
        except ResultError as error:
            why = f"{_whose(trial, pod)}no valid Result in the termination message: {error}"
            return TrialOutcome(trial, None, why)
    # the kubelet chose the cores: only how many can be checked; a fraction is never pinned
    return classify(
        trial, results, spec.resources.whole_cpus, max_failure_ratio=failure_bound(spec)
    )


def _running(
    trial: Trial,
    current: list[PodView],
    latest: int,
    observed: Observed,
    config: OperatorConfig,
    gathered: _Pass,
) -> None:
    """The trial's current attempt runs: its missing Pods (created in part before a crash, or
    a Locust master's workers) are created; a trial of several Pods is released at its
    barrier, or fails if it is not all there in time; a Pod that will not start is noted."""
    decision = gathered.decision
    live = [p for p in current if p.live]
    decision.attempts[trial.name] = max(observed.attempts.get(trial.name, 0), latest)
    decision.running += [(trial, p) for p in live]
    have = {p.pod for p in current}
    missing = [i for i in pod_indexes(trial) if i not in have]
    master = locust_master(trial)
    if master is not None:  # its workers once the master has an address
        leader = next((p for p in live if p.pod == master and p.ip), None)
        if leader is not None:
            decision.locust_masters[trial.name] = f"{leader.ip}:{LOCUST_MASTER_PORT}"
        else:
            missing = [i for i in missing if i == master]
    decision.create += [(trial, latest, i) for i in missing]
    if trial.pods > 1:
        release, late = _barrier(trial, current, observed.now, config)
        if late:
            decision.fail(trial, late, current)
            return
        if release:
            decision.release.append((trial, sorted(live, key=lambda p: p.pod)))
    for pod in live:
        whose = f"trial {trial.name}"
        stuck = not_starting(whose, pod, observed.image(config), observed.now, config)
        if stuck:
            gathered.stuck.append(_Stuck(trial, pod, *stuck))
        elif pod.unschedulable:
            gathered.unplaced.append((whose, pod))


def _start_again(
    trial: Trial, lost: list[PodView], observed: Observed, config: OperatorConfig, gathered: _Pass
) -> None:
    """No Pod of the trial runs: it starts (again), or gives up after max_attempts."""
    used = observed.attempts.get(trial.name, 0)
    if used >= config.max_attempts:
        cause = (lost[-1].reason or "deleted") if lost else "its Pod disappeared"
        message = f"lost {used} times ({cause}); gave up after {used} attempts"
        gathered.decision.record(TrialOutcome(trial, None, message), lost[-1:])
        return
    master = locust_master(trial)  # a Locust master first: its workers need it
    gathered.pending.append((trial, list(pod_indexes(trial)) if master is None else [master]))
    gathered.decision.attempts[trial.name] = used


def _barrier(
    trial: Trial, attempt: list[PodView], now: datetime, config: OperatorConfig
) -> tuple[bool, str | None]:
    """(release now, why the trial fails): a trial of several Pods is released once all
    its Pods are ready at the barrier, and fails if they are not all ready within
    config.barrier_timeout of the first one's creation (not while Kueue still gates one)."""
    live = [p for p in attempt if p.live]
    expected = pod_indexes(trial)
    if locust_master(trial) is not None:  # its master waits for the workers, not for us
        if len(live) == len(expected) and all(p.phase == PodPhase.RUNNING for p in live):
            return False, None
    elif len(live) == len(expected) and all(p.container_started and p.ip for p in live):
        return True, None
    if any(p.phase == PodPhase.SUCCEEDED or p.exit_code is not None for p in attempt):
        return False, None  # released already: the runners are past the barrier
    created = [p.created for p in attempt if p.created]
    waited = (now - min(created)).total_seconds() if created else 0.0
    if any(p.gated for p in attempt) or waited < parse_duration(config.barrier_timeout):
        return False, None
    missing = sorted(set(expected) - {p.pod for p in live})
    late = [
        f"Pod {p.pod} {p.phase}" + (f" ({_state(p)})" if _state(p) else "")
        for p in live
        if not (
            p.container_started
            or (locust_master(trial) is not None and p.phase == PodPhase.RUNNING)
        )
    ] + [f"Pod {i} missing" for i in missing]
    return False, (
        f"not every Pod was ready at the start barrier within {config.barrier_timeout} "
        f"(CXLAB_BARRIER_TIMEOUT): {', '.join(late)}"
    )


def _state(pod: PodView) -> str:
    return pod.unschedulable or pod.waiting_reason or ""


def _decide_experiment(observed: Observed, config: OperatorConfig, gathered: _Pass) -> Decision:
    """After every trial: a refused Pod, an image or a placement no trial can ever run with
    ends the experiment; else pending trials start in the slots parallelism leaves."""
    decision = gathered.decision
    if observed.refused is not None:
        return _refused(decision, observed, observed.refused)
    if _cannot_go_on(observed, config, gathered):
        return decision
    if decision.finished and any(o.abort_on_fail for o in observed.spec.objectives or ()):
        # What ended in this pass may make pending trials pointless (abortOnFail): the next
        # pass, deciding from the status that records it, starts only those that are not.
        return decision
    return _start(observed, gathered)


def _refused(decision: Decision, observed: Observed, refused: Refusal) -> Decision:
    """No Pod of the experiment can be created: every trial not recorded fails with the
    apiserver's own message and what to change; its Pods running, and those created with the
    refused one, go."""
    failure = refused_failure(refused.pod, refused.code, refused.reason, refused.message)
    decision.fail_all(observed, failure, POD_REJECTED)
    decision.delete = list(dict.fromkeys([*decision.delete, *refused.created]))
    return decision


def _cannot_go_on(observed: Observed, config: OperatorConfig, gathered: _Pass) -> bool:
    """Whether an image or a placement ends the experiment (every trial not recorded fails):
    a trial Pod, the delay target or a trial host that will not start, or a Pod no node
    can place while nothing of the experiment is placed."""
    decision = gathered.decision
    stuck = gathered.stuck
    if stuck and _image_ran(observed):
        # The image ran on another node: only these trials' nodes cannot run it.
        for found in stuck:
            assert found.trial is not None  # the delay target is looked at below
            decision.fail(found.trial, found.message, [found.pod])
        stuck = []
    unplaced = list(gathered.unplaced)
    for whose, pod in _beside(observed):
        trouble = not_starting(whose, pod, observed.image(config), observed.now, config)
        if trouble:
            stuck.append(_Stuck(None, pod, *trouble))
        elif pod.unschedulable:
            unplaced.append((whose, pod))
    if stuck:  # every trial Pod has the same image: none of them will start
        decision.fail_all(observed, stuck[0].message, stuck[0].reason)
        return True
    if observed.capacity_exists:  # busy, not impossible: a full node frees up, a wrong one never
        unplaced = [(w, p) for w, p in unplaced if not busy(p)]
    placed = any(not p.unschedulable for _, p in decision.running)
    placed = placed or any(h.node for h in hosts_of(observed.pods) if h.live)
    failure = unschedulable_failure(unplaced, placed, observed.now, config)
    if failure:
        decision.fail_all(observed, failure, UNSCHEDULABLE)
    return failure is not None


def _beside(observed: Observed) -> list[tuple[str, PodView]]:
    """The experiment's Pods other than trials' that run its image with its placement, and
    their names: the delay target of an http experiment (while it cannot start, no trial
    starts either) and the trial hosts (isolation: process), while trials are left."""
    unfinished = len(observed.recorded) < len(observed.trials)
    target = next(
        (p for p in observed.pods if p.component == COMPONENT_TARGET and not p.deleting), None
    )
    beside: list[tuple[str, PodView]] = []
    if target is not None and not observed.target_ready and unfinished:
        beside.append(("the delay target", target))
    hosts = [h for h in hosts_of(observed.pods) if h.live and unfinished]
    return beside + [(f"trial host {h.name}", h) for h in hosts]


def _start(observed: Observed, gathered: _Pass) -> Decision:
    """The pending trials that start now, in the slots parallelism leaves (and the room the
    Nodes have), each with its next attempt counted."""
    decision = gathered.decision
    running_trials = len({t.name for t, _ in decision.running})
    slots = observed.spec.parallelism - running_trials - gathered.terminating
    delay = observed.spec.workload.delay_target
    if gathered.pending and slots > 0 and delay and not observed.target_ready:
        decision.waiting_for_target = True
        return decision
    if observed.service is not None:  # only the running variant's, once its copy is Ready
        gathered.pending = [p for p in gathered.pending if observed.service.runs(p[0])]
    starting = gathered.pending[: max(0, slots)]
    if observed.room is not None:
        fit_now, fit_after = observed.room
        if fit_now < min(len(starting), fit_after):
            # Only our own Pods' teardown holds the room: a Pod created now would fail to be
            # scheduled and wait out the scheduler's backoff (up to a second after the room
            # frees); created by the pass the teardown's event brings, it is bound at once.
            starting = starting[:fit_now]
    if observed.spec.isolation == "process":
        starting = _on_hosts(observed, gathered, starting)
    for trial, first_pods in starting:
        attempt = decision.attempts.get(trial.name, 0) + 1
        decision.attempts[trial.name] = attempt
        decision.create += [(trial, attempt, i) for i in first_pods]
    return decision


def _on_hosts(
    observed: Observed, gathered: _Pass, starting: list[tuple[Trial, list[int]]]
) -> list[tuple[Trial, list[int]]]:
    """isolation: process: the trials that start now are those an idle host that answers
    takes; hosts are made, kept and let go for the trials left (cxlab.experiments.hosts)."""
    decision = gathered.decision
    left = len(observed.trials) - len(observed.recorded) - len(decision.finished)
    wanted = 0 if decision.failure else min(observed.spec.parallelism, max(0, left))
    busy = {p.host for _, p in decision.running if p.host}
    plan = plan_hosts(observed.pods, busy, [t.name for t, _ in starting], wanted)
    decision.hosts_create = plan.create
    decision.delete += [n for n in plan.delete if n not in decision.delete]
    decision.hosted = plan.assign
    return [(t, pods) for t, pods in starting if t.name in plan.assign]


def _image_ran(observed: Observed) -> bool:
    """Whether a trial Pod of this experiment has run its container (so the image is good)."""
    ran = any(p.component == COMPONENT_TRIAL and p.ran for p in observed.pods)
    return ran or any(e.has_result for e in observed.recorded.values())


def fail_experiment(observed: Observed, failure: str, reason: str) -> Decision:
    """The experiment cannot go on (before any Pod: it can never fit, or waited too long):
    every trial not yet recorded fails with the reason."""
    return Decision().fail_all(observed, failure, reason)
