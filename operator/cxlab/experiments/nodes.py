"""What the nodes can hold, read from Node objects (pure).

Two questions, kept apart on purpose:
- can a trial ever fit? Some node that matches the experiment's placement has the trial's
  CPUs and memory allocatable even if it ran nothing else. If not, the experiment fails at
  once, with the numbers.
- does a trial fit now? The same, after what admitted experiments hold (see queue.py).

Allocatable already leaves out what the kubelet reserves, the static CPU manager's reserved
cores among it, so a whole-CPU trial fits a node exactly when its allocatable CPUs do.
Placement is matched the way the scheduler matches it for these fields: nodeSelector,
required node affinity, and NoSchedule/NoExecute taints against tolerations. A cordoned node
counts: it may come back, so it can make an experiment wait but never fail.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cxlab.experiments.fields import memory_bytes, quantity
from cxlab.experiments.spec import ExperimentSpec


@dataclass(frozen=True)
class NodeView:
    name: str
    cpu: Decimal  # allocatable CPUs
    memory: Decimal  # allocatable bytes
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    cordoned: bool = False


def view_node(node: Mapping[str, Any]) -> NodeView:
    metadata, spec = node.get("metadata") or {}, node.get("spec") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return NodeView(
        name=metadata.get("name", ""),
        cpu=quantity(allocatable.get("cpu", "0")),
        memory=quantity(allocatable.get("memory", "0")),
        labels=dict(metadata.get("labels") or {}),
        taints=tuple(spec.get("taints") or ()),
        cordoned=bool(spec.get("unschedulable")),
    )


@dataclass(frozen=True)
class Request:
    """What one trial Pod asks for, and where it may go."""

    cpu: Decimal
    memory: Decimal
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    affinity: Mapping[str, Any]
    # Which nodes it may go to, as one comparable value: experiments placed alike share
    # their matching nodes, found once (every experiment's spec is its own object).
    placement: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        where = [self.node_selector, self.tolerations, self.affinity]
        object.__setattr__(self, "placement", json.dumps(where, sort_keys=True, default=str))

    @staticmethod
    def of(spec: ExperimentSpec) -> Request:
        placement = spec.placement
        return Request(
            cpu=Decimal(str(spec.resources.cpu)),  # 0.3, not 0.29999999999999998889...
            memory=Decimal(memory_bytes(spec.resources.memory)),
            node_selector=dict(placement.node_selector or {}),
            tolerations=tuple(placement.tolerations or ()),
            affinity=dict(placement.affinity or {}),
        )


def _requirement(node: NodeView, requirement: Mapping[str, Any]) -> bool:
    value = node.labels.get(requirement.get("key", ""))
    values = list(requirement.get("values") or [])
    operator = requirement.get("operator")
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def _term(node: NodeView, term: Mapping[str, Any]) -> bool:
    fields = {"metadata.name": node.name}
    return all(_requirement(node, r) for r in term.get("matchExpressions") or []) and all(
        fields.get(r.get("key", "")) in (r.get("values") or [])
        if r.get("operator") == "In"
        else fields.get(r.get("key", "")) not in (r.get("values") or [])
        for r in term.get("matchFields") or []
    )


def _tolerated(taint: Mapping[str, Any], tolerations: tuple[Mapping[str, Any], ...]) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        if not key and toleration.get("operator") == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if toleration.get("operator") == "Exists":
            return True
        if (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def matches(node: NodeView, request: Request) -> bool:
    """Whether the scheduler may put the trial on node, resources aside."""
    if any(node.labels.get(k) != v for k, v in request.node_selector.items()):
        return False
    required = (request.affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term(node, t) for t in terms):
        return False
    return all(
        _tolerated(t, request.tolerations)
        for t in node.taints
        if t.get("effect") in ("NoSchedule", "NoExecute")
    )


def _cpus(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _gib(value: Decimal) -> str:
    return f"{float(value) / 2**30:.1f}Gi"


def never_fits(request: Request, nodes: list[NodeView]) -> str | None:
    """Why no node, even empty, can ever hold one trial; None when some can."""
    if not nodes:
        return "the cluster has no nodes"
    matching = [n for n in nodes if matches(n, request)]
    if not matching:
        return (
            f"no node matches spec.placement (nodeSelector, required node affinity, "
            f"tolerations) among the {len(nodes)} node(s): change spec.placement"
        )
    if any(n.cpu >= request.cpu and n.memory >= request.memory for n in matching):
        return None
    largest_cpu = max(matching, key=lambda n: n.cpu)
    if largest_cpu.cpu < request.cpu:
        return (
            f"spec.resources.cpu asks for {_cpus(request.cpu)} CPU(s) per trial; the largest "
            f"node matching the placement ({largest_cpu.name}) offers {_cpus(largest_cpu.cpu)} "
            f"allocatable: lower spec.resources.cpu or add a larger node"
        )
    largest_memory = max(matching, key=lambda n: n.memory)
    if largest_memory.memory < request.memory:
        return (
            f"spec.resources.memory asks for {_gib(request.memory)} per trial; the largest node "
            f"matching the placement ({largest_memory.name}) offers {_gib(largest_memory.memory)}"
            f" allocatable: lower spec.resources.memory or add a larger node"
        )
    return (
        f"no node matching the placement has both {_cpus(request.cpu)} CPU(s) and "
        f"{_gib(request.memory)} allocatable: lower spec.resources"
    )


@dataclass(frozen=True)
class Held:
    """Trial slots an admitted experiment holds: on a node when its Pod is bound there,
    else wherever it fits (its Pods are about to be created)."""

    request: Request
    node: str | None = None


class Capacity:
    """The nodes' free room as held slots are placed on it one by one (bound ones on their
    node, the rest first-fit on the matching node with most free CPU), and whether more
    fits. Each placement's matching nodes are found once, and kept in a heap by free CPU:
    200 experiments holding 2,000 slots on 500 nodes are placed in milliseconds (scanning
    every matching node for every slot, for every waiting experiment's pass, was most of
    the operator's CPU while 200 experiments started)."""

    def __init__(self, nodes: list[NodeView]) -> None:
        self._free = {n.name: [n.cpu, n.memory] for n in nodes if not n.cordoned}
        self._nodes = {n.name: n for n in nodes}
        # placement → names of the free nodes it matches, in the nodes' order
        self._matching: dict[str, list[str]] = {}
        # placement → its matching nodes by free CPU, most first, then the nodes' order:
        # (-free CPU as last seen, position, name). Room only shrinks, so an entry whose CPU
        # is out of date is too high: it comes up early and goes back with its room now.
        self._heaps: dict[str, list[tuple[Decimal, int, str]]] = {}

    def _names(self, request: Request) -> list[str]:
        names = self._matching.get(request.placement)
        if names is None:
            nodes = self._nodes
            names = [n for n in self._free if matches(nodes[n], request)]
            self._matching[request.placement] = names
        return names

    def _roomiest(self, request: Request) -> list[Decimal] | None:
        """The room of the matching node with most free CPU that holds the request (the
        first such node on a tie), or None."""
        heap = self._heaps.get(request.placement)
        if heap is None:
            free = self._free
            heap = [(-free[n][0], i, n) for i, n in enumerate(self._names(request))]
            heapq.heapify(heap)
            self._heaps[request.placement] = heap
        passed = []  # roomy in CPU, short of memory: back in the heap after the search
        found = None
        while heap:
            cpu, position, name = heap[0]
            room = self._free[name]
            if -cpu != room[0]:
                heapq.heapreplace(heap, (-room[0], position, name))
            elif room[0] < request.cpu:
                break  # the roomiest left has too little CPU: so has every other
            elif room[1] >= request.memory:
                found = room
                break
            else:
                passed.append(heapq.heappop(heap))
        for entry in passed:
            heapq.heappush(heap, entry)
        return found

    def place(self, slot: Held) -> None:
        """Take the slot's room; a slot that fits nowhere waits on the scheduler and takes
        nothing here."""
        request = slot.request
        if slot.node in self._free:
            room: list[Decimal] | None = self._free[slot.node]
            assert room is not None
            if not (room[0] >= request.cpu and room[1] >= request.memory):
                room = None
        else:
            room = self._roomiest(request)
        if room is not None:
            room[0] -= request.cpu
            room[1] -= request.memory

    def fits(self, request: Request, pods: int = 1) -> bool:
        """Whether one more trial of `pods` Pods fits now (nothing is taken)."""
        if pods == 1:
            return self._roomiest(request) is not None
        return self.fits_all([request] * pods)

    def fits_all(self, requests: list[Request]) -> bool:
        """Whether these Pods all fit now together (a trial's Pods, a service's copy beside
        them), the largest first, each on the roomiest matching node left (nothing is
        taken)."""
        free = {n: list(room) for n, room in self._free.items()}
        for request in sorted(requests, key=lambda r: (r.cpu, r.memory), reverse=True):
            best: list[Decimal] | None = None
            for name in self._names(request):
                room = free[name]
                holds = room[0] >= request.cpu and room[1] >= request.memory
                if holds and (best is None or room[0] > best[0]):
                    best = room
            if best is None:
                return False
            best[0] -= request.cpu
            best[1] -= request.memory
        return True


def placed(nodes: list[NodeView], held: list[Held]) -> Capacity:
    """The nodes with every held slot placed: bound ones first, on their node."""
    capacity = Capacity(nodes)
    for slot in sorted(held, key=lambda h: h.node is None):
        capacity.place(slot)
    return capacity


def fits_now(request: Request, nodes: list[NodeView], held: list[Held], pods: int = 1) -> bool:
    """Whether one more trial (of `pods` Pods) fits after every held slot is placed (bound
    ones on their node, the rest first-fit on the matching nodes with most room)."""
    return placed(nodes, held).fits(request, pods)


def trials_fitting(request: Request, nodes: list[NodeView], bound: list[str], most: int) -> int:
    """How many more one-Pod trials fit (at most `most`) beside Pods of the same request
    bound to the `bound` nodes. Other workloads' Pods are not seen: an upper bound."""
    capacity = placed(nodes, [Held(request, node) for node in bound])
    count = 0
    while count < most and capacity.fits(request):
        capacity.place(Held(request))
        count += 1
    return count
