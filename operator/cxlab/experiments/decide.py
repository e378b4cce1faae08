"""One level-based decision: from the trials already in status and the Pods that exist now,
what to record, what to start, what to delete (pure; reconciler.py carries it out).

Rules that make a restart safe: a trial is recorded from its Pod before the Pod is deleted;
an attempt is counted in status before its Pod is created, and Pod names carry the attempt,
so a trial never runs twice unless its Pod was really lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cxlab.controller.config import OperatorConfig
from cxlab.experiments.outcome import ResultError, classify, parse_result
from cxlab.experiments.plan import LOCUST_MASTER_PORT, Trial, locust_master, pod_indexes
from cxlab.experiments.pod_view import LOST_REASONS, PodView
from cxlab.experiments.pods import COMPONENT_TARGET, COMPONENT_TRIAL, RUNNER_UID
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import has_result, trial_entry
from cxlab.experiments.summary import TrialOutcome
from cxlab_contract.durations import parse_duration

Entry = dict[str, Any]
ACTIVE_PHASES = ("Pending", "Running")

# The kubelet's reasons for a container it does not start. These can never clear up:
NEVER_STARTS = frozenset({"InvalidImageName", "ErrImageNeverPull"})
# These may (a registry or runtime hiccup): they get image_pull_grace from the Pod's creation.
MAY_START = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError", "CreateContainerError"}
)
PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
# Condition reasons (status.conditions[Failed].reason) of an experiment that cannot go on.
UNSCHEDULABLE = "Unschedulable"
IMAGE_PULL_FAILED = "ImagePullFailed"
CONTAINER_CREATE_FAILED = "ContainerCreateFailed"
POD_REJECTED = "PodRejected"
# A Pod field the apiserver names in a refusal → the experiment's field that sets it.
POD_FIELDS = (
    (r"spec\.tolerations", "spec.placement.tolerations"),
    (r"spec\.nodeSelector", "spec.placement.nodeSelector"),
    (r"spec\.affinity", "spec.placement.affinity"),
    (r"\.image(?![A-Za-z])", "spec.image"),
    (r"\.resources", "spec.resources"),
    (r"spec\.activeDeadlineSeconds", "spec.trialTimeout"),
    (r"metadata\.labels", "metadata.name and spec.models (a trial's name is a label value)"),
    (r"metadata\.name", "metadata.name"),
)


@dataclass
class Decision:
    finished: list[Entry] = field(default_factory=list)  # new status.trials entries
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


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _entry(outcome: TrialOutcome, pods: list[PodView]) -> Entry:
    entry = trial_entry(outcome)
    if pods:
        entry["attempts"] = pods[0].attempt
        if pods[0].node:
            entry["node"] = pods[0].node
        if len(pods) > 1:
            entry["nodes"] = [p.node or "" for p in pods]
    return entry


def _whose(trial: Trial, pod: PodView) -> str:
    return f"Pod {pod.pod}: " if trial.pods > 1 else ""


def _from_succeeded(trial: Trial, pods: list[PodView], spec: ExperimentSpec) -> Entry:
    """Every Pod of the attempt succeeded (in Pod order): their Results, merged if several."""
    results = []
    for pod in pods:
        try:
            results.append(parse_result(pod.termination_message or ""))
        except ResultError as error:
            why = f"{_whose(trial, pod)}no valid Result in the termination message: {error}"
            return _entry(TrialOutcome(trial, None, why), pods)
    # the kubelet chose the cores: only how many can be checked; a fraction is never pinned
    return _entry(classify(trial, results, spec.resources.whole_cpus), pods)


def _why_failed(pod: PodView, spec: ExperimentSpec) -> str:
    if pod.reason == "DeadlineExceeded":
        return f"timed out after trialTimeout {spec.trial_timeout} and was stopped"
    if pod.termination_reason == "OOMKilled":
        return (
            f"OOMKilled: the trial needed more memory than resources.memory "
            f"({spec.resources.memory}); raise it"
        )
    detail = _last_line(pod.termination_message) or pod.termination_reason or pod.reason or ""
    code = "?" if pod.exit_code is None else pod.exit_code
    return f"runner exited {code}: {detail}".rstrip(": ")


def _lost(pod: PodView) -> bool:
    """Gone through no fault of the trial: evicted, node lost, or deleted by someone before
    it succeeded (the operator deletes Pods only after recording their trial)."""
    if pod.phase == "Failed" and pod.reason in LOST_REASONS:
        return True
    return pod.deleting and pod.phase != "Succeeded"


def _barrier(
    trial: Trial, attempt: list[PodView], now: datetime, config: OperatorConfig
) -> tuple[bool, str | None]:
    """(release now, why the trial fails): a trial of several Pods is released once all
    its Pods are ready at the barrier, and fails if they are not all ready within
    config.barrier_timeout of the first one's creation (not while Kueue still gates one)."""
    live = [p for p in attempt if p.phase in ACTIVE_PHASES and not p.deleting]
    expected = pod_indexes(trial)
    if locust_master(trial) is not None:  # its master waits for the workers, not for us
        if len(live) == len(expected) and all(p.phase == "Running" for p in live):
            return False, None
    elif len(live) == len(expected) and all(p.ready and p.ip for p in live):
        return True, None
    if any(p.phase == "Succeeded" or p.exit_code is not None for p in attempt):
        return False, None  # released already: the runners are past the barrier
    created = [p.created for p in attempt if p.created]
    waited = (now - min(created)).total_seconds() if created else 0.0
    if any(p.gated for p in attempt) or waited < parse_duration(config.barrier_timeout):
        return False, None
    missing = sorted(set(expected) - {p.pod for p in live})
    late = [
        f"Pod {p.pod} {p.phase}" + (f" ({_state(p)})" if _state(p) else "")
        for p in live
        if not (p.ready or (locust_master(trial) is not None and p.phase == "Running"))
    ] + [f"Pod {i} missing" for i in missing]
    return False, (
        f"not every Pod was ready at the start barrier within {config.barrier_timeout} "
        f"(CXLAB_BARRIER_TIMEOUT): {', '.join(late)}"
    )


def _state(pod: PodView) -> str:
    return pod.unschedulable or pod.waiting_reason or ""


def decide(
    *,
    spec: ExperimentSpec,
    trials: list[Trial],
    recorded: dict[str, Entry],
    attempts: dict[str, int],
    pods: list[PodView],
    target_ready: bool,
    now: datetime,
    config: OperatorConfig,
    capacity_exists: bool = True,
) -> Decision:
    """`capacity_exists`: some node matching the placement could hold a trial if it were
    empty, so a trial the scheduler finds no room for only waits (cxlab.experiments.nodes).

    A trial of several Pods is one attempt of all of them: it succeeds when every one has,
    fails when one fails, and a lost one (deleted, evicted) loses the whole attempt, whose
    Pods all go before the next attempt starts them again together."""
    decision = Decision()
    trial_pods = [p for p in pods if p.component == COMPONENT_TRIAL]
    by_trial: dict[str, list[PodView]] = {}
    for pod in trial_pods:
        by_trial.setdefault(pod.trial or "", []).append(pod)
    pending: list[tuple[Trial, list[int]]] = []  # (trial, its Pods to create)
    unschedulable: list[tuple[str, PodView]] = []  # (whose, Pod)
    not_starting: list[tuple[Trial | None, PodView, str, str]] = []  # (trial, Pod, why)
    image = spec.image or config.runner_image
    terminating = 0  # lost Pods still shutting down: they hold their cores a little longer

    for trial in trials:
        mine = sorted(by_trial.get(trial.name, []), key=lambda p: (p.attempt, p.pod))
        if trial.name in recorded:
            keep = spec.keep_pods_on_failure and recorded[trial.name]["phase"] == "Failed"
            decision.delete += [p.name for p in mine if not p.deleting and not keep]
            continue
        latest = max((p.attempt for p in mine), default=0)
        current = [p for p in mine if p.attempt == latest]
        older = [p for p in mine if p.attempt != latest]
        succeeded = [p for p in current if p.phase == "Succeeded"]
        failed = [p for p in current if p.phase == "Failed" and not _lost(p)]
        live = [p for p in current if p.phase in ACTIVE_PHASES and not p.deleting]
        lost = [p for p in mine if _lost(p)]
        lost_now = [p for p in current if _lost(p)]
        # Pods of an earlier attempt, and every Pod of an attempt one of them lost, go.
        doomed = older + (current if lost_now and not failed else [])
        decision.delete += [p.name for p in doomed if not p.deleting]
        # A trial recorded in this pass loses its Pods in this pass too, once the status that
        # records it is written (the reconciler's order): they free their cores at once.
        if len(succeeded) == len(pod_indexes(trial)):
            decision.finished.append(_from_succeeded(trial, succeeded, spec))
            decision.delete += [p.name for p in current if not p.deleting]
        elif failed:
            why = f"{_whose(trial, failed[0])}{_why_failed(failed[0], spec)}"
            decision.finished.append(_entry(TrialOutcome(trial, None, why), failed))
            kept = failed if spec.keep_pods_on_failure else []
            decision.delete += [p.name for p in current if not p.deleting and p not in kept]
        elif current and not lost_now:
            decision.attempts[trial.name] = max(attempts.get(trial.name, 0), latest)
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
            if missing:  # created in part before a crash (or a Locust master first): the rest
                decision.create += [(trial, latest, i) for i in missing]
            if trial.pods > 1:
                release, late = _barrier(trial, current, now, config)
                if late:
                    decision.finished.append(_entry(TrialOutcome(trial, None, late), current))
                    decision.attempts.pop(trial.name, None)
                    decision.running = [(t, p) for t, p in decision.running if t != trial]
                    decision.delete += [p.name for p in live]
                    decision.create = [c for c in decision.create if c[0] != trial]
                    continue
                if release:
                    decision.release.append((trial, sorted(live, key=lambda p: p.pod)))
            for pod in live:
                stuck = _not_starting(f"trial {trial.name}", pod, image, now, config)
                if stuck:
                    not_starting.append((trial, pod, *stuck))
                elif pod.unschedulable:
                    unschedulable.append((f"trial {trial.name}", pod))
        elif any(p.deleting and p.phase in (*ACTIVE_PHASES, "Unknown") for p in lost + doomed):
            # Retry once the lost Pods are gone, so two attempts never share the node's cores.
            terminating += 1
            decision.attempts[trial.name] = attempts.get(trial.name, 0)
        else:
            used = attempts.get(trial.name, 0)
            if used >= config.max_attempts:
                cause = (lost[-1].reason or "deleted") if lost else "its Pod disappeared"
                message = f"lost {used} times ({cause}); gave up after {used} attempts"
                decision.finished.append(
                    _entry(TrialOutcome(trial, None, message), lost[-1:] if lost else [])
                )
            else:
                master = locust_master(trial)  # a Locust master first: its workers need it
                pending.append((trial, list(pod_indexes(trial)) if master is None else [master]))
                decision.attempts[trial.name] = used
        # Lost Pods of an unfinished trial go; the trial starts again below.
        decision.delete += [
            p.name for p in lost if not p.deleting and p.name not in decision.delete
        ]

    if not_starting and _image_ran(trial_pods, recorded):
        # The image ran on another node: only these trials' nodes cannot run it.
        for stuck_trial, pod, _, message in not_starting:
            assert stuck_trial is not None  # the delay target is looked at below
            if stuck_trial.name in decision.attempts:
                decision.finished.append(_entry(TrialOutcome(stuck_trial, None, message), [pod]))
                decision.attempts.pop(stuck_trial.name, None)
        failed_now = {t.name for t, *_ in not_starting if t}
        gone = [p.name for t, p in decision.running if t.name in failed_now]
        decision.delete += gone
        decision.running = [(t, p) for t, p in decision.running if t.name not in failed_now]
        decision.release = [(t, p) for t, p in decision.release if t.name not in failed_now]
        decision.create = [c for c in decision.create if c[0].name not in failed_now]
        not_starting = []
    # The delay target of an http experiment runs the same image with the same placement:
    # while it cannot start, no trial starts either.
    target = next((p for p in pods if p.component == COMPONENT_TARGET and not p.deleting), None)
    if target is not None and not target_ready and len(recorded) < len(trials):
        stuck = _not_starting("the delay target", target, image, now, config)
        if stuck:
            not_starting.append((None, target, *stuck))
        elif target.unschedulable:
            unschedulable.append(("the delay target", target))
    if not_starting:
        # Every trial Pod has the same image: none of them will start.
        _, _, decision.failure_reason, decision.failure = not_starting[0]
    else:
        if capacity_exists:  # busy, not impossible: a full node frees up, a wrong one never
            unschedulable = [(w, p) for w, p in unschedulable if not _busy(p)]
        decision.failure = _unschedulable_failure(unschedulable, decision.running, now, config)
        decision.failure_reason = UNSCHEDULABLE if decision.failure else None
    if decision.failure:
        _fail_the_rest(decision, trials, recorded, decision.failure)
        return decision

    running_trials = len({t.name for t, _ in decision.running})
    slots = spec.parallelism - running_trials - terminating
    if pending and slots > 0 and spec.workload.type == "http" and not target_ready:
        decision.waiting_for_target = True
        return decision
    for trial, first_pods in pending[: max(0, slots)]:
        attempt = decision.attempts.get(trial.name, 0) + 1
        decision.attempts[trial.name] = attempt
        decision.create += [(trial, attempt, i) for i in first_pods]
    return decision


def _busy(pod: PodView) -> bool:
    """Some node turned the Pod down for room ("0/3 nodes are available: 1 Insufficient
    cpu, 2 node(s) didn't match Pod's node affinity/selector."), or for another trial on it
    (exclusive: anti-affinity): it may take the Pod once that room is free."""
    message = (pod.unschedulable or "").split(" preemption:")[0]
    _, _, counts = message.partition("nodes are available: ")
    reasons = [re.sub(r"^\d+ ", "", part.strip()).rstrip(".") for part in counts.split(", ")]
    return any(
        r.startswith(("Insufficient", "Too many pods")) or "anti-affinity" in r for r in reasons
    )


def _unschedulable_failure(
    unschedulable: list[tuple[str, PodView]],
    running: list[tuple[Trial, PodView]],
    now: datetime,
    config: OperatorConfig,
) -> str | None:
    """A trial (or the delay target) that cannot be placed while no trial of its experiment
    holds resources will never be placed: every trial asks for the same resources and
    placement."""
    placed = [p for _, p in running if not p.unschedulable]
    if placed:
        return None
    for whose, pod in unschedulable:
        waited = (now - pod.created).total_seconds() if pod.created else 0.0
        if waited >= config.unschedulable_grace_seconds:
            return (
                f"{whose} cannot be scheduled: {pod.unschedulable} "
                f"(check resources.cpu/memory and placement against the nodes)"
            )
    return None


def fail_experiment(
    trials: list[Trial], recorded: dict[str, Entry], failure: str, reason: str
) -> Decision:
    """The experiment cannot go on (before any Pod: it can never fit, or waited too long):
    every trial not yet recorded fails with the reason."""
    decision = Decision(failure=failure, failure_reason=reason)
    _fail_the_rest(decision, trials, recorded, failure)
    return decision


def _fail_the_rest(
    decision: Decision, trials: list[Trial], recorded: dict[str, Entry], failure: str
) -> None:
    done = set(recorded) | {e["name"] for e in decision.finished}
    running: dict[str, list[PodView]] = {}
    for trial, pod in decision.running:
        running.setdefault(trial.name, []).append(pod)
    for trial in trials:
        if trial.name not in done:
            decision.finished.append(
                _entry(TrialOutcome(trial, None, failure), running.get(trial.name, []))
            )
    decision.delete += [p.name for _, p in decision.running]
    decision.running = []
    decision.release = []
    decision.create = []
    decision.attempts = {}


def _not_starting(
    whose: str, pod: PodView, image: str, now: datetime, config: OperatorConfig
) -> tuple[str, str] | None:
    """(condition reason, message) once the kubelet's reason for not starting `whose`
    container (a trial's, the delay target's) is final: at once for reasons no retry can
    clear, after the image pull grace (from the Pod's creation) for those that might."""
    reason = pod.waiting_reason or ""
    if reason not in NEVER_STARTS | MAY_START:
        return None
    waited = (now - pod.created).total_seconds() if pod.created else 0.0
    if reason in MAY_START and waited < config.image_pull_grace_seconds:
        return None
    kubelet = f"{reason}: {(pod.waiting_message or '').strip()[:500]}".rstrip(": ")
    if reason == "InvalidImageName":
        advice = f"{image} is not a valid image reference: fix spec.image"
    elif reason == "ErrImageNeverPull":
        advice = (
            f"{image} is not on the node and the operator's image pull policy is Never: "
            "load the image onto the nodes or change spec.image"
        )
    elif reason in PULL_REASONS:
        advice = (
            f"check spec.image ({image}): its name and tag, that it is pushed, and that the "
            "nodes can pull it from its registry without credentials"
        )
    else:
        advice = (
            f"check spec.image ({image}): a trial runs it as the non-root user {RUNNER_UID} "
            "in a restricted Pod, with the runner's command"
        )
    waited_for = "" if reason in NEVER_STARTS else f" after {waited:.0f} s"
    message = f"{whose}: its container did not start{waited_for} ({kubelet}); {advice}"
    return (IMAGE_PULL_FAILED if reason in PULL_REASONS else CONTAINER_CREATE_FAILED), message


def _image_ran(pods: list[PodView], recorded: dict[str, Entry]) -> bool:
    """Whether a trial Pod of this experiment has run its container (so the image is good)."""
    return any(p.phase in ("Running", "Succeeded") or p.exit_code is not None for p in pods) or any(
        has_result(e) for e in recorded.values()
    )


def pod_refused(
    decision: Decision,
    trials: list[Trial],
    recorded: dict[str, Entry],
    *,
    pod: str,
    code: int,
    reason: str,
    message: str,
    created: list[str],
) -> Decision:
    """The apiserver refused a Pod of the experiment for what it is (400, 422) after
    `decision` was written to status: every trial's Pod is built from the same image,
    resources and placement, so none can be created. The experiment ends: every trial not
    yet recorded fails with the apiserver's own message and what to change; the Pods already
    running or created in this pass (`created`) go."""
    fields = [name for pattern, name in POD_FIELDS if re.search(pattern, message)]
    where = ", ".join(dict.fromkeys(fields)) or "spec.placement, spec.image and spec.resources"
    failure = (
        f"the apiserver refused Pod {pod} ({code} {reason}): {message.strip()[:600]}; "
        f"check {where}: every Pod of the experiment has it, so none can run"
    )
    refused = Decision(
        finished=list(decision.finished),
        delete=list(decision.delete),
        running=list(decision.running),
        failure=failure,
        failure_reason=POD_REJECTED,
    )
    _fail_the_rest(refused, trials, recorded, failure)
    refused.delete = list(dict.fromkeys([*refused.delete, *created]))
    return refused


def next_deadline(
    decision: Decision, pods: list[PodView], config: OperatorConfig
) -> datetime | None:
    """The earliest moment at which the same Pods would be decided differently by the clock
    alone: an unplaced Pod's unschedulable grace, a stuck container's image pull grace, a
    trial's start barrier timeout. None when nothing waits on time. Everything else that
    changes a decision is a change of a Pod or of the experiment, which wakes a pass anyway."""
    moments: list[datetime] = []
    starting = [p for _, p in decision.running if p.phase == "Pending" and p.created]
    starting += [p for p in pods if p.component == COMPONENT_TARGET and p.created and not p.ready]
    for pod in starting:
        assert pod.created is not None
        if pod.unschedulable:
            moments.append(pod.created + timedelta(seconds=config.unschedulable_grace_seconds))
        if (pod.waiting_reason or "") in MAY_START:
            moments.append(pod.created + timedelta(seconds=config.image_pull_grace_seconds))
    by_trial: dict[str, tuple[Trial, list[PodView]]] = {}
    for trial, pod in decision.running:
        by_trial.setdefault(trial.name, (trial, []))[1].append(pod)
    for trial, mine in by_trial.values():
        created = [p.created for p in mine if p.created]
        if trial.pods > 1 and created and not any(p.exit_code is not None for p in mine):
            moments.append(min(created) + timedelta(seconds=parse_duration(config.barrier_timeout)))
    return min(moments, default=None)
