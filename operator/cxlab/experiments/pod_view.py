"""What a Pod says about its trial, read from the Pod object (pure).

The kopf index keeps one compact PodView per Pod; the reconciler decides from those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cxlab.experiments.pods import LABEL_ATTEMPT, LABEL_COMPONENT, LABEL_POD, LABEL_TRIAL

# Pod-level reasons that mean the Pod was lost, not that the model failed: retry it.
LOST_REASONS = frozenset({"Evicted", "NodeLost", "Shutdown", "Terminated", "NodeShutdown"})


@dataclass(frozen=True)
class PodView:
    name: str
    component: str
    trial: str | None
    attempt: int
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    reason: str | None  # the Pod's status.reason (Evicted, DeadlineExceeded, ...)
    deleting: bool
    created: datetime | None
    ip: str | None
    node: str | None
    ready: bool
    exit_code: int | None
    termination_reason: str | None  # the container's (Completed, Error, OOMKilled)
    termination_message: str | None
    unschedulable: str | None  # the scheduler's message while it cannot place the Pod
    started: datetime | None = None  # the Pod's status.startTime
    finished: datetime | None = None  # when its (last) container terminated
    # Why the kubelet has not started the container yet (ErrImagePull, ImagePullBackOff,
    # CreateContainerConfigError, ...; ContainerCreating while all is well), and its message.
    waiting_reason: str | None = None
    waiting_message: str | None = None
    gated: bool = False  # has scheduling gates: not yet admitted (by Kueue)
    pod: int = 0  # its index among its trial's Pods


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def view_pod(pod: Mapping[str, Any]) -> PodView:
    metadata = pod.get("metadata", {})
    labels = metadata.get("labels") or {}
    status = pod.get("status") or {}
    terminated: Mapping[str, Any] = {}
    waiting: Mapping[str, Any] = {}
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        waiting = (container.get("state") or {}).get("waiting") or {}
    unschedulable = None
    ready = False
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            unschedulable = condition.get("message") or "Unschedulable"
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            ready = True
    return PodView(
        name=metadata.get("name", ""),
        component=labels.get(LABEL_COMPONENT, ""),
        trial=labels.get(LABEL_TRIAL),
        attempt=int(labels.get(LABEL_ATTEMPT, "0") or 0),
        phase=status.get("phase") or "Pending",
        reason=status.get("reason"),
        deleting=bool(metadata.get("deletionTimestamp")),
        created=_time(metadata.get("creationTimestamp")),
        started=_time(status.get("startTime")),
        finished=_time(terminated.get("finishedAt")),
        ip=status.get("podIP"),
        node=(pod.get("spec") or {}).get("nodeName"),
        ready=ready,
        exit_code=terminated.get("exitCode"),
        termination_reason=terminated.get("reason"),
        termination_message=terminated.get("message"),
        unschedulable=unschedulable,
        waiting_reason=waiting.get("reason"),
        waiting_message=waiting.get("message"),
        gated=bool((pod.get("spec") or {}).get("schedulingGates")),
        pod=int(labels.get(LABEL_POD, "0") or 0),
    )


def now() -> datetime:
    return datetime.now(UTC)
