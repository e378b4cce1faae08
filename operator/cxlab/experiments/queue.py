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

Everything here derives from the resources themselves (creation time, priority, phase,
Pods), never from the operator's memory: a restarted operator computes the same queue, so
nobody loses their place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from cxlab.experiments.fields import SpecError
from cxlab.experiments.nodes import Held, NodeView, Request, placed
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import API_VERSION, KIND, ExperimentSpec
from cxlab.times import parse_time

AGING_SECONDS = 300.0


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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def held(self) -> list[Held]:
        on_nodes = [Held(self.request, node) for node in self.bound[: self.slots]]
        rest = [Held(self.request) for _ in range(max(0, self.slots - len(on_nodes)))]
        return on_nodes + rest


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


def verdict(
    me: Candidate, candidates: list[Candidate], nodes: list[NodeView], now: datetime
) -> Verdict:
    """Whether `me` (waiting) is admitted now; else where it stands and why it waits."""
    others = [c for c in candidates if c.key != me.key]
    waiting = order([c for c in others if not c.admitted] + [me], now)
    capacity = placed(nodes, [slot for c in others if c.admitted for slot in c.held()])
    users = sorted(c.key for c in others if c.admitted)
    position = [c.key for c in waiting].index(me.key) + 1
    for ahead in waiting[: position - 1]:
        if not capacity.fits(ahead.request):
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
    if capacity.fits(me.request, me.pods):
        return Verdict(True, 0, len(waiting) - 1, None, "admitted")
    named = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
    return Verdict(
        False, position, len(waiting), None,
        f"waiting for capacity (position {position} of {len(waiting)}): the nodes matching "
        f"its placement are in use" + (f" by {named}" if named else ""),
    )  # fmt: skip


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
    if status.get("phase") in ("Succeeded", "Failed") or metadata.get("deletionTimestamp"):
        return None  # being deleted: its Pods go with it
    started = status.get("startedSpec")
    text = started if started else json.dumps(body.get("spec") or {}, sort_keys=True)
    seen = _queue_view(metadata["name"], text, bool(started))
    if seen is None:
        return None
    return _candidate(body, now, *seen)


@lru_cache(maxsize=1024)
def _queue_view(name: str, spec: str, started: bool) -> tuple[Request, int, int, int, int] | None:
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
    trials = plan_trials(parsed)
    pods = max(t.pods for t in trials)
    return Request.of(parsed), parsed.priority, parsed.parallelism, len(trials), pods


def candidate(body: dict[str, Any], spec: ExperimentSpec, now: datetime) -> Candidate:
    """An unfinished experiment whose spec is already read, as the queue sees it."""
    trials = plan_trials(spec)
    pods = max(t.pods for t in trials)
    return _candidate(
        body, now, Request.of(spec), spec.priority, spec.parallelism, len(trials), pods
    )


def _candidate(
    body: dict[str, Any], now: datetime, request: Request, priority: int, parallelism: int,
    trials: int, pods: int,
) -> Candidate:  # fmt: skip
    """The experiment in `body` with its spec's part of the queue's view: what its status
    adds (trials left, admitted) and its creation time."""
    metadata, status = body["metadata"], body.get("status") or {}
    left = trials - len(status.get("trials") or [])
    return Candidate(
        namespace=metadata.get("namespace") or "",
        name=metadata["name"],
        created=candidate_created(body, now),
        priority=priority,
        request=request,
        slots=max(0, min(parallelism, left)) * pods,
        admitted=status.get("phase") == "Running",
        pods=pods,
    )


def candidate_created(body: dict[str, Any], now: datetime) -> datetime:
    """An experiment's creation time (`now` while the apiserver has not set it)."""
    created = (body.get("metadata") or {}).get("creationTimestamp")
    return parse_time(str(created)) if created else now


def with_nodes(candidate: Candidate, nodes: list[str]) -> Candidate:
    return replace(candidate, bound=tuple(nodes))
