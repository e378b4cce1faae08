"""spec.service's variants run one at a time, each as a copy of the user's Deployment (pure:
what a pass does about the copies, from what it sees of them; cxlab.controller.copier carries
it out).

The variant that runs is the first whose trials have not all ended. Its copy is made once no
other variant's copy (Deployment or Pod) is left, so variants never share the node; its
trials start once every replica has been Ready for service.settle; a copy not Ready within
service.readyTimeout ends the variant's trials as failed with the Pods' own reason, and the
next variant runs. Every other variant's copy is deleted. All of it is level-based: after a
restart the copies are found again by their labels, and what status recorded (the copy's
creation, its readiness, its deletion) says how long each took and when it has settled."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cxlab.experiments.plan import Trial
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import COMPONENT_COPY
from cxlab.experiments.service_copy import copy_name
from cxlab.experiments.service_window import CopyMeasure
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.spec.service import Variant
from cxlab.experiments.status import ServiceVariantStatus, TrialEntry
from cxlab_contract.durations import parse_duration

# A deleted copy's Deployment outlives its last Pod for a moment (foreground deletion): no
# Pod event says when it is gone, so a pass waiting on it looks again this soon.
GONE_RECHECK_SECONDS = 0.5
# A copy whose Pods are Ready and whose Service does not list them yet is read again this soon.
ENDPOINTS_RECHECK_SECONDS = 0.1
# Waiting reasons no wait can cure: the variant ends at once, not at its readyTimeout.
HOPELESS = frozenset({"ErrImageNeverPull", "InvalidImageName"})
# Waiting reasons of a container on its way up, not trouble.
STARTING = frozenset({"ContainerCreating", "PodInitializing"})

STARTING_PHASE, READY, DELETING, DELETED, FAILED = (
    "Starting", "Ready", "Deleting", "Deleted", "Failed",
)  # fmt: skip


@dataclass(frozen=True)
class ServiceGate:
    """What the trials' decision takes from the copies (cxlab.experiments.decide): which
    variant runs, whether its copy is Ready, and the variants whose copy never got Ready."""

    current: int | None
    ready: bool
    failed: Mapping[int, str] = field(default_factory=dict)
    measure: CopyMeasure | None = None  # the running variant's trials' figures

    def attach(self, entries: list[TrialEntry]) -> None:
        """The service's figures into the entries of trials that ended against the copy."""
        if self.measure is not None:
            self.measure.attach(entries)

    def runs(self, trial: Trial) -> bool:
        """Whether the trial may start now."""
        return self.ready and trial.service_variant == self.current


@dataclass(frozen=True)
class CopyView:
    """A copy's Deployment as listed (by its labels)."""

    variant: int
    replicas: int
    deleting: bool = False
    cpu_limit: bool = False  # a container of its Pods has one: CFS throttling is read


@dataclass
class ServicePlan:
    current: int | None = None  # the variant that runs now (None: every one has ended)
    ready: bool = False  # its copy is Ready: its trials may start
    create: Variant | None = None  # the copy (Deployment and Service) to make now
    delete: list[int] = field(default_factory=list)  # variants whose Deployment goes
    delete_services: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # variant → why its trials failed
    statuses: list[ServiceVariantStatus] = field(default_factory=list)
    recheck_seconds: float | None = None
    became_ready: list[ServiceVariantStatus] = field(default_factory=list)  # in this pass
    gone: list[ServiceVariantStatus] = field(default_factory=list)  # seen gone in this pass

    @property
    def gate(self) -> ServiceGate:
        return ServiceGate(self.current, self.ready, dict(self.failed))


@dataclass(frozen=True)
class Copies:
    """What a pass sees of an experiment's copies."""

    deployments: Mapping[int, CopyView]
    services: Collection[int]
    pods: Sequence[PodView]  # the experiment's Pods (the copies' among them)
    # Variants whose copy could not be made (the user's Deployment or Service missing, the
    # apiserver refused it), and why: their trials fail.
    refused: Mapping[int, str] = field(default_factory=dict)
    # The ready endpoints of each copy's Service (its EndpointSlices), read once its Pods
    # are Ready: the load goes to the Service, which routes only to endpoints it lists.
    endpoints: Mapping[int, int] = field(default_factory=dict)

    def pods_of(self, variant: int) -> list[PodView]:
        return [p for p in self.pods if p.component == COMPONENT_COPY and p.variant == variant]

    def left_besides(self, variant: int | None) -> bool:
        """Whether a copy of another variant is still there: a Pod of it, or its Deployment
        unless that is being deleted. Deleted in the foreground, a Deployment outlives its
        last Pod by a moment and makes none meanwhile (its ReplicaSet is being deleted too):
        nothing of it runs, and no event says when the object goes (a look every
        GONE_RECHECK_SECONDS cost each variant about 0.5 s: make bench-service)."""
        if any(v != variant and not view.deleting for v, view in self.deployments.items()):
            return True
        return any(p.component == COMPONENT_COPY and p.variant != variant for p in self.pods)


def plan_copies(
    spec: ExperimentSpec,
    experiment: str,
    trials: Sequence[Trial],
    ended: Collection[str],
    copies: Copies,
    old: Sequence[ServiceVariantStatus],
    now: datetime,
) -> ServicePlan:
    """What to do about the copies once the trials in `ended` have ended (`old`: the
    variants' statuses as recorded)."""
    assert spec.service is not None
    plan = ServicePlan()
    variants = copy_variants(spec, trials)
    statuses = {s.index: s.model_copy() for s in old}
    for index, variant in variants.items():
        statuses.setdefault(index, ServiceVariantStatus(index=index, name=variant.name))
    done = set(ended)
    timeout = parse_duration(spec.service.ready_timeout)
    settle = parse_duration(spec.service.settle)
    while True:
        plan.current = _current(variants, trials, done)
        if plan.current is None:
            break
        status = statuses[plan.current]
        why = copies.refused.get(plan.current)
        if why is not None:
            status.phase, status.reason, status.message = FAILED, "CopyRefused", why
        elif plan.current not in copies.deployments:
            break
        else:
            why = _readiness(plan, status, copies, timeout, settle, now)
            if why is None:
                break
        plan.failed[plan.current] = why
        done |= {t.name for t in trials if t.service_variant == plan.current}
    _let_go(plan, statuses, copies, now)
    _make(plan, statuses, variants, copies, experiment, now)
    plan.statuses = [statuses[i] for i in sorted(statuses)]
    return plan


def copy_variants(spec: ExperimentSpec, trials: Sequence[Trial]) -> dict[int, Variant]:
    """Every copy the trials run against, by index: the spec's variants, then each
    verification's of the service's plan (its chosen variant at its replicas)."""
    assert spec.service is not None
    variants = {v.index: v for v in spec.service.variant_list()}
    for trial in trials:
        if trial.service_replicas and trial.service_variant not in variants:
            variants[trial.service_variant] = spec.service.copy_variant(
                trial.service_variant, trial.service, trial.service_replicas
            )
    return variants


def copy_indexes(spec: ExperimentSpec) -> list[int]:
    """Every copy index the experiment may make: its variants', then one per verification
    attempt of the service's plan and its run one replica fewer."""
    assert spec.service is not None
    count = len(spec.service.variant_list())
    verify = spec.capacity.verifying if spec.capacity else None
    extra = verify.max_attempts + 1 if verify is not None else 0
    return list(range(1, count + extra + 1))


def _current(
    variants: Mapping[int, Variant], trials: Sequence[Trial], done: set[str]
) -> int | None:
    left = {t.service_variant for t in trials if t.name not in done}
    return next((i for i in sorted(variants) if i in left), None)


def _readiness(
    plan: ServicePlan,
    status: ServiceVariantStatus,
    copies: Copies,
    timeout: float,
    settle: float,
    now: datetime,
) -> str | None:
    """Whether the current variant's copy is Ready and settled (plan.ready), still on its
    way (when to look again), or will not get Ready: why, for its trials' messages."""
    assert plan.current is not None
    view = copies.deployments[plan.current]
    pods = [p for p in copies.pods_of(plan.current) if not p.deleting]
    if view.deleting:
        return None
    if status.ready_seconds is not None:
        # Ready once: its trials run once it has settled. A replica that stops being Ready
        # under the load (a probe queued behind the requests) shows in the trials' own
        # failures; it does not end the variant.
        _settled(plan, status, settle, now)
        return None
    pods_ready = sum(1 for p in pods if p.ready) >= view.replicas
    if pods_ready and copies.endpoints.get(plan.current, 0) < view.replicas:
        # the Pods are Ready, the Service does not list them yet: no Pod event will say
        plan.recheck_seconds = _sooner(plan.recheck_seconds, ENDPOINTS_RECHECK_SECONDS)
        return None
    if pods_ready and plan.current in copies.services:
        if status.phase != READY:
            status.phase = READY
            if status.created_at is not None and status.ready_seconds is None:
                status.ready_seconds = round((now - status.created_at).total_seconds(), 3)
            plan.became_ready.append(status)
        _settled(plan, status, settle, now)
        return None
    created = status.created_at or now
    waited = (now - created).total_seconds()
    reason, message = not_ready(pods)
    if waited < timeout and reason not in HOPELESS:
        status.phase = STARTING_PHASE
        plan.recheck_seconds = _sooner(plan.recheck_seconds, timeout - waited + 0.05)
        return None
    status.phase, status.reason = FAILED, reason
    status.message = (
        f"variant {status.name}: its copy {status.copy_name} was not Ready within "
        f"{waited:.0f} s (service.readyTimeout {timeout:g} s): {reason}: {message}"
    )[:1000]
    return status.message


def _settled(plan: ServicePlan, status: ServiceVariantStatus, settle: float,
             now: datetime) -> None:  # fmt: skip
    """The copy's trials may start once it has been Ready for service.settle; until then the
    pass looks again when it will have."""
    if status.created_at is None or status.ready_seconds is None:
        plan.ready = True
        return
    left = status.ready_seconds + settle - (now - status.created_at).total_seconds()
    if left <= 0:
        plan.ready = True
    else:
        plan.recheck_seconds = _sooner(plan.recheck_seconds, left + 0.05)


def not_ready(pods: Sequence[PodView]) -> tuple[str, str]:
    """The Pods' own reason why a copy is not Ready, and its message."""
    for pod in pods:
        if pod.unschedulable:
            return "Unschedulable", pod.unschedulable
    for pod in pods:
        if pod.last_termination_reason == "OOMKilled":
            return "OOMKilled", f"Pod {pod.name}'s container was killed for its memory limit"
        if pod.waiting_reason and pod.waiting_reason not in STARTING:
            return pod.waiting_reason, pod.waiting_message or f"Pod {pod.name}"
        if pod.termination_reason:
            return pod.termination_reason, f"Pod {pod.name} exited ({pod.exit_code})"
    if not pods:
        return "NoPods", "its ReplicaSet made no Pod (a quota or an admission policy: its events)"
    starting = [p for p in pods if not p.ready]
    if starting and starting[0].waiting_reason:
        return starting[0].waiting_reason, f"Pod {starting[0].name}"
    return "NotReady", "its containers run but are not Ready (their readiness probe)"


def _let_go(
    plan: ServicePlan,
    statuses: dict[int, ServiceVariantStatus],
    copies: Copies,
    now: datetime,
) -> None:
    """Every copy but the current variant's goes; one seen gone has its deletion timed."""
    for index, view in copies.deployments.items():
        if index == plan.current:
            continue
        status = statuses.get(index)
        if not view.deleting:
            plan.delete.append(index)
        if status is not None and status.deleting_since is None:
            status.deleting_since = now
            status.phase = status.phase if status.phase == FAILED else DELETING
    plan.delete_services = [i for i in copies.services if i != plan.current]
    for index, status in statuses.items():
        if status.deleting_since is None or status.deleted_seconds is not None:
            continue
        if index in copies.deployments or copies.pods_of(index):
            continue
        status.deleted_seconds = round((now - status.deleting_since).total_seconds(), 3)
        status.phase = status.phase if status.phase == FAILED else DELETED
        plan.gone.append(status)
    if copies.left_besides(plan.current) and plan.current is not None:
        plan.recheck_seconds = _sooner(plan.recheck_seconds, GONE_RECHECK_SECONDS)


def _make(
    plan: ServicePlan,
    statuses: dict[int, ServiceVariantStatus],
    variants: Mapping[int, Variant],
    copies: Copies,
    experiment: str,
    now: datetime,
) -> None:
    """The current variant's copy, once no other is left; made again if a part is missing
    (a crash between its two creates, someone deleted it)."""
    current = plan.current
    if current is None or copies.left_besides(current):
        return
    if current in copies.deployments and current in copies.services:
        return
    plan.create = variants[current]
    status = statuses[current]
    status.copy_name = copy_name(experiment, current)
    if status.ready_seconds is not None:  # it was Ready and has gone (deleted by someone)
        status.created_at = status.ready_seconds = None
        status.phase = None
    if status.created_at is None:
        status.created_at = now
    if status.phase is None:
        status.phase = STARTING_PHASE


def _sooner(one: float | None, other: float) -> float:
    return other if one is None else min(one, other)


def copies_left(statuses: Sequence[ServiceVariantStatus]) -> bool:
    """Whether status says a copy may still be there: made, and not seen gone. A finished
    experiment's last copy outlives its last trial by its deletion (seconds): until status
    says it is gone, the queue keeps its service for it (cxlab.experiments.queue)."""
    return any(s.created_at is not None and s.deleted_seconds is None for s in statuses)


def seen_gone(
    statuses: Sequence[ServiceVariantStatus], now: datetime
) -> list[ServiceVariantStatus]:
    """The variants' statuses once no copy is left (a finished experiment's pass saw none):
    each still open is Deleted, its deletion timed from when it began (0 if unknown)."""
    gone = []
    for status in statuses:
        status = status.model_copy()
        if status.created_at is not None and status.deleted_seconds is None:
            since = status.deleting_since or now
            status.deleted_seconds = round(max((now - since).total_seconds(), 0.0), 3)
            status.phase = status.phase if status.phase == FAILED else DELETED
        gone.append(status)
    return gone
