"""A service variant's copy (spec.service on a cluster), as manifests (pure): the Deployment
copied from the user's with the variant's changes, and a Service with the ports of the
user's Service that selects only the copy's Pods. The user's objects are read, never changed.

The copy's Pod template keeps the user's (security context, volumes, Secret references stay
what they are) but not its labels: with them the user's own Service would route to the copy.
Its selector and labels are cxlab's own, naming the experiment and the variant, so the
operator's Pod index sees its Pods (their readiness, why they do not start) and finds the
copy again after a restart."""

from __future__ import annotations

import copy
import hashlib
from decimal import Decimal
from typing import Any

from cxlab.experiments.fields import quantity
from cxlab.experiments.pods import (
    COMPONENT_COPY,
    LABEL_COMPONENT,
    LABEL_EXPERIMENT,
    LABEL_VARIANT,
    labels,
    owner_reference,
)
from cxlab.experiments.spec.service import Variant
from cxlab.experiments.status import ServiceCopyRequest
from cxlab.experiments.target import ServiceRef

Manifest = dict[str, Any]
# A Service's name is a DNS-1035 label of at most 63; the copy's Pods' names add about 17.
MAX_COPY_NAME = 50


def copy_name(experiment: str, variant: int) -> str:
    """cx-<experiment>-v<index>: starts with a letter (DNS-1035); a long experiment name is
    cut and given a hash of the whole, so two experiments never share a copy."""
    suffix = f"-v{variant}"
    name = f"cx-{experiment}"
    if len(name) + len(suffix) > MAX_COPY_NAME:
        digest = hashlib.sha256(experiment.encode()).hexdigest()[:6]
        keep = MAX_COPY_NAME - len(suffix) - len(digest) - 1
        name = f"{name[:keep].rstrip('-.')}-{digest}"
    return (name + suffix).replace(".", "-")


def copy_labels(experiment: str, variant: int) -> dict[str, str]:
    return labels(experiment, COMPONENT_COPY) | {LABEL_VARIANT: str(variant)}


def copy_selector(experiment: str) -> str:
    """The label selector of every copy (Deployments, Services, Pods) of an experiment."""
    return f"{LABEL_COMPONENT}={COMPONENT_COPY},{LABEL_EXPERIMENT}={experiment}"


def copy_url(target: ServiceRef, experiment: str, variant: int, namespace: str) -> str:
    """Where a variant's trials send the load: the copy's Service, with the target's port,
    path and scheme."""
    name = copy_name(experiment, variant)
    return f"{target.scheme}://{name}.{namespace}.svc:{target.port}{target.path}"


def _metadata(experiment: str, uid: str, namespace: str, variant: Variant) -> Manifest:
    return {
        "name": copy_name(experiment, variant.index),
        "namespace": namespace,
        "labels": copy_labels(experiment, variant.index),
        "annotations": {"cxlab.dev/variant-name": variant.name},
        # controller: true, so the garbage collector removes it with the experiment even when
        # no operator runs
        "ownerReferences": [owner_reference(experiment, uid)],
    }


def build_copy_deployment(
    user: Manifest, variant: Variant, container: str | None, experiment: str, uid: str
) -> Manifest:
    """The user's Deployment `user` (as read) copied for `variant`: its Pod template with
    cxlab's labels, the variant's changes applied to `container` (unset: the first)."""
    namespace = user["metadata"]["namespace"]
    spec = user.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    own = copy_labels(experiment, variant.index)
    meta = template.setdefault("metadata", {})
    meta["labels"] = dict(own)  # the user's annotations stay
    pod = template.setdefault("spec", {})
    _apply(pod, variant, container)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(experiment, uid, namespace, variant),
        "spec": {
            # a Deployment scaled to none (staging, or a spare) is copied as one: a copy of
            # none would be Ready at once and answer nothing
            "replicas": (
                max(1, int(spec.get("replicas", 1)))
                if variant.replicas is None
                else variant.replicas
            ),
            "selector": {"matchLabels": own},
            "template": template,
            # a copy is never rolled: it is made once and deleted after its variant
            "strategy": {"type": "Recreate"},
        },
    }


def _apply(pod: Manifest, variant: Variant, container: str | None) -> None:
    containers = pod.get("containers") or []
    chosen = next((c for c in containers if c.get("name") == container), None)
    if chosen is None:
        if container is not None:
            raise ValueError(f"the Deployment has no container {container!r}")
        if not containers:
            raise ValueError("the Deployment's Pod template has no container")
        chosen = containers[0]
    if variant.image is not None:
        chosen["image"] = variant.image
    if variant.command is not None:
        chosen["command"] = list(variant.command)
    if variant.args is not None:
        chosen["args"] = list(variant.args)
    if variant.env:
        _set_env(chosen, dict(variant.env))
    if variant.cpu is not None or variant.memory is not None:
        _set_resources(chosen, variant)


def _set_env(container: Manifest, values: dict[str, str]) -> None:
    """The variant's variables over the container's own (in place, the others kept)."""
    env = [e for e in container.get("env") or [] if e.get("name") not in values]
    env += [{"name": name, "value": value} for name, value in values.items()]
    container["env"] = env


def _set_resources(container: Manifest, variant: Variant) -> None:
    """requests = limits for what the variant sets (cpu in millicores)."""
    resources = container.setdefault("resources", {})
    requests = dict(resources.get("requests") or {})
    limits = dict(resources.get("limits") or {})
    if variant.cpu is not None:
        requests["cpu"] = limits["cpu"] = f"{round(variant.cpu * 1000)}m"
    if variant.memory is not None:
        requests["memory"] = limits["memory"] = variant.memory
    resources["requests"], resources["limits"] = requests, limits


def build_copy_service(user: Manifest, variant: Variant, experiment: str, uid: str) -> Manifest:
    """A Service with the ports of the user's Service `user` (as read), selecting only the
    variant's copy."""
    namespace = user["metadata"]["namespace"]
    ports = [
        {k: v for k, v in port.items() if k != "nodePort"}
        for port in (user.get("spec") or {}).get("ports") or []
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(experiment, uid, namespace, variant),
        "spec": {
            "type": "ClusterIP",
            "selector": copy_labels(experiment, variant.index),
            "ports": ports,
        },
    }


def copy_request(
    user: Manifest, variants: list[Variant], container: str | None
) -> ServiceCopyRequest:
    """What the largest variant's copy of the user's Deployment `user` asks of the nodes:
    the most replicas and the most CPU and memory per Pod over the variants (one copy runs
    at a time, and the queue holds the room for the whole run), each Pod's requests as the
    scheduler counts them, from the copies as build_copy_deployment makes them."""
    replicas, cpu, memory = 0, Decimal(0), Decimal(0)
    pod: Manifest = {}
    for variant in variants:  # the copy's name and owner do not change what it requests
        spec = build_copy_deployment(user, variant, container, "x", "")["spec"]
        pod = spec["template"].get("spec") or {}
        replicas = max(replicas, int(spec["replicas"]))
        cpu = max(cpu, _pod_request(pod, "cpu"))
        memory = max(memory, _pod_request(pod, "memory"))
    containers = pod.get("containers") or [{}]
    return ServiceCopyRequest(
        replicas=replicas, cpu=float(cpu), memory_bytes=int(memory),
        container=container or containers[0].get("name"),
        node_selector=pod.get("nodeSelector") or None, tolerations=pod.get("tolerations") or None,
        affinity=pod.get("affinity") or None,
    )  # fmt: skip


def _pod_request(pod: Manifest, resource: str) -> Decimal:
    """A Pod's request as the scheduler counts it: its containers' summed, or its largest
    init container's if more; a container that sets only a limit requests the limit."""

    def one(container: Manifest) -> Decimal:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(resource)
        value = value if value is not None else (resources.get("limits") or {}).get(resource)
        return quantity(value) if value is not None else Decimal(0)

    running = sum((one(c) for c in pod.get("containers") or []), Decimal(0))
    return max([running, *(one(c) for c in pod.get("initContainers") or [])])
