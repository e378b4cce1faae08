"""Everything the operator does to the cluster, in one place: Pods, status, the experiment
itself, and reading a trial's /metrics. Idempotent where Kubernetes allows it."""

from __future__ import annotations

from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from cxlab.crd import GROUP, PLURAL, VERSION
from cxlab.status import checked


def load_configuration() -> None:
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()


class Kube:
    def __init__(self) -> None:
        self.core = kubernetes.client.CoreV1Api()
        self.custom = kubernetes.client.CustomObjectsApi()

    def write_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Replace the whole status. A JSON Patch, not a merge patch: in a merge patch a null
        deletes its key, and a Result's nulls (gomaxprocs of a Python model) must stay."""
        patch = [{"op": "add", "path": "/status", "value": checked(status)}]
        self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            patch,
            _content_type="application/json-patch+json",
        )

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        """False when the Pod exists already (a retried create after a restart)."""
        try:
            # The client takes a plain manifest as well as a V1Pod.
            namespace = manifest["metadata"]["namespace"]
            self.core.create_namespaced_pod(namespace, manifest)  # type: ignore[arg-type]
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=5)
        except ApiException as error:
            if error.status != 404:
                raise

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod = self.core.read_namespaced_pod(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        serialized: dict[str, Any] = kubernetes.client.ApiClient().sanitize_for_serialization(pod)
        return serialized

    def delete_experiment(self, namespace: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as error:
            if error.status != 404:
                raise

    def delete_pods(self, namespace: str, selector: str) -> None:
        self.core.delete_collection_namespaced_pod(
            namespace, label_selector=selector, grace_period_seconds=0
        )


def read_experiment(namespace: str, name: str) -> dict[str, Any]:
    """One experiment from the cluster in KUBECONFIG (for cxlab report/summary)."""
    load_configuration()
    found: Any = kubernetes.client.CustomObjectsApi().get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return dict(found)
