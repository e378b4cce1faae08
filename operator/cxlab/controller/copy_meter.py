"""The service copy's counters from the kubelets, through the apiserver's node proxy (RBAC:
nodes/proxy get): its Pods' containers from /stats/summary (CPU and working set, as the
container runtime reads their cgroups) and their CFS counters from /metrics/cadvisor, read
by a pass where a trial's window opens or ends (cxlab.experiments.service_window); and
between those, a thread that samples the working set of every open window's copy, for its
peak."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families
from urllib3.exceptions import HTTPError

from cxlab.analysis.copy_counters import (
    PERIODS,
    THROTTLED,
    Cfs,
    CopyReading,
    summary_pods,
    with_statuses,
)
from cxlab.controller.kube import Kube
from cxlab.controller.pass_state import Pass
from cxlab.controller.rest import Rest, path
from cxlab.experiments.decide import Decision
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.service_copy import copy_name
from cxlab.experiments.service_run import ServiceGate, ServicePlan
from cxlab.experiments.service_window import CopyMeasure, windows_after
from cxlab.times import now

log = logging.getLogger(__name__)

# A sample of the working set this often: one summary request per node of the copy. The
# kubelet asks the container runtime for every container's stats on each (14 ms here), so
# every second costs the node little, and a service's memory grows with its load over
# seconds; a spike shorter than this can be missed.
SAMPLE_SECONDS = 1.0
# A window whose samples stopped longer than this (the apiserver or the kubelet did not
# answer) has no peak: one taken over part of it could be lower than the real one.
GAP_SECONDS = 3 * SAMPLE_SECONDS
READ_TIMEOUT = 5.0
Key = tuple[str, str, str]  # (namespace, experiment, trial)
Summary = dict[str, Any]  # a kubelet's /stats/summary


def cfs_counters(text: str, namespace: str, pods: Iterable[str]) -> Cfs:
    """cAdvisor's CFS counters of these Pods' containers from a node's /metrics/cadvisor:
    (pod, container) → {metric: (value, timestamp ms)}. Where cAdvisor has no series of a
    Pod's containers by name (a runtime whose containers it cannot label: this cluster's
    containerd), the Pod's own cgroup (container ""), whose quota is its containers' limits
    together, stands for them; the pause container (no labels) is left out."""
    wanted = set(pods)
    found: dict[tuple[str, str], dict[str, tuple[int, int | None]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name not in (THROTTLED, PERIODS) or "container" not in labels:
                continue
            if labels.get("namespace") != namespace or labels.get("pod") not in wanted:
                continue
            stamp = None if sample.timestamp is None else round(float(sample.timestamp) * 1000)
            found.setdefault((labels["pod"], labels["container"]), {})[sample.name] = (
                int(sample.value), stamp,
            )  # fmt: skip
    named = {pod for pod, container in found if container}
    return {k: v for k, v in found.items() if k[1] or k[0] not in named}


@dataclass
class _Sampled:
    namespace: str
    prefix: str
    nodes: tuple[str, ...]
    peak: int
    samples: int
    last: float  # monotonic time of the last sample
    gap: float = 0.0  # the longest time between two samples


class CopyMeter:
    def __init__(self, kube: Kube, interval: float = SAMPLE_SECONDS) -> None:
        self.kube = kube
        self.interval = interval
        self._open: dict[Key, _Sampled] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def rest(self) -> Rest:
        """Reached only for an experiment with a service (a test's stand-in may have none)."""
        return self.kube.rest

    def read(
        self, namespace: str, prefix: str, pods: Sequence[PodView], throttling: bool = True
    ) -> CopyReading | None:
        """The copy's Pods (named `prefix`...) on the nodes of `pods` now, with their
        restarts from `pods` (None if a kubelet could not be read: the figures are absent)."""
        nodes = sorted({p.node for p in pods if p.node})
        try:
            found = {}
            for node in nodes:
                found.update(summary_pods(self._summary(node), namespace, prefix))
            cfs: Cfs = {}
            for node in nodes if throttling else ():
                text = self.rest.text(_node_path(node, "metrics", "cadvisor"), timeout=READ_TIMEOUT)
                cfs = {**cfs, **cfs_counters(text, namespace, found)}
        except (ApiException, HTTPError, ValueError) as error:
            log.warning("%s: the copy %s's counters could not be read: %s", namespace, prefix,
                        error)  # fmt: skip
            return None
        statuses = {p.name: p.restarts for p in pods}
        limits = {p.name: p.cpu_limit for p in pods}
        return CopyReading(read_at=now(), pods=with_statuses(found, statuses, cfs, limits))

    def _summary(self, node: str) -> dict[str, Any]:
        query = {"only_cpu_and_memory": "true"}
        answer: dict[str, Any] = self.rest.request(
            "GET", _node_path(node, "stats", "summary"), query=query, timeout=READ_TIMEOUT
        )
        return answer

    def open(self, key: Key, prefix: str, reading: CopyReading, nodes: Iterable[str]) -> None:
        """Sample the copy's working set for the window `key` from `reading` on."""
        sampled = _Sampled(
            key[0], prefix, tuple(sorted(set(nodes))), reading.working_set_bytes(), 1,
            time.monotonic(),
        )  # fmt: skip
        with self._lock:
            self._open[key] = sampled
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._sample_forever, name="copy-meter", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def peak(self, key: Key) -> tuple[int | None, int] | None:
        """The window's (peak working set, samples) so far, the peak None if the samples
        left a gap; None for a window this process did not sample from its start."""
        with self._lock:
            sampled = self._open.get(key)
        if sampled is None:
            return None
        gap = max(sampled.gap, time.monotonic() - sampled.last)
        return (sampled.peak if gap <= GAP_SECONDS else None), sampled.samples

    def close(self, key: Key) -> None:
        with self._lock:
            self._open.pop(key, None)

    def forget(self, namespace: str, experiment: str) -> None:
        with self._lock:
            for key in [k for k in self._open if k[:2] == (namespace, experiment)]:
                del self._open[key]

    def _sample_forever(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            with self._lock:
                windows = list(self._open.items())
            summaries: dict[str, Summary | None] = {}
            for key, sampled in windows:
                self._sample(key, sampled, summaries)

    def _sample(
        self, key: Key, sampled: _Sampled, summaries: dict[str, dict[str, Any] | None]
    ) -> None:
        """One sample of a window (the summaries read once per node per round)."""
        total = 0
        for node in sampled.nodes:
            if node not in summaries:
                try:
                    summaries[node] = self._summary(node)
                except (ApiException, HTTPError, ValueError) as error:
                    log.debug("node %s's summary: %s", node, error)
                    summaries[node] = None
            summary = summaries[node]
            if summary is None:
                return
            pods = summary_pods(summary, sampled.namespace, sampled.prefix).values()
            total += sum(c.working_set_bytes or 0 for p in pods for c in p.containers)
        moment = time.monotonic()
        with self._lock:
            if self._open.get(key) is not sampled:
                return  # closed meanwhile
            sampled.gap = max(sampled.gap, moment - sampled.last)
            sampled.last = moment
            sampled.peak = max(sampled.peak, total)
            sampled.samples += 1


def _node_path(node: str, *rest: str) -> str:
    return path("api", "v1", "nodes", node, "proxy", *rest)


def measured_gate(meter: CopyMeter, state: Pass, plan: ServicePlan) -> ServiceGate:
    """The copies' gate, and once the running variant's copy is Ready, what measures its
    trials: their windows as status keeps them, the copy read now, this process's peaks."""
    gate = plan.gate
    if not plan.ready or plan.current is None or state.copies is None:
        return gate
    status = next(s for s in plan.statuses if s.index == plan.current)
    view = state.copies.deployments[plan.current]
    pods = state.copies.pods_of(plan.current)
    prefix = copy_name(state.name, plan.current) + "-"
    reading = meter.read(state.namespace, prefix, pods, throttling=view.cpu_limit)
    windows = {w.trial: w for w in status.windows or []}
    peaks = {t: p for t in windows if (p := meter.peak((*state.key, t))) is not None}
    ended: dict[str, datetime] = {}
    for pod in state.observed.pods:
        if pod.trial in windows and pod.finished is not None:
            ended[pod.trial] = max(pod.finished, ended.get(pod.trial, pod.finished))
    return replace(gate, measure=CopyMeasure(windows, reading, peaks, ended))


def keep_windows(meter: CopyMeter, state: Pass, decision: Decision) -> None:
    """The windows once the decision is recorded (into the variants' statuses, which the
    status write keeps): the trials whose Pods it makes open one, those it ends close
    theirs; this process samples the copy for those it opened."""
    plan, gate = state.service_plan, state.observed.service
    if plan is None or gate is None:
        return
    reading = gate.measure.reading if gate.measure is not None else None
    ended = set(state.observed.recorded) | {e.name for e in decision.finished}
    for status in plan.statuses:
        created = [(t.name, a) for t, a, _ in decision.create if t.service_variant == status.index]
        old = status.windows or []
        new = windows_after(old, created, ended, reading if status.index == gate.current else None)
        kept = {(w.trial, w.attempt) for w in new}
        for window in old:  # closed, or replaced by another attempt's (opened below)
            if (window.trial, window.attempt) not in kept:
                meter.close((*state.key, window.trial))
        was = {(w.trial, w.attempt) for w in old}
        pods = state.copies.pods_of(status.index) if state.copies is not None else []
        for window in new:
            if (window.trial, window.attempt) not in was and window.start is not None:
                prefix = copy_name(state.name, status.index) + "-"
                nodes = [p.node for p in pods if p.node]
                meter.open((*state.key, window.trial), prefix, window.start, nodes)
        status.windows = new or None
