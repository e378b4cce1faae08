"""The queue of experiments waiting for capacity (pure): who is admitted, who waits behind
whom.

The rule, chosen so that nobody starves:
- Waiting experiments are ordered by priority (spec.priority, higher first), then by
  creation time (FIFO), then by namespace and name. A waiting experiment's priority grows by
  one for every AGING_SECONDS it has waited, so a low priority is late, never forgotten.
- Admission follows that order strictly: an experiment is admitted only when everything
  ahead of it fits too (or is admitted already). No backfilling: a small experiment never
  overtakes a big one that is waiting for room, so the big one cannot be starved by a stream
  of small ones; the small one waits only as long as the big one ahead runs.
- An admitted experiment holds min(parallelism, trials left) trial slots (each of as many
  Pods as its largest trial has) until it finishes:
  the gap between two of its trials is not room for someone else.
- An experiment with a service subject also holds its copy (status.serviceCopy: the
  largest variant's replicas x a Pod's requests) beside its trial slots, and is admitted
  only when a trial's Pods and the copy fit together: a copy that cannot be scheduled
  would end its variant.
- One run at a time per service: experiments that name the same Deployment or Service (see
  services_of) take turns in that same order, so two capacity runs never measure each
  other. One waiting for its turn holds no room, so experiments of other services are
  admitted past it; but it keeps its place on its service ahead of later ones. A finished
  experiment whose last copy is still being deleted keeps its service and the copy's room
  until its status says the copy is gone (copy_left).

Everything here derives from the resources themselves (creation time, priority, phase,
Pods), never from the operator's memory: a restarted operator computes the same queue, so
nobody loses their place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from cxlab.experiments.fields import SpecError
from cxlab.experiments.nodes import Held, NodeView, Request, placed
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.rate_search import grown_pods
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.service_copy import copy_name
from cxlab.experiments.service_run import copies_left, copy_indexes
from cxlab.experiments.spec import API_VERSION, KIND, ExperimentSpec
from cxlab.experiments.status import ServiceCopyRequest, ServiceVariantStatus
from cxlab.times import parse_time

AGING_SECONDS = 300.0
# A service as named in a spec: (kind, namespace or None for the experiment's own, name).
Named = tuple[str, str | None, str]
# What the queue reads of a spec: request, priority, parallelism, trials, pods, services.
_View = tuple[Request, int, int, int, int, tuple[Named, ...]]


@dataclass(frozen=True)
class Candidate:
    """One unfinished experiment, as the queue sees it."""

    namespace: str
    name: str
    created: datetime
    priority: int
    request: Request
    slots: int  # Pod slots it holds once admitted: min(parallelism, trials left) x pods
    admitted: bool
    bound: tuple[str, ...] = ()  # nodes its live trial Pods run on
    pods: int = 1  # Pods of its largest trial: admitted when that many fit
    # the Deployments and Services it runs against ("Service lab/api"): services_of
    services: frozenset[str] = frozenset()
    copy: Request | None = None  # one Pod of its service's copy (status.serviceCopy)
    copy_pods: int = 0  # the copy's replicas

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def held(self) -> list[Held]:
        on_nodes = [Held(self.request, node) for node in self.bound[: self.slots]]
        rest = [Held(self.request) for _ in range(max(0, self.slots - len(on_nodes)))]
        return on_nodes + rest + [Held(c) for c in self._copies()]

    def needs(self) -> list[Request]:
        """The Pods that must fit at once for it to start: a trial's and its copy's."""
        return [self.request] * self.pods + self._copies()

    def _copies(self) -> list[Request]:
        return [self.copy] * self.copy_pods if self.copy is not None else []


def effective_priority(candidate: Candidate, now: datetime) -> int:
    waited = max(0.0, (now - candidate.created).total_seconds())
    return candidate.priority + int(waited // AGING_SECONDS)


def order(waiting: list[Candidate], now: datetime) -> list[Candidate]:
    return sorted(
        waiting,
        key=lambda c: (-effective_priority(c, now), c.created, c.namespace, c.name),
    )


@dataclass(frozen=True)
class Verdict:
    admit: bool
    position: int  # 1-based place among the waiting (0 once admitted)
    length: int  # experiments waiting
    behind: str | None  # namespace/name of the first one ahead that does not fit yet
    message: str
    service: str | None = None  # the service whose turn it waits for ("Service lab/api")


def verdict(
    me: Candidate, candidates: list[Candidate], nodes: list[NodeView], now: datetime
) -> Verdict:
    """Whether `me` (waiting) is admitted now; else where it stands and why it waits."""
    others = [c for c in candidates if c.key != me.key]
    waiting = order([c for c in others if not c.admitted] + [me], now)
    capacity = placed(nodes, [slot for c in others if c.admitted for slot in c.held()])
    users = sorted(c.key for c in others if c.admitted)
    # each service's turn: the admitted experiment running against it, else the first in line
    turns = {s: c.key for c in sorted(others, key=_key) if c.admitted for s in c.services}
    position = [c.key for c in waiting].index(me.key) + 1
    for ahead in waiting[: position - 1]:
        if _waits_its_turn(ahead, turns):
            _claim(ahead, turns)  # it holds no room yet, but its place on its services
            continue
        if not capacity.fits_all(ahead.needs()):
            return Verdict(
                False, position, len(waiting), ahead.key,
                f"waiting behind {ahead.key} (position {position} of {len(waiting)}): "
                f"it is first in line and the cluster has no room for its trials yet",
            )  # fmt: skip
        # It is admitted in its own pass: count it as holding already. (A waiting experiment
        # has no live Pods, so its slots are all unbound: placed after the bound ones.)
        for slot in ahead.held():
            capacity.place(slot)
        users.append(ahead.key)
        _claim(ahead, turns)
    shared = sorted(s for s in me.services if s in turns)
    if shared:
        holder = turns[shared[0]]
        return Verdict(
            False, position, len(waiting), holder,
            f"waiting for {holder}, which runs against the same service ({shared[0]}), "
            f"to finish (position {position} of {len(waiting)}): one run at a time per "
            f"service, so that two runs never measure each other",
            service=shared[0],
        )  # fmt: skip
    if capacity.fits_all(me.needs()):
        return Verdict(True, 0, len(waiting) - 1, None, "admitted")
    named = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
    return Verdict(
        False, position, len(waiting), None,
        f"waiting for capacity (position {position} of {len(waiting)}): the nodes matching "
        f"its placement are in use" + (f" by {named}" if named else ""),
    )  # fmt: skip


def _key(candidate: Candidate) -> str:
    return candidate.key


def _waits_its_turn(candidate: Candidate, turns: dict[str, str]) -> bool:
    return any(s in turns for s in candidate.services)


def _claim(candidate: Candidate, turns: dict[str, str]) -> None:
    for service in candidate.services:
        turns.setdefault(service, candidate.key)


def services_of(spec: ExperimentSpec, name: str) -> tuple[Named, ...]:
    """The Deployments and Services an experiment runs against, by name: its subject
    (spec.service.deployment) and its variants' copies' Services, its target Service, or
    the in-cluster Service a url target names (name.namespace.svc[.cluster.local]).

    Keyed on names, not resolved through the apiserver (which Service selects which Pods):
    the queue is computed from the experiments alone, the same by every pass and after a
    restart, and a Service's selector changes with no experiment's event to wake the queue.
    The common pair needs no lookup: an experiment with a Deployment as its subject must
    also name the Service in front of it (workload.target.service), so it collides with
    one that targets that Service. A second Service over the same Pods is not seen."""
    found: list[Named] = []
    target = spec.workload.target
    if target is not None and target.service is not None:
        found.append(("Service", target.service.namespace, target.service.name))
    elif target is not None and target.url is not None:
        found.extend(_url_service(target.url))
    if spec.service is not None and spec.service.deployment is not None:
        found.append(("Deployment", None, spec.service.deployment))
        found += [("Service", None, copy_name(name, i)) for i in copy_indexes(spec)]
    return tuple(dict.fromkeys(found))


def _url_service(url: str) -> Iterable[Named]:
    parts = (urlsplit(url).hostname or "").split(".")
    if len(parts) in (3, 5) and parts[2] == "svc" and parts[3:] in ([], ["cluster", "local"]):
        yield ("Service", parts[1], parts[0])


def qualified(named: Iterable[Named], namespace: str) -> frozenset[str]:
    """'Service lab/api': the namespace an unqualified name is in, the experiment's."""
    return frozenset(f"{kind} {where or namespace}/{name}" for kind, where, name in named)


def spec_of(body: dict[str, Any]) -> ExperimentSpec:
    """The spec an experiment runs with: the one it started with once it has started."""
    started = (body.get("status") or {}).get("startedSpec")
    document = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": body["metadata"]["name"]},
        "spec": json.loads(started) if started else body.get("spec") or {},
    }
    return parse_experiment(document).spec


def candidate_of(body: dict[str, Any], now: datetime) -> Candidate | None:
    """An experiment as the queue sees it; None once finished or when its spec cannot run
    (the reconciler fails those). `now` stands in for a creation time not yet set."""
    metadata, status = body["metadata"], body.get("status") or {}
    if metadata.get("deletionTimestamp"):
        return None  # being deleted: its Pods go with it
    if status.get("phase") in ("Succeeded", "Failed") and not copy_left(status):
        return None
    started = status.get("startedSpec")
    text = started if started else json.dumps(body.get("spec") or {}, sort_keys=True)
    seen = _queue_view(metadata["name"], text, bool(started))
    if seen is None:
        return None
    return _candidate(body, now, *seen)


@lru_cache(maxsize=1024)
def _queue_view(name: str, spec: str, started: bool) -> _View | None:
    """What the queue needs of a spec (its text), read once: kopf's index asks on every
    event of the experiment (each status write), on the event loop, and reading and
    planning a spec is milliseconds. None: it cannot run, or Kueue admits it (to this queue
    its Pods are like any other workload's)."""
    body = {"metadata": {"name": name}, "spec": {} if started else json.loads(spec)}
    if started:
        body["status"] = {"startedSpec": spec}
    try:
        parsed = spec_of(body)
    except (SpecError, ValidationError, ValueError):
        return None
    if parsed.queue_name:
        return None
    return _view(parsed, name)


def _view(spec: ExperimentSpec, name: str) -> _View:
    trials = plan_trials(spec)
    # a probe grown beside the copy takes its room too: the queue holds it from the start
    pods = max(max(t.pods for t in trials), grown_pods(spec))
    services = services_of(spec, name)
    return Request.of(spec), spec.priority, spec.parallelism, len(trials), pods, services


def candidate(body: dict[str, Any], spec: ExperimentSpec, now: datetime) -> Candidate:
    """An unfinished experiment whose spec is already read, as the queue sees it."""
    return _candidate(body, now, *_view(spec, body["metadata"]["name"]))


def _candidate(
    body: dict[str, Any], now: datetime, request: Request, priority: int, parallelism: int,
    trials: int, pods: int, services: tuple[Named, ...],
) -> Candidate:  # fmt: skip
    """The experiment in `body` with its spec's part of the queue's view: what its status
    adds (trials left, admitted) and its creation time."""
    metadata, status = body["metadata"], body.get("status") or {}
    finished = status.get("phase") in ("Succeeded", "Failed")  # its last copy still going
    left = 0 if finished else trials - len(status.get("trials") or [])
    namespace = metadata.get("namespace") or ""
    return Candidate(
        namespace=namespace,
        name=metadata["name"],
        created=candidate_created(body, now),
        priority=priority,
        request=request,
        slots=max(0, min(parallelism, left)) * pods,
        # finished with its last copy still going: it keeps that copy's room and service
        admitted=status.get("phase") == "Running" or finished,
        pods=pods,
        services=qualified(services, namespace),
        copy=copy_request_of(status.get("serviceCopy")),
        copy_pods=int((status.get("serviceCopy") or {}).get("replicas") or 0),
    )


def copy_left(status: dict[str, Any]) -> bool:
    """Whether a finished experiment's status (as stored) says a copy of its service may
    still be there (cxlab.experiments.service_run.copies_left). Its last copy is deleted
    after its last trial, in seconds: until its status says the copy is gone, the next run
    of the service waits and the copy's room stays held. Read only for finished ones."""
    variants = status.get("serviceVariants") or []
    return copies_left([ServiceVariantStatus.read(v) for v in variants])


def copy_request_of(written: dict[str, Any] | None) -> Request | None:
    """One Pod of a service's copy as status.serviceCopy recorded it."""
    if not written:
        return None
    return Request(
        cpu=Decimal(str(written.get("cpu") or 0)),
        memory=Decimal(int(written.get("memoryBytes") or 0)),
        node_selector=dict(written.get("nodeSelector") or {}),
        tolerations=tuple(written.get("tolerations") or ()),
        affinity=dict(written.get("affinity") or {}),
    )


def with_copy(candidate: Candidate, copy: ServiceCopyRequest | None) -> Candidate:
    """The candidate with its copy as this pass read it from the user's Deployment."""
    if copy is None:
        return candidate
    return replace(candidate, copy=copy_request_of(copy.document()), copy_pods=copy.replicas)


def candidate_created(body: dict[str, Any], now: datetime) -> datetime:
    """An experiment's creation time (`now` while the apiserver has not set it)."""
    created = (body.get("metadata") or {}).get("creationTimestamp")
    return parse_time(str(created)) if created else now


def with_nodes(candidate: Candidate, nodes: list[str]) -> Candidate:
    return replace(candidate, bound=tuple(nodes))
