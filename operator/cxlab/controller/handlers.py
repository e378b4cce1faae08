"""Every kopf decorator of the operator, and nothing else: each handler delegates at once
(an experiment's reconcile loop to cxlab.controller.loop, a pass to the reconcilers).

Run with `cxlab operator` (or `kopf run -m cxlab.controller.handlers --all-namespaces`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any, cast

import kopf

from cxlab.config import OperatorConfig
from cxlab.controller.experiment_pass import Reconciler
from cxlab.controller.kube import Kube, load_configuration
from cxlab.controller.loop import run_loop
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import EventSink
from cxlab.controller.passes import Passes
from cxlab.controller.pod_watch import PodIndex
from cxlab.controller.rest import Rest
from cxlab.controller.schedule_pass import LABEL_SCHEDULE, ScheduleReconciler, view_run
from cxlab.controller.start import MEMO_KEY, OperatorStart
from cxlab.controller.terminating import keep_sweeping
from cxlab.controller.wakes import Wakes
from cxlab.crd import GROUP, PLURAL, SCHEDULE_PLURAL, VERSION
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import COMPONENT_HOST, COMPONENT_TRIAL, LABEL_EXPERIMENT
from cxlab.experiments.queue import Candidate, candidate_of, with_nodes
from cxlab.schedules.decide import RunView
from cxlab.times import now
from cxlab_contract.durations import parse_duration

RECONCILE_ID = "reconcile"
QUEUE = "all"
# Schedules are few and fire on the minute: a timer is simpler than events for them.
SCHEDULE_INTERVAL_SECONDS = 1.0
FINALIZER = f"{GROUP}/finalizer"


class SpecDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base, built without copying what it throws away: kopf deep-copies the
    whole object on every event (an experiment's status of tens of KiB, every Pod's status)
    only to drop its status and metadata, a share of the operator's CPU that grows with the
    trials (docs/benchmarks.md)."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        metadata = body.get("metadata") or {}
        kept = {k: v for k, v in metadata.items() if k in ("labels", "annotations")}
        slim = {k: v for k, v in body.items() if k not in ("metadata", "status")}
        if extra_fields:  # fields kopf asks to keep (none of cxlab's handlers do)
            return super().build(body=body, extra_fields=extra_fields)
        slim["metadata"] = kept
        return super().build(body=kopf.Body(cast(kopf.RawBody, slim)), extra_fields=None)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Storage under our own group from day one: migrating annotations on live objects is risky.
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = SpecDiffBase(
        prefix=GROUP, key="last-handled-configuration"
    )
    # Reconnect watches every few minutes: a silently dropped connection then heals itself,
    # and the apiserver spreads the reconnects (server_timeout) rather than all at once.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    # Events come from the reconciler (one per trial and per phase), not from kopf's log: at
    # thousands of trials a handler-level event each would double the apiserver's writes.
    settings.posting.level = logging.WARNING
    # `cxlab operator` hands its start-up object over in the memo; `kopf run -m` does not.
    start: OperatorStart = memo.get(MEMO_KEY) or OperatorStart(OperatorConfig.from_environment())
    config = memo.config = start.config
    # One pass per experiment at a time is kopf's own rule; config.workers bounds how many
    # experiments' passes run at once (threads), so a burst of Pod events queues, not forks.
    settings.execution.max_workers = config.workers
    # A deleted experiment keeps its finalizer until its reconcile loop has exited; the loop
    # exits at once when told (it waits on its stop flag), so no polling is needed.
    settings.background.instant_exit_timeout = 0.1
    load_configuration()
    metrics = start.metrics
    if metrics is None:
        metrics = OperatorMetrics()
        if config.operator_metrics_port:
            metrics.serve(config.operator_metrics_port)
        metrics.leader.set(1)
    sent = metrics.api_requests
    kube = Kube(lambda verb: sent.labels(verb).inc(), connections=config.workers + 4)
    passes = memo.passes = Passes(config.workers)  # the passes with a trial to record first
    # A crowd: a full round of passes waits for a thread (after a takeover, every experiment)
    crowded = lambda: passes.waiting() >= config.workers  # noqa: E731
    memo.wakes = Wakes()
    # Its own watch of cxlab's Pods (kopf's machinery cost more per Pod event than a pass),
    # on connections of its own: a watch holds one for minutes.
    memo.pods = PodIndex(
        Rest(connections=2), memo.wakes.pod_changed, clusterwide=not start.namespaces,
        host_port=config.host_port,
        # the end of a trial's tasks, seen at once (a long poll): only the final read needs it
        done_port=config.metrics_port if parse_duration(config.final_read) > 0 else None,
    )  # fmt: skip
    memo.reconciler = Reconciler(
        kube, config, metrics, crowded=crowded, done_watches=memo.pods.done_watches
    )
    memo.schedules = ScheduleReconciler(memo.reconciler.kube, metrics, now)
    memo.pods.start()
    if start.namespaces:  # kopf leaves out a namespace already terminating when it starts
        memo.sweeper = asyncio.create_task(keep_sweeping(kube, start.namespaces, FINALIZER))


@kopf.on.cleanup()
def shut_down(memo: kopf.Memo, **_: Any) -> None:
    sweeper = memo.get("sweeper")
    if sweeper is not None:
        sweeper.cancel()
    pods = memo.get("pods")
    if pods is not None:
        pods.stop()
    passes = memo.get("passes")
    if passes is not None:
        passes.shutdown(cancel=True)


# Indexers are async: kopf runs a sync one in a worker thread, a hop per event.
@kopf.index(GROUP, VERSION, PLURAL)
async def experiment_queue(body: kopf.Body, **_: Any) -> dict[str, Candidate]:
    """Every unfinished experiment, as the queue for capacity sees it (one key: all)."""
    candidate = candidate_of(dict(body), now())
    return {QUEUE: candidate} if candidate else {}


@kopf.on.event(GROUP, VERSION, PLURAL)
async def experiment_changed(
    namespace: str | None, name: str, body: kopf.Body, type: str | None, memo: Any, **kwargs: Any
) -> None:
    """Wake the experiment's loop, unless this is its own status write coming back. When
    the queue changed with it (it joined, was admitted, finished, went: kopf has updated the
    index first), wake every experiment waiting in the queue: their places may have moved."""
    key = (namespace or "", name)
    if type == "DELETED":
        memo.wakes.forget(key)
        return
    memo.wakes.experiment_seen(key, body["metadata"]["resourceVersion"])
    queue: list[Candidate] = kwargs["experiment_queue"].get(QUEUE, [])
    memo.wakes.queue_changed(key, next((c for c in queue if (c.namespace, c.name) == key), None))


def _queue(pods: PodIndex, kwargs: Mapping[str, Any]) -> list[Candidate]:
    """The queue, each admitted experiment with the nodes its trial Pods run on."""
    found = []
    for candidate in kwargs["experiment_queue"].get(QUEUE, []):
        mine: Iterable[PodView] = (
            pods.pods((candidate.namespace, candidate.name)) if candidate.admitted else []
        )
        # a trial host holds its slot's room, not the trials it runs (on the same node)
        nodes = [p.node for p in mine if p.node and p.live and _holds_room(p)]
        found.append(with_nodes(candidate, nodes))
    return found


def _holds_room(pod: PodView) -> bool:
    return (pod.component == COMPONENT_TRIAL and not pod.host) or pod.component == COMPONENT_HOST


@kopf.daemon(GROUP, VERSION, PLURAL, id=RECONCILE_ID, cancellation_timeout=30)
async def reconcile(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: Any,
    stopped: kopf.DaemonStopped,
    **kwargs: Any,
) -> None:
    """The experiment's reconcile loop (cxlab.controller.loop)."""
    key = (namespace or "", name)
    pods: PodIndex = memo.pods
    await run_loop(
        key, lambda: dict(body), memo.reconciler, memo.wakes, memo.passes, stopped,
        pods=lambda: pods.pods(key), queue=lambda: _queue(pods, kwargs),
        pods_listed=pods.ready(key[0]),
        event=_events(body, memo), reconcile_interval=memo.config.reconcile_interval_seconds,
        status_interval=memo.config.status_interval_seconds,
    )  # fmt: skip


def _events(body: kopf.Body, memo: Any) -> EventSink:
    """Events on the object, as kopf posts them (counted among the operator's requests)."""

    def event(kind: str, reason: str, message: str) -> None:
        kopf.event(body, type=kind, reason=reason, message=message)
        memo.reconciler.metrics.api_requests.labels("POST").inc()

    return event


@kopf.on.delete(GROUP, VERSION, PLURAL)
def stop(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """Stop the trials now rather than when the garbage collector gets to them."""
    memo.reconciler.kube.delete_pods(namespace or "default", f"{LABEL_EXPERIMENT}={name}")
    memo.reconciler.forget(namespace or "default", name)


@kopf.index(GROUP, VERSION, PLURAL, labels={LABEL_SCHEDULE: kopf.PRESENT})
async def schedule_runs(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[tuple[str, str], RunView]:
    """Every run by its schedule: a pass needs no list call to find them."""
    return {(namespace or "", labels[LABEL_SCHEDULE]): view_run(body)}


@kopf.timer(GROUP, VERSION, SCHEDULE_PLURAL, id="schedule", interval=SCHEDULE_INTERVAL_SECONDS)
def schedule(body: kopf.Body, namespace: str | None, name: str, memo: Any, **kwargs: Any) -> None:
    index: kopf.Index[tuple[str, str], RunView] = kwargs["schedule_runs"]
    runs = list(index.get((namespace or "", name), []))
    memo.schedules.reconcile(dict(body), runs, _events(body, memo))


@kopf.on.delete(GROUP, VERSION, SCHEDULE_PLURAL, optional=True)
def unschedule(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """Its runs go with it (they are owned); its metrics go now."""
    memo.reconciler.metrics.schedules.pop((namespace or "default", name), None)


@kopf.on.probe(id="experiments")
def tracked(memo: Any, **_: Any) -> int:
    reconciler = memo.get("reconciler")
    return len(reconciler.memory) if reconciler else 0
