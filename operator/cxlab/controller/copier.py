"""spec.service on a cluster: the Kubernetes side of a variant's copy (what the pass's
decision in cxlab.experiments.service_run says). Each pass of an experiment with a service
lists its copies by their labels (so a restarted operator finds them again), and after the
status is written deletes the copies of variants not running and makes the running one's:
the user's Deployment and Service read, never changed, copied (service_copy) and created;
creating one that exists is a no-op."""

from __future__ import annotations

import logging
import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from cxlab.controller.kube import Kube, Objects, status_reason
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import EventSink, Pass
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import COMPONENT_COPY, LABEL_VARIANT
from cxlab.experiments.service_copy import (
    build_copy_deployment,
    build_copy_service,
    copy_name,
    copy_request,
    copy_selector,
)
from cxlab.experiments.service_run import Copies, CopyView, ServicePlan
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.spec.service import Variant
from cxlab.experiments.status import ServiceCopyRequest

log = logging.getLogger(__name__)
DEPLOYMENTS, SERVICES, ENDPOINT_SLICES = "deployments", "services", "endpointslices"


def _variant(item: dict[str, Any]) -> int:
    labels = (item.get("metadata") or {}).get("labels") or {}
    return int(labels.get(LABEL_VARIANT, "0") or 0)


class Copier:
    def __init__(self, kube: Kube, metrics: OperatorMetrics) -> None:
        self.kube = kube
        self.metrics = metrics

    @property
    def objects(self) -> Objects:
        """Read when an experiment has a service (a test's stand-in for Kube may have none)."""
        return self.kube.objects

    def observe(
        self, namespace: str, experiment: str, pods: list[PodView], memory: Memory
    ) -> Copies:
        """The experiment's copies as they are now: two lists by label."""
        selector = copy_selector(experiment)
        deployments = {}
        for item in self.objects.list(DEPLOYMENTS, namespace, selector):
            metadata, spec = item.get("metadata") or {}, item.get("spec") or {}
            containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
            deployments[_variant(item)] = CopyView(
                _variant(item),
                int(spec.get("replicas", 1)),
                bool(metadata.get("deletionTimestamp")),
                any(((c.get("resources") or {}).get("limits") or {}).get("cpu")
                    for c in containers),
            )  # fmt: skip
        services = {_variant(s) for s in self.objects.list(SERVICES, namespace, selector)}
        endpoints = {}
        for index, view in deployments.items():
            mine = [p for p in pods if p.component == COMPONENT_COPY and p.variant == index]
            if index in services and sum(p.ready for p in mine) >= view.replicas:
                endpoints[index] = self._ready_endpoints(namespace, copy_name(experiment, index))
        return Copies(deployments, services, pods, dict(memory.copy_refused), endpoints)

    def request(self, namespace: str, spec: ExperimentSpec) -> ServiceCopyRequest | None:
        """What the experiment's copy will ask of the nodes, from the user's Deployment as it
        is now (read on each pass before admission: one GET). None when it cannot be made
        (missing, no such container): the copier fails its variants, saying why."""
        assert spec.service is not None and spec.service.deployment is not None
        try:
            user = self.objects.get(DEPLOYMENTS, namespace, spec.service.deployment)
            if user is None:
                return None
            return copy_request(user, spec.service.variant_list(), spec.service.container)
        except ApiException as error:
            if (error.status or 500) >= 500:
                raise  # the apiserver's trouble: the pass is tried again
            return None  # refused (403): the copier fails the variants, saying so
        except ValueError:
            return None

    def _ready_endpoints(self, namespace: str, service: str) -> int:
        selector = f"kubernetes.io/service-name={service}"
        slices = self.objects.list(ENDPOINT_SLICES, namespace, selector)
        return sum(
            1
            for s in slices
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")
        )

    def act(self, state: Pass, plan: ServicePlan, event: EventSink) -> None:
        """After the status is written: the copies not running go, the running one is made;
        what this pass saw Ready or gone is logged and counted."""
        namespace, experiment = state.namespace, state.name
        for status in plan.became_ready:
            log.info("%s/%s: variant %s Ready in %.2f s", namespace, experiment, status.name,
                     status.ready_seconds or 0.0)  # fmt: skip
            if status.ready_seconds is not None:
                self.metrics.copy_ready.observe(status.ready_seconds)
        self._timed_gone(state, plan)
        for index in plan.delete_services:
            self.objects.delete(SERVICES, namespace, copy_name(experiment, index))
        for index in plan.delete:
            self.objects.delete(DEPLOYMENTS, namespace, copy_name(experiment, index))
            state.memory.copy_deleted.setdefault(index, time.monotonic())
            log.info("%s/%s: deleting variant %d's copy", namespace, experiment, index)
        if plan.create is not None and state.admission.place is None:  # not while queued
            self._make(state, plan.create, event)

    def _timed_gone(self, state: Pass, plan: ServicePlan) -> None:
        for status in plan.gone:
            began = state.memory.copy_deleted.pop(status.index, None)
            seconds = time.monotonic() - began if began is not None else status.deleted_seconds
            log.info("%s/%s: variant %s's copy gone in %.2f s", *state.key, status.name,
                     seconds or 0.0)  # fmt: skip
            if seconds is not None:
                self.metrics.copy_deletion.observe(seconds)

    def _make(self, state: Pass, variant: Variant, event: EventSink) -> None:
        """The variant's Deployment and Service from the user's; one that cannot be made is
        remembered (Memory.copy_refused) for the next pass to fail the variant's trials."""
        namespace, spec = state.namespace, state.spec
        assert spec.service is not None and spec.service.deployment is not None
        target = spec.workload.target.service if spec.workload.target else None
        assert target is not None
        uid = state.body["metadata"]["uid"]
        try:
            user = self.objects.get(DEPLOYMENTS, namespace, spec.service.deployment)
            front = self.objects.get(SERVICES, namespace, target.name)
            if user is None or front is None:
                missing = [
                    f"{kind} {name}"
                    for kind, name, found in (
                        ("Deployment", spec.service.deployment, user),
                        ("Service", target.name, front),
                    )
                    if found is None
                ]
                raise ValueError(f"{' and '.join(missing)} not found in namespace {namespace}")
            deployment = build_copy_deployment(
                user, variant, spec.service.container, state.name, uid
            )
            made = self.objects.create(
                SERVICES, build_copy_service(front, variant, state.name, uid)
            )
            made = self.objects.create(DEPLOYMENTS, deployment) or made
        except (ValueError, ApiException) as error:
            if isinstance(error, ApiException) and (error.status or 500) >= 500:
                raise  # the apiserver's trouble, not the copy's: the pass is tried again
            why = _why(error)
            message = f"variant {variant.name}: its copy could not be made: {why}"
            log.warning("%s/%s: %s", *state.key, message)
            state.memory.copy_refused[variant.index] = message
            event("Warning", "CopyRefused", message[:1000])
            return
        if made:
            log.info("%s/%s: made variant %s's copy %s", *state.key, variant.name,
                     deployment["metadata"]["name"])  # fmt: skip
            event(
                "Normal", "CopyCreated", f"variant {variant.name}: {deployment['metadata']['name']}"
            )

    def tidy(self, namespace: str, experiment: str, memory: Memory | None) -> bool:
        """A finished experiment: whatever copy is left goes (a restart between its last
        trial and the deletion). Returns whether one is still there; a copy this process
        deleted and sees gone has its deletion logged and counted."""
        selector = copy_selector(experiment)
        left: set[int] = set()
        for kind in (SERVICES, DEPLOYMENTS):
            for item in self.objects.list(kind, namespace, selector):
                left.add(_variant(item))
                if not (item.get("metadata") or {}).get("deletionTimestamp"):
                    self.objects.delete(kind, namespace, item["metadata"]["name"])
        for index in list(memory.copy_deleted if memory else {}):
            if index not in left and memory is not None:
                seconds = time.monotonic() - memory.copy_deleted.pop(index)
                log.info("%s/%s: variant %d's copy gone in %.2f s", namespace, experiment,
                         index, seconds)  # fmt: skip
                self.metrics.copy_deletion.observe(seconds)
        return bool(left)


def _why(error: Exception) -> str:
    if isinstance(error, ApiException):
        reason, message = status_reason(error)
        return f"{error.status} {reason}: {message}"
    return str(error)
