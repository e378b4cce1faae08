"""What a Pod says about its trial, read from the Pod object (pure).

The kopf index keeps one compact PodView per Pod; the reconciler decides from those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from cxlab.experiments.fields import quantity
from cxlab.experiments.pods import (
    COMPONENT_HOST,
    COMPONENT_TRIAL,
    LABEL_ATTEMPT,
    LABEL_COMPONENT,
    LABEL_POD,
    LABEL_TRIAL,
    LABEL_VARIANT,
)
from cxlab.times import parse_time
from cxlab_contract import HOST_TOKEN_ENV

# Pod-level reasons that mean the Pod was lost, not that the model failed: retry it.
LOST_REASONS = frozenset({"Evicted", "NodeLost", "Shutdown", "Terminated", "NodeShutdown"})


class PodPhase(StrEnum):
    """A Pod's status.phase (Kubernetes'), not an experiment's."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def ended(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


# A Pod in these phases holds its node's cores (Unknown: its node stopped reporting).
HOLDING = frozenset({PodPhase.PENDING, PodPhase.RUNNING, PodPhase.UNKNOWN})


@dataclass(frozen=True)
class PodView:
    name: str
    component: str
    trial: str | None
    attempt: int
    phase: str  # a PodPhase
    reason: str | None  # the Pod's status.reason (Evicted, DeadlineExceeded, ...)
    deleting: bool
    created: datetime | None
    ip: str | None
    node: str | None
    ready: bool  # a trial Pod: its tasks have ended (the runner's /done)
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
    # Its container passed its startup probe (a trial Pod of several: at the start barrier),
    # or runs without one.
    container_started: bool = False
    image_id: str | None = None  # the container's image as the kubelet ran it (its digest)
    # A trial run as a process in a trial host (isolation: process): the host Pod's name.
    host: str | None = None
    # A trial host whose trials the operator has read since it started (until then a trial
    # counted in status and not seen is not taken for lost).
    trials_listed: bool = False
    # A trial Pod whose readiness probe is not the runner's /done: only the operator's long
    # poll of /done says when its tasks end (cxlab.controller.done_watch), not the kubelet,
    # for whom a container without a readiness probe is Ready as soon as it runs.
    unprobed: bool = False
    # A trial host's: what the operator shows it on every request (HOST_TOKEN_ENV in its
    # container's environment, set when the operator made the Pod).
    host_token: str | None = field(default=None, repr=False)
    # A service variant's copy's Pod (cxlab.experiments.service_copy): its variant's index,
    # and why its container last ended (OOMKilled, Error) when it restarts.
    variant: int = 0
    last_termination_reason: str | None = None
    # A copy's Pod: each container's (name, restartCount, why it last ended), which the
    # service's figures count over a trial's window (cxlab.analysis.copy_counters).
    restarts: tuple[tuple[str, int, str | None], ...] = ()
    # A copy's Pod: the CPU its containers may use at most (the sum of their limits; None
    # when one has none, and the Pod may take what the node has spare).
    cpu_limit: float | None = None

    @property
    def live(self) -> bool:
        """Starting or running, and not on its way out."""
        return self.phase in (PodPhase.PENDING, PodPhase.RUNNING) and not self.deleting

    @property
    def lost(self) -> bool:
        """Failed for a reason of the node's, not the trial's (evicted, node lost)."""
        return self.phase == PodPhase.FAILED and self.reason in LOST_REASONS

    @property
    def ran(self) -> bool:
        """Its container started (so its image is good)."""
        started = self.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED)
        return started or self.exit_code is not None


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    return parse_time(str(value))


def view_pod(pod: Mapping[str, Any]) -> PodView:
    metadata = pod.get("metadata", {})
    labels = metadata.get("labels") or {}
    status = pod.get("status") or {}
    terminated: Mapping[str, Any] = {}
    waiting: Mapping[str, Any] = {}
    container_started = False
    image_id = None
    last_reason = None
    restarts = []
    for container in status.get("containerStatuses") or []:
        last = (container.get("lastState") or {}).get("terminated") or {}
        last_reason = last.get("reason") or last_reason
        restarts.append((container.get("name", ""), int(container.get("restartCount") or 0),
                         last.get("reason")))  # fmt: skip
        image_id = container.get("imageID") or None
        terminated = (container.get("state") or {}).get("terminated") or {}
        waiting = (container.get("state") or {}).get("waiting") or {}
        container_started = bool(container.get("started"))
    containers = (pod.get("spec") or {}).get("containers") or []
    # A trial host's report of its trial (host_watch) has no spec: its Ready is the host's
    # word that the tasks ended, as the probe's would be.
    unprobed = (
        labels.get(LABEL_COMPONENT) == COMPONENT_TRIAL
        and bool(containers)
        and not any(c.get("readinessProbe") for c in containers)
    )
    unschedulable, ready = _conditions(status, unprobed)
    host_token = None
    if labels.get(LABEL_COMPONENT) == COMPONENT_HOST:
        env = [e for c in containers for e in c.get("env") or [] if e.get("name") == HOST_TOKEN_ENV]
        host_token = env[0].get("value") if env else None
    return PodView(
        name=metadata.get("name", ""),
        component=labels.get(LABEL_COMPONENT, ""),
        trial=labels.get(LABEL_TRIAL),
        attempt=int(labels.get(LABEL_ATTEMPT, "0") or 0),
        phase=status.get("phase") or PodPhase.PENDING,
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
        container_started=container_started,
        image_id=image_id,
        unprobed=unprobed,
        host_token=host_token,
        variant=int(labels.get(LABEL_VARIANT, "0") or 0),
        last_termination_reason=last_reason,
        restarts=tuple(restarts) if labels.get(LABEL_VARIANT) else (),
        cpu_limit=_cpu_limit(containers) if labels.get(LABEL_VARIANT) else None,
    )


def _cpu_limit(containers: list[Mapping[str, Any]]) -> float | None:
    cores = 0.0
    for container in containers:
        limit = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
        if limit is None:
            return None
        cores += float(quantity(limit))
    return cores if containers else None


def _conditions(status: Mapping[str, Any], unprobed: bool) -> tuple[str | None, bool]:
    """(why the scheduler cannot place it, whether it is Ready) from the Pod's conditions; an
    `unprobed` trial Pod is never Ready (nothing probes when its tasks end)."""
    unschedulable, ready = None, False
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            unschedulable = condition.get("message") or "Unschedulable"
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            ready = not unprobed
    return unschedulable, ready
