"""Admission, within a pass: whether an experiment that has started no trial may start now
(cxlab.experiments.queue decides; here the Nodes are read, at most every few seconds), and
where it stands while Kueue gates its Pods."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from cxlab.experiments.decide import Decision, Observed, fail_experiment
from cxlab.experiments.nodes import Capacity, NodeView, Request, never_fits, view_node
from cxlab.experiments.queue import (
    Candidate,
    candidate,
    candidate_created,
    verdict,
    with_copy,
)
from cxlab.experiments.rate_search import grown_pods
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ExperimentStatus, QueuePlace, ServiceCopyRequest
from cxlab_contract.durations import parse_duration

# Nodes are listed at most this often (capacity changes slowly; every waiting experiment
# asks on every pass, and a list of a hundred Nodes costs the operator tens of milliseconds).
NODES_CACHE_SECONDS = 5.0


class NodeReader:
    """The Nodes, read at most every NODES_CACHE_SECONDS by one thread at a time."""

    def __init__(self, list_nodes: Any) -> None:
        self._list = list_nodes
        self._read: tuple[float, list[NodeView]] | None = None
        self._lock = threading.Lock()

    def __call__(self) -> list[NodeView]:
        with self._lock:
            read = self._read
            if read is None or time.monotonic() - read[0] > NODES_CACHE_SECONDS:
                read = (time.monotonic(), [view_node(n) for n in self._list()])
                self._read = read
            return read[1]


@dataclass(frozen=True)
class Admission:
    """What the queue says of an experiment in this pass."""

    ruling: Decision | None = None  # wait (no Pods), or fail before any Pod; None: go on
    place: QueuePlace | None = None  # its place while it waits
    waited: float | None = None  # seconds it waited, in the pass that admits it


def impossible(
    spec: ExperimentSpec, observed: Observed, admitted: bool, nodes: NodeReader
) -> str | None:
    """Why no node could ever hold a trial, if none could. The Nodes matter before admission
    and to a Pod the scheduler cannot place (busy or impossible?); other passes do not read
    them."""
    if admitted and not any(p.unschedulable for p in observed.pods):
        return None
    return never_fits(Request.of(spec), nodes())


def admit(
    body: dict[str, Any],
    observed: Observed,
    why_impossible: str | None,
    queue: list[Candidate],
    nodes: NodeReader,
    held: bool,
    copy: ServiceCopyRequest | None = None,
) -> Admission:
    """An experiment that has started no trial yet: it fails at once if no node could ever
    hold a trial (beside its service's copy, `copy`), or once it has waited
    spec.queueTimeout; it is admitted when the queue says so; else it keeps its place, with
    no Pods. `held`: an earlier pass kept it waiting; admitted on its first pass, it waited
    for nothing (the time since its creation is the watch's and the operator's, not the
    queue's)."""
    spec, moment = observed.spec, observed.now
    me = with_copy(candidate(body, spec, moment), copy)  # the spec this pass read
    waited = max(0.0, (moment - me.created).total_seconds())
    if why_impossible:
        message = f"no trial can ever be scheduled: {why_impossible}"
        return Admission(fail_experiment(observed, message, "DoesNotFit"))
    # even empty (a cordoned node may come back: it can make one wait, never fail)
    empty = Capacity([replace(n, cordoned=False) for n in nodes()])
    if copy is not None and not empty.fits_all(me.needs()):
        grown = " or search.rate.maxPods (a probe may grow to it)" if grown_pods(spec) > 1 else ""
        message = (
            f"no trial can ever be scheduled beside its service's copy: {copy.replicas} "
            f"replica(s) of {copy.cpu:g} CPU(s) and {copy.memory_bytes / 2**20:.0f} MiB each, "
            f"and {me.pods} trial Pod(s) of {me.request.cpu.normalize():f} CPU(s), do not fit "
            f"the nodes even empty: lower the variants' replicas or resources, or "
            f"spec.resources{grown}"
        )
        return Admission(fail_experiment(observed, message, "DoesNotFit"))
    if spec.queue_name:
        return Admission()  # Kueue admits its Pods: they are created (gated) now
    seen = verdict(me, [c for c in queue if c.key != me.key] + [me], nodes(), moment)
    if seen.admit:
        return Admission(waited=waited if held else 0.0)
    if spec.queue_timeout and waited >= parse_duration(spec.queue_timeout):
        message = (
            f"waited {waited:.0f} s for capacity, longer than spec.queueTimeout "
            f"({spec.queue_timeout}): {seen.message}"
        )
        return Admission(fail_experiment(observed, message, "QueueTimeout"))
    place = QueuePlace(
        position=seen.position, length=seen.length, behind=seen.behind, service=seen.service,
        since=me.created, message=seen.message,
    )  # fmt: skip
    return Admission(Decision(), place)


def kueue_place(
    body: dict[str, Any], status: ExperimentStatus, spec: ExperimentSpec, decision: Decision,
    moment: datetime,
) -> Admission:  # fmt: skip
    """Before its first trial ends, an experiment Kueue admits is queued while all its trial
    Pods are gated; how long it waited is recorded when the first is admitted."""
    gated = [p for _, p in decision.running if p.gated]
    since = candidate_created(body, moment)
    if decision.running and len(gated) == len(decision.running):
        message = (
            f"waiting for admission by Kueue (LocalQueue {spec.queue_name}): "
            f"{len(gated)} trial Pod(s) gated"
        )
        return Admission(place=QueuePlace(since=since, message=message))
    if status.queue is not None:  # admitted in this pass
        return Admission(waited=max(0.0, (moment - since).total_seconds()))
    return Admission()
