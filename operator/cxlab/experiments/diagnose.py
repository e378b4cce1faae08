"""Why a trial's Pod did not run, in words that say what to change (pure): a runner that
failed, a container the kubelet does not start, a Pod the scheduler cannot place, a Pod the
apiserver refuses."""

from __future__ import annotations

import re
from datetime import datetime

from cxlab.config import OperatorConfig
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import RUNNER_UID
from cxlab.experiments.spec import ExperimentSpec

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


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def why_failed(pod: PodView, spec: ExperimentSpec) -> str:
    """Why a trial's runner Pod failed: timed out, out of memory, or its runner's last words."""
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


def not_starting(
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


def busy(pod: PodView) -> bool:
    """Some node turned the Pod down for room ("0/3 nodes are available: 1 Insufficient
    cpu, 2 node(s) didn't match Pod's node affinity/selector."), or for another trial on it
    (exclusive: anti-affinity): it may take the Pod once that room is free."""
    message = (pod.unschedulable or "").split(" preemption:")[0]
    _, _, counts = message.partition("nodes are available: ")
    reasons = [re.sub(r"^\d+ ", "", part.strip()).rstrip(".") for part in counts.split(", ")]
    return any(
        r.startswith(("Insufficient", "Too many pods")) or "anti-affinity" in r for r in reasons
    )


def unschedulable_failure(
    unschedulable: list[tuple[str, PodView]],
    placed: bool,
    now: datetime,
    config: OperatorConfig,
) -> str | None:
    """A trial (or the delay target) that cannot be placed while no trial of its experiment
    holds resources (`placed`) will never be placed: every trial asks for the same resources
    and placement."""
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


def refused_failure(pod: str, code: int, reason: str, message: str) -> str:
    """The apiserver refused a Pod of the experiment for what it is (400, 422): every Pod of
    the experiment is built from the same image, resources and placement, so none can run."""
    fields = [name for pattern, name in POD_FIELDS if re.search(pattern, message)]
    where = ", ".join(dict.fromkeys(fields)) or "spec.placement, spec.image and spec.resources"
    return (
        f"the apiserver refused Pod {pod} ({code} {reason}): {message.strip()[:600]}; "
        f"check {where}: every Pod of the experiment has it, so none can run"
    )
