"""The trial hosts of an experiment with isolation: process (pure; decide calls it).

A trial host is a Pod with a trial's resources and placement that runs the trials the
operator posts to it, one at a time, each a fresh process (cxlab_runner.trial_host). There
are as many as trials may run at once (parallelism), fewer once fewer trials are left, none
once the experiment has ended. A host that ended, or that stopped answering, is lost: its
trial is a lost attempt (its view goes with the host), and another host takes its place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import COMPONENT_HOST

# A host's reason when the operator could not reach it for a while: it is let go, as lost.
UNREACHABLE = "HostUnreachable"


@dataclass
class HostPlan:
    create: list[int] = field(default_factory=list)  # host indexes to create
    delete: list[str] = field(default_factory=list)  # host Pod names to let go
    # (trial name → host name) for the trials that start now, at most `slots` of them.
    assign: dict[str, str] = field(default_factory=dict)


def hosts_of(pods: Sequence[PodView]) -> list[PodView]:
    return [p for p in pods if p.component == COMPONENT_HOST]


def unlisted(pods: Sequence[PodView]) -> bool:
    """A host runs whose trials the operator has not read yet (it just started, or the
    operator did): until then a trial counted in status and not seen may be running there."""
    return any(h.live and h.ready and not h.trials_listed for h in hosts_of(pods))


def plan_hosts(
    pods: Sequence[PodView],
    busy: set[str],
    pending: Sequence[str],
    wanted: int,
) -> HostPlan:
    """`busy`: hosts running a trial; `pending`: the trials that may start now, in order;
    `wanted`: hosts the experiment needs (trials left, at most its parallelism; 0 once it
    has ended). Each pending trial goes to an idle Ready host; hosts that ended are let go,
    and so are idle ones beyond `wanted`; new ones are made up to `wanted`."""
    plan = HostPlan()
    hosts = hosts_of(pods)
    live = [h for h in hosts if h.live]
    for host in hosts:
        if not host.live and not host.deleting:
            plan.delete.append(host.name)
    idle = [h for h in live if h.name not in busy]
    extra = len(live) - wanted
    # the idle ones that do not answer yet go first: one that does is worth keeping
    for host in sorted(idle, key=lambda h: (h.trials_listed, h.name))[: max(0, extra)]:
        plan.delete.append(host.name)
    kept = [h for h in idle if h.name not in plan.delete]
    # one that answers takes trials (its first waits for its fork server), Ready or not yet
    ready = [h for h in kept if h.trials_listed and h.ip]
    for trial, host in zip(pending, sorted(ready, key=lambda h: h.name), strict=False):
        plan.assign[trial] = host.name
    used = {_index(h.name) for h in hosts}
    index = 0
    for _ in range(max(0, wanted - len(live))):
        while index in used:
            index += 1
        plan.create.append(index)
        used.add(index)
    return plan


def _index(name: str) -> int:
    """The index in a host's name (experiment-hostN)."""
    digits = name.rpartition("-host")[2]
    return int(digits) if digits.isdigit() else -1
