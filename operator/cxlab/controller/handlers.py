"""Every kopf decorator of the operator, and nothing else: each handler delegates at once.

Run with `cxlab operator` (or `kopf run -m cxlab.controller.handlers --all-namespaces`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from cxlab.controller.config import OperatorConfig
from cxlab.controller.kube import Kube, load_configuration
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.observe import PodView, now, view_pod
from cxlab.controller.pods import COMPONENT_TRIAL, LABEL_EXPERIMENT
from cxlab.controller.queue import Candidate, candidate_of, with_nodes
from cxlab.controller.reconciler import Reconciler
from cxlab.controller.schedules import LABEL_SCHEDULE, ScheduleReconciler, view_run
from cxlab.crd import GROUP, PLURAL, SCHEDULE_PLURAL, VERSION
from cxlab.schedules.decide import RunView

RECONCILE_ID = "reconcile"
QUEUE = "all"
CONFIG = OperatorConfig.from_environment()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Storage under our own group from day one: migrating annotations on live objects is risky.
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # Reconnect watches every few minutes: a silently dropped connection then heals itself.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.posting.level = logging.WARNING  # events come from the reconciler, not kopf's log
    # A deleted experiment keeps its finalizer until the reconcile timer has exited; a sync
    # timer caught mid-run (it may be the one applying the TTL) is re-checked only after
    # this polling interval, 60 s by default. Our timer body takes milliseconds.
    settings.background.instant_exit_timeout = 0.1
    settings.background.cancellation_polling = CONFIG.reconcile_interval_seconds
    load_configuration()
    metrics = OperatorMetrics()
    if CONFIG.operator_metrics_port:
        metrics.serve(CONFIG.operator_metrics_port)
    memo.reconciler = Reconciler(Kube(), CONFIG, metrics)
    memo.schedules = ScheduleReconciler(memo.reconciler.kube, metrics, now)


@kopf.index("pods", labels={LABEL_EXPERIMENT: kopf.PRESENT})
def experiment_pods(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[tuple[str, str], PodView]:
    return {(namespace or "", labels[LABEL_EXPERIMENT]): view_pod(body)}


@kopf.index(GROUP, VERSION, PLURAL)
def experiment_queue(body: kopf.Body, **_: Any) -> dict[str, Candidate]:
    """Every unfinished experiment, as the queue for capacity sees it (one key: all)."""
    candidate = candidate_of(dict(body), now())
    return {QUEUE: candidate} if candidate else {}


def _queue(kwargs: Mapping[str, Any]) -> list[Candidate]:
    """The queue, each admitted experiment with the nodes its trial Pods run on."""
    pods: kopf.Index[tuple[str, str], PodView] = kwargs["experiment_pods"]
    found = []
    for candidate in kwargs["experiment_queue"].get(QUEUE, []):
        mine: Iterable[PodView] = (
            pods.get((candidate.namespace, candidate.name), []) if candidate.admitted else []
        )
        nodes = [p.node for p in mine if p.node and p.component == COMPONENT_TRIAL
                 and p.phase in ("Pending", "Running") and not p.deleting]  # fmt: skip
        found.append(with_nodes(candidate, nodes))
    return found


@kopf.timer(GROUP, VERSION, PLURAL, id=RECONCILE_ID, interval=CONFIG.reconcile_interval_seconds)
def reconcile(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: Any,
    **kwargs: Any,
) -> None:
    def event(kind: str, reason: str, message: str) -> None:
        kopf.event(body, type=kind, reason=reason, message=message)

    index: kopf.Index[tuple[str, str], PodView] = kwargs["experiment_pods"]  # by its name
    pods = list(index.get((namespace or "", name), []))
    waiting = (body.get("status") or {}).get("phase") in (None, "Pending")
    memo.reconciler.reconcile(dict(body), pods, event, _queue(kwargs) if waiting else ())


@kopf.on.delete(GROUP, VERSION, PLURAL)
def stop(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """Stop the trials now rather than when the garbage collector gets to them."""
    memo.reconciler.kube.delete_pods(namespace or "default", f"{LABEL_EXPERIMENT}={name}")
    memo.reconciler.forget(namespace or "default", name)


@kopf.index(GROUP, VERSION, PLURAL, labels={LABEL_SCHEDULE: kopf.PRESENT})
def schedule_runs(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[tuple[str, str], RunView]:
    """Every run by its schedule: a pass needs no list call to find them."""
    return {(namespace or "", labels[LABEL_SCHEDULE]): view_run(body)}


@kopf.timer(
    GROUP, VERSION, SCHEDULE_PLURAL, id="schedule", interval=CONFIG.reconcile_interval_seconds
)
def schedule(body: kopf.Body, namespace: str | None, name: str, memo: Any, **kwargs: Any) -> None:
    def event(kind: str, reason: str, message: str) -> None:
        kopf.event(body, type=kind, reason=reason, message=message)

    index: kopf.Index[tuple[str, str], RunView] = kwargs["schedule_runs"]
    runs = list(index.get((namespace or "", name), []))
    memo.schedules.reconcile(dict(body), runs, event)


@kopf.on.delete(GROUP, VERSION, SCHEDULE_PLURAL, optional=True)
def unschedule(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """Its runs go with it (they are owned); its metrics go now."""
    memo.reconciler.metrics.schedules.pop((namespace or "default", name), None)


@kopf.on.probe(id="experiments")
def tracked(memo: Any, **_: Any) -> int:
    reconciler = memo.get("reconciler")
    return len(reconciler.memory) if reconciler else 0
