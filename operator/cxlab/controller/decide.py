"""One level-based decision: from the trials already in status and the Pods that exist now,
what to record, what to start, what to delete (pure; reconciler.py carries it out).

Rules that make a restart safe: a trial is recorded from its Pod before the Pod is deleted;
an attempt is counted in status before its Pod is created, and Pod names carry the attempt,
so a trial never runs twice unless its Pod was really lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cxlab.controller.config import OperatorConfig
from cxlab.controller.observe import LOST_REASONS, PodView
from cxlab.controller.pods import COMPONENT_TARGET, COMPONENT_TRIAL, RUNNER_UID
from cxlab.plan import Trial
from cxlab.results import ResultError, classify, parse_result
from cxlab.spec import ExperimentSpec
from cxlab.status import trial_entry
from cxlab.summary import TrialOutcome

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
    create: list[tuple[Trial, int]] = field(default_factory=list)  # (trial, attempt)
    delete: list[str] = field(default_factory=list)  # Pod names
    attempts: dict[str, int] = field(default_factory=dict)  # for trials not finished
    running: list[tuple[Trial, PodView]] = field(default_factory=list)
    failure: str | None = None  # the whole experiment cannot go on
    failure_reason: str | None = None  # why, as a condition reason (Unschedulable, ...)
    waiting_for_target: bool = False


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _entry(outcome: TrialOutcome, pod: PodView | None) -> Entry:
    entry = trial_entry(outcome)
    if pod is not None:
        entry["attempts"] = pod.attempt
        if pod.node:
            entry["node"] = pod.node
    return entry


def _from_succeeded(trial: Trial, pod: PodView, spec: ExperimentSpec) -> Entry:
    try:
        result = parse_result(pod.termination_message or "")
    except ResultError as error:
        why = f"no valid Result in the termination message: {error}"
        return _entry(TrialOutcome(trial, None, why), pod)
    # the kubelet chose the cores: only how many can be checked
    return _entry(classify(trial, result, spec.resources.cpu), pod)


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
    empty, so a trial the scheduler finds no room for only waits (cxlab.controller.capacity)."""
    decision = Decision()
    trial_pods = [p for p in pods if p.component == COMPONENT_TRIAL]
    by_trial: dict[str, list[PodView]] = {}
    for pod in trial_pods:
        by_trial.setdefault(pod.trial or "", []).append(pod)
    pending: list[Trial] = []
    unschedulable: list[tuple[str, PodView]] = []  # (whose, Pod)
    not_starting: list[tuple[Trial | None, PodView, str, str]] = []  # (trial, Pod, why)
    image = spec.image or config.runner_image
    terminating = 0  # lost Pods still shutting down: they hold their cores a little longer

    for trial in trials:
        mine = sorted(by_trial.get(trial.name, []), key=lambda p: p.attempt)
        if trial.name in recorded:
            keep = spec.keep_pods_on_failure and recorded[trial.name]["phase"] == "Failed"
            decision.delete += [p.name for p in mine if not p.deleting and not keep]
            continue
        succeeded = [p for p in mine if p.phase == "Succeeded"]
        failed = [p for p in mine if p.phase == "Failed" and not _lost(p)]
        live = [p for p in mine if p.phase in ACTIVE_PHASES and not p.deleting]
        lost = [p for p in mine if _lost(p)]
        if succeeded:
            decision.finished.append(_from_succeeded(trial, succeeded[-1], spec))
        elif failed:
            decision.finished.append(
                _entry(TrialOutcome(trial, None, _why_failed(failed[-1], spec)), failed[-1])
            )
        elif live:
            decision.running.append((trial, live[-1]))
            decision.attempts[trial.name] = max(attempts.get(trial.name, 0), live[-1].attempt)
            stuck = _not_starting(f"trial {trial.name}", live[-1], image, now, config)
            if stuck:
                not_starting.append((trial, live[-1], *stuck))
            elif live[-1].unschedulable:
                unschedulable.append((f"trial {trial.name}", live[-1]))
        elif any(p.deleting and p.phase in (*ACTIVE_PHASES, "Unknown") for p in lost):
            # Retry once the lost Pod is gone, so two attempts never share the node's cores.
            terminating += 1
            decision.attempts[trial.name] = attempts.get(trial.name, 0)
        else:
            used = attempts.get(trial.name, 0)
            if used >= config.max_attempts:
                why = (lost[-1].reason or "deleted") if lost else "its Pod disappeared"
                message = f"lost {used} times ({why}); gave up after {used} attempts"
                decision.finished.append(
                    _entry(TrialOutcome(trial, None, message), lost[-1] if lost else None)
                )
            else:
                pending.append(trial)
                decision.attempts[trial.name] = used
        # Lost Pods of an unfinished trial go; the trial starts again below.
        decision.delete += [p.name for p in lost if not p.deleting]

    if not_starting and _image_ran(trial_pods, recorded):
        # The image ran on another node: only these trials' nodes cannot run it.
        for stuck_trial, pod, _, message in not_starting:
            assert stuck_trial is not None  # the delay target is looked at below
            decision.finished.append(_entry(TrialOutcome(stuck_trial, None, message), pod))
            decision.attempts.pop(stuck_trial.name, None)
        failed_now = {t.name for t, *_ in not_starting if t}
        decision.running = [(t, p) for t, p in decision.running if t.name not in failed_now]
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

    slots = spec.parallelism - len(decision.running) - terminating
    if pending and slots > 0 and spec.workload.type == "http" and not target_ready:
        decision.waiting_for_target = True
        return decision
    for trial in pending[: max(0, slots)]:
        attempt = decision.attempts.get(trial.name, 0) + 1
        decision.attempts[trial.name] = attempt
        decision.create.append((trial, attempt))
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
    running = {t.name: p for t, p in decision.running}
    for trial in trials:
        if trial.name not in done:
            decision.finished.append(
                _entry(TrialOutcome(trial, None, failure), running.get(trial.name))
            )
    decision.delete += [p.name for p in running.values()]
    decision.running = []
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
        e.get("result") for e in recorded.values()
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
