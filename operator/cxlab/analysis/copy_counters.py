"""A service variant's copy as the kubelet counts it (pure): its Pods' containers read from the
kubelet's summary API (/stats/summary: each container's CPU counter and working set, as the
container runtime reads its cgroup), cAdvisor's CFS counters (/metrics/cadvisor) and the
Pods' own restart counts, and the figures of a trial's window from the reading at its start
(kept in status, so an operator restarted mid-trial still has it) and the one at its end.

A figure is given only where both readings measured the same thing: a container that
restarted in the window has a new cgroup whose counter began at 0, and the CPU its
predecessor used after the first reading is not known (absent, never the part that is); a
counter the kubelet read before the trial ended is not the trial's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from cxlab.analysis.service_figures import ServiceFigures, per_request
from cxlab.shape import Maybe, Shape
from cxlab.times import parse_time

OOM_KILLED = "OOMKilled"
# A container's CFS counters by their cAdvisor names: (value, timestamp in ms).
THROTTLED, PERIODS = "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_periods_total"
Cfs = Mapping[tuple[str, str], Mapping[str, tuple[int, int | None]]]  # (pod, container) →


class ContainerCount(Shape):
    """One container of a copy's Pod at one reading."""

    name: str
    started_at: Maybe[datetime] = None
    """The container's start as the kubelet reports it: a restart changes it."""
    cpu_nanoseconds: Maybe[int] = None
    """usageCoreNanoSeconds: the container cgroup's CPU counter (absent: the kubelet has
    none, a container not running)."""
    read_at: Maybe[datetime] = None
    """When the kubelet read the CPU counter (its cpu.time, to the second)."""
    working_set_bytes: Maybe[int] = None
    restarts: int = 0
    """The Pod status's restartCount of the container."""
    last_reason: Maybe[str] = None
    """Why the container last terminated (OOMKilled, Error), once it restarted."""
    throttled_periods: Maybe[int] = None
    periods: Maybe[int] = None
    """cAdvisor's CFS counters of the container, when it has them (a CPU limit)."""
    cfs_read_at: Maybe[int] = None
    """cAdvisor's timestamp of those counters (ms): a counter that did not move is stale."""


class PodCount(Shape):
    pod: str
    containers: list[ContainerCount]
    cpu_limit: Maybe[float] = None
    """The CPU its containers' limits allow in all (absent: one has none)."""


class CopyReading(Shape):
    """Every Pod of a copy at one moment (the operator's clock)."""

    read_at: datetime
    pods: list[PodCount]

    def working_set_bytes(self) -> int:
        return sum(c.working_set_bytes or 0 for p in self.pods for c in p.containers)


def summary_pods(summary: Mapping[str, Any], namespace: str, prefix: str) -> dict[str, PodCount]:
    """The Pods of `namespace` whose name starts with `prefix` (a copy's Deployment's Pods)
    in one node's /stats/summary, with their containers' CPU and working set."""
    found = {}
    for pod in summary.get("pods") or []:
        ref = pod.get("podRef") or {}
        if ref.get("namespace") != namespace or not str(ref.get("name", "")).startswith(prefix):
            continue
        containers = []
        for container in pod.get("containers") or []:
            cpu, memory = container.get("cpu") or {}, container.get("memory") or {}
            containers.append(ContainerCount(
                name=container["name"], started_at=_time(container.get("startTime")),
                cpu_nanoseconds=cpu.get("usageCoreNanoSeconds"), read_at=_time(cpu.get("time")),
                working_set_bytes=memory.get("workingSetBytes"),
            ))  # fmt: skip
        found[ref["name"]] = PodCount(pod=ref["name"], containers=containers)
    return found


def with_statuses(
    pods: Mapping[str, PodCount],
    statuses: Mapping[str, Sequence[tuple[str, int, str | None]]],
    cfs: Cfs,
    limits: Mapping[str, float | None] | None = None,
) -> list[PodCount]:
    """The summary's Pods with their containers' restarts and last reasons (the Pod
    statuses: name → (container, restartCount, last reason)), their CFS counters and their
    CPU limits (name → cores)."""
    merged = []
    for name, pod in sorted(pods.items()):
        restarts = {c: (n, why) for c, n, why in statuses.get(name, ())}
        listed = {c.name for c in pod.containers}
        missing = [ContainerCount(name=c) for c in restarts if c not in listed]
        containers = []
        for i, container in enumerate([*pod.containers, *missing]):
            count, why = restarts.get(container.name, (0, None))
            # the Pod's own cgroup's counters, where cAdvisor has none by container: once
            counters = cfs.get((name, container.name)) or (
                cfs.get((name, ""), {}) if i == 0 else {}
            )
            throttled, periods = counters.get(THROTTLED), counters.get(PERIODS)
            containers.append(container.model_copy(update={
                "restarts": count, "last_reason": why,
                "throttled_periods": throttled[0] if throttled and periods else None,
                "periods": periods[0] if throttled and periods else None,
                "cfs_read_at": periods[1] if throttled and periods else None,
            }))  # fmt: skip
        limit = (limits or {}).get(name)
        merged.append(PodCount(pod=name, containers=containers, cpu_limit=limit))
    return merged


def _time(value: Any) -> datetime | None:
    return parse_time(str(value)) if value else None


class ServiceWindow(Shape):
    """A trial's window over the running variant's copy, open while the trial runs (status:
    its variant's serviceVariants entry)."""

    trial: str
    attempt: int
    start: Maybe[CopyReading] = None
    """The copy as read when the trial's Pods were made (absent: the read failed, and the
    trial has no figures)."""
    shared: Maybe[bool] = None
    """Another trial loaded the copy during this window: its figures are not this trial's."""


def window_figures(
    start: CopyReading,
    end: CopyReading,
    peak: int | None,
    samples: int,
    requests: int,
    ended_at: datetime | None = None,
) -> ServiceFigures:
    """The copy's figures from `start` to `end`; `peak`: the largest working set this
    process sampled over the whole window (None: it did not sample all of it), `ended_at`:
    when the trial's Pods ended (a counter the kubelet read before is not the trial's)."""
    before = {p.pod: {c.name: c for c in p.containers} for p in start.pods}
    cpu: float | None = 0.0
    restarts = len(set(before) - {p.pod for p in end.pods})  # gone: one each
    ooms: int | None = 0
    throttled, periods, cfs_moved = 0, 0, True
    if restarts:
        cpu = None  # what the gone Pod used after the first reading is not known
    for pod in end.pods:
        old = before.get(pod.pod)
        for now in pod.containers:
            was = old.get(now.name) if old is not None else None
            part, restarted = _cpu_nanoseconds(was, now, old is None, ended_at)
            cpu = None if cpu is None or part is None else cpu + part / 1e9
            restarts += restarted
            if restarted > 1:
                ooms = None
            elif restarted == 1 and ooms is not None:
                ooms += now.last_reason == OOM_KILLED
            if was is None or was.periods is None or now.periods is None:
                cfs_moved = False
            else:
                throttled += (now.throttled_periods or 0) - (was.throttled_periods or 0)
                periods += now.periods - was.periods
                cfs_moved = cfs_moved and (now.cfs_read_at or 0) > (was.cfs_read_at or 0)
    seen = [start.working_set_bytes(), end.working_set_bytes()]
    # its cores: what the limits allow, where every Pod has one (else it took the node's spare)
    limits = [p.cpu_limit for p in end.pods if p.cpu_limit is not None]
    cores = sum(limits) if end.pods and len(limits) == len(end.pods) else None
    return ServiceFigures(
        cpu_seconds=None if cpu is None else round(cpu, 3),
        cpu_per_request_seconds=None if cpu is None else per_request(cpu, requests),
        peak_memory_bytes=None if peak is None else max(peak, *seen),
        restarts=restarts, oom_kills=ooms,
        cpu_throttled_ratio=round(throttled / periods, 4) if cfs_moved and periods > 0 else None,
        samples=samples, started_at=start.read_at,
        window_seconds=round((end.read_at - start.read_at).total_seconds(), 3), cores=cores,
    )  # fmt: skip


def _cpu_nanoseconds(
    was: ContainerCount | None, now: ContainerCount, new_pod: bool, ended_at: datetime | None
) -> tuple[int | None, int]:
    """A container's CPU in the window (None: not known) and its restarts in it. A Pod made
    in the window counts from 0; a container restarted in it (its restartCount or its start
    moved), or without a counter at either end, is not known; nor a counter the kubelet read
    before the trial's Pods ended."""
    restarted = now.restarts - (was.restarts if was is not None else 0)
    if was is not None and was.started_at != now.started_at:
        restarted = max(restarted, 1)  # the Pod's status may not say so yet
    base = 0 if new_pod else (was.cpu_nanoseconds if was is not None else None)
    stale = ended_at is not None and now.read_at is not None and now.read_at < _second(ended_at)
    if restarted or stale or base is None or now.cpu_nanoseconds is None:
        return None, max(restarted, 0)
    used = now.cpu_nanoseconds - base
    return (used if used >= 0 else None), 0


def _second(moment: datetime) -> datetime:
    """The kubelet's times are to the second."""
    return moment.replace(microsecond=0)
