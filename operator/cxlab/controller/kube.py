"""Everything the operator does to the cluster, in one place: Pods, status, the experiment
itself (and a schedule's runs and status), the ConfigMaps of Results, Nodes and namespaces.
Idempotent where Kubernetes allows it. (A trial's /metrics is read by cxlab.controller.live.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from cxlab.controller.rest import (
    JSON,
    JSON_PATCH,
    MERGE_PATCH,
    METADATA,
    METADATA_LIST,
    Rest,
    path,
    pods_path,
)
from cxlab.crd import GROUP, PLURAL, SCHEDULE_PLURAL, VERSION
from cxlab.experiments.results_store import results_selector, with_full_results
from cxlab.experiments.status import ExperimentStatus
from cxlab.schedules.spec import SCHEDULE_KIND
from cxlab.schedules.status import ScheduleStatus

# What the apiserver answers a Pod it refuses for what it is (Invalid, BadRequest): sending
# it again cannot help. Throttling (429) and server errors (5xx) are "not now".
REFUSED = frozenset({400, 422})
# A 403 is a refusal too when admission denied the Pod itself (Pod Security, a webhook, a
# ValidatingAdmissionPolicy), but "not now" for a full quota, and the operator's own problem
# (retried until an admin fixes its RBAC) when it may not create Pods at all.
NOT_NOW_FORBIDDEN = ("exceeded quota", "cannot create resource")


class PodRefused(Exception):
    """The apiserver refused to create a Pod (400, 422), with its own message."""

    def __init__(self, pod: str, code: int, reason: str, message: str) -> None:
        super().__init__(f"{pod}: {code} {reason}: {message}")
        self.pod, self.code, self.reason, self.message = pod, code, reason, message


class StaleStatus(Exception):
    """The experiment changed since the version a pass read: its status was not written."""


def status_reason(error: ApiException) -> tuple[str, str]:
    """(reason, message) of the apiserver's Status body, not the exception's repr."""
    reason, message = str(error.reason or ""), str(error.body or "")
    try:
        body = json.loads(error.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict):
        reason = str(body.get("reason") or reason)
        message = str(body.get("message") or message)
    return reason, message


def refusal(pod: str, error: ApiException) -> PodRefused | None:
    """The refusal in an ApiException — the message of its Status body, not its repr —
    or None if it is no refusal."""
    if error.status not in (*REFUSED, 403):
        return None
    reason, message = status_reason(error)
    if error.status == 403 and any(words in message for words in NOT_NOW_FORBIDDEN):
        return None
    return PodRefused(pod, int(error.status), reason, message or "no message")


def load_configuration() -> None:
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()


def _experiments(namespace: str, *name: str) -> str:
    return path("apis", GROUP, VERSION, "namespaces", namespace, PLURAL, *name)


def _config_maps(namespace: str, *name: str) -> str:
    return path("api", "v1", "namespaces", namespace, "configmaps", *name)


class Kube:
    def __init__(
        self, on_request: Callable[[str], None] | None = None, connections: int | None = None
    ) -> None:
        """`on_request(method)` is told of every request sent (the operator counts them);
        `connections`: kept open to the apiserver, one per thread that may send at once (the
        client's default, 5 per CPU, makes 16 pass threads open a TLS connection per request
        once they outnumber it). Answers are plain JSON (cxlab.controller.rest); one that is
        not needed is drained, so its connection is pooled rather than closed: unread, the
        next request paid a TLS handshake, two per trial (its Pod created and deleted)."""
        self.rest = Rest(on_request, connections)
        self.objects = Objects(self.rest)

    def write_status(
        self, namespace: str, name: str, status: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        """Replace the whole status (its document: ExperimentStatus.document()), only if the
        object is still at resourceVersion `version` (StaleStatus otherwise: the pass decided
        from an old status and must not overwrite a newer one). Returns the object as
        written. A JSON Patch, not a merge patch: in a merge patch a null deletes its key, and
        a Result's nulls (gomaxprocs of a Python model) must stay."""
        patch: list[dict[str, Any]] = [{"op": "add", "path": "/status", "value": status}]
        if version is not None:  # the apiserver answers 409 Conflict if it has moved on
            precondition = {"op": "replace", "path": "/metadata/resourceVersion", "value": version}
            patch.insert(0, precondition)
        try:
            written: dict[str, Any] = self.rest.request(
                "PATCH", _experiments(namespace, name, "status"), patch, content_type=JSON_PATCH
            )
        except ApiException as error:
            if error.status == 409:
                raise StaleStatus(f"{namespace}/{name} changed since version {version}") from error
            raise
        return written

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        """False when the Pod exists already (a retried create after a restart); PodRefused
        when the apiserver refuses it for what it is."""
        try:
            namespace = manifest["metadata"]["namespace"]
            self.rest.request("POST", pods_path(namespace), manifest, read=False)
        except ApiException as error:
            if error.status == 409:
                return False
            refused = refusal(manifest["metadata"]["name"], error)
            if refused is not None:
                raise refused from error
            raise
        return True

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.rest.request(
                "DELETE", pods_path(namespace, name), query={"gracePeriodSeconds": 5}, read=False
            )
        except ApiException as error:
            if error.status != 404:
                raise

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod: dict[str, Any] = self.rest.request("GET", pods_path(namespace, name))
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return pod

    def get_experiment(
        self, namespace: str, name: str, full: bool = False
    ) -> dict[str, Any] | None:
        """The experiment as stored, or with `full` its status's trial entries and summary
        replaced by the full ones from their ConfigMaps (cxlab.experiments.results_store), as a
        reader of its Results wants it."""
        experiment = self._stored_experiment(namespace, name)
        if experiment is None:
            return None
        if full and experiment.get("status"):
            chunks = self.list_config_maps(namespace, results_selector(name))
            status = ExperimentStatus.read(experiment["status"])
            experiment["status"] = with_full_results(status, chunks).document()
        return experiment

    def _stored_experiment(
        self, namespace: str, name: str, accept: str = JSON
    ) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.rest.request(
                "GET", _experiments(namespace, name), accept=accept
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def create_experiment(self, manifest: dict[str, Any]) -> str | None:
        """None once it exists (409 too: a pass before this one made it); the apiserver's
        message when it refuses it for what it is or where it goes (400, 403, 422: an
        admission policy, a quota); throttling and server errors raise."""
        try:
            namespace = manifest["metadata"]["namespace"]
            self.rest.request("POST", _experiments(namespace), manifest, read=False)
        except ApiException as error:
            if error.status == 409:
                return None
            if error.status not in (*REFUSED, 403):
                raise
            return status_reason(error)[1] or f"{error.status} {error.reason}"
        return None

    def replace_schedule_status(
        self, namespace: str, name: str, version: str | None, status: ScheduleStatus
    ) -> str | None:
        """Replace a schedule's status, refused (409: None) if the object changed since
        `version` was read; else the object's new resourceVersion."""
        updated = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": SCHEDULE_KIND,
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": version},
            "status": status.document(),
        }
        url = path("apis", GROUP, VERSION, "namespaces", namespace, SCHEDULE_PLURAL, name, "status")
        try:
            written: dict[str, Any] = self.rest.request("PUT", url, updated)
        except ApiException as error:
            if error.status == 409:
                return None
            raise
        return str(written["metadata"]["resourceVersion"])

    def delete_experiment(self, namespace: str, name: str) -> None:
        try:
            self.rest.request("DELETE", _experiments(namespace, name), read=False)
        except ApiException as error:
            if error.status != 404:
                raise

    def list_nodes(self) -> list[dict[str, Any]]:
        """Every Node, as plain dicts (for capacity: allocatable, labels, taints)."""
        return _items(self.rest.request("GET", path("api", "v1", "nodes"), timeout=10))

    def add_to_config_map(self, manifest: dict[str, Any]) -> None:
        """Merge the manifest's binaryData into the ConfigMap (its keys added or replaced, the
        others kept), creating the ConfigMap if it does not exist."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        patch = {"binaryData": manifest["binaryData"]}
        url = _config_maps(namespace, name)
        try:
            self.rest.request("PATCH", url, patch, content_type=MERGE_PATCH, read=False)
            return
        except ApiException as error:
            if error.status != 404:
                raise
        try:
            self.rest.request("POST", _config_maps(namespace), manifest, read=False)
        except ApiException as error:
            if error.status != 409:  # created meanwhile: add to it
                raise
            self.rest.request("PATCH", url, patch, content_type=MERGE_PATCH, read=False)

    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        listed = self.rest.request(
            "GET", _config_maps(namespace), query={"labelSelector": selector}
        )
        return _items(listed)

    def list_namespaces(self) -> list[dict[str, Any]]:
        return _items(self.rest.request("GET", path("api", "v1", "namespaces"), timeout=10))

    def list_experiment_metadata(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's experiments, their metadata only: at 100 trials an experiment is
        ~45 KiB of JSON, so 200 of them read whole every sweep were a burst of their own."""
        return _items(self.rest.request("GET", _experiments(namespace), accept=METADATA_LIST))

    def remove_finalizer(self, namespace: str, name: str, finalizer: str) -> bool:
        """Remove one finalizer from an experiment, if it still has it (a JSON Patch that tests
        the position it read, so a concurrent change is never overwritten). False when it had
        none, or is gone."""
        found = self._stored_experiment(namespace, name, accept=METADATA)
        if found is None:
            return False
        finalizers = list(found["metadata"].get("finalizers") or [])
        if finalizer not in finalizers:
            return False
        index = finalizers.index(finalizer)
        at = f"/metadata/finalizers/{index}"
        patch = [{"op": "test", "path": at, "value": finalizer}, {"op": "remove", "path": at}]
        try:
            self.rest.request(
                "PATCH", _experiments(namespace, name), patch, content_type=JSON_PATCH, read=False
            )
        except ApiException as error:
            if error.status in (404, 422):  # gone, or changed since read: the next sweep
                return False
            raise
        return True

    def delete_pods(self, namespace: str, selector: str) -> None:
        self.rest.request(
            "DELETE", pods_path(namespace),
            query={"labelSelector": selector, "gracePeriodSeconds": 0}, read=False,
        )  # fmt: skip


def objects_path(kind: str, namespace: str, *name: str) -> str:
    """The path of a namespaced kind a service's copy is made of (deployments, services), or
    that says where its Service routes (endpointslices)."""
    if kind == "deployments":
        return path("apis", "apps", "v1", "namespaces", namespace, kind, *name)
    if kind == "endpointslices":
        return path("apis", "discovery.k8s.io", "v1", "namespaces", namespace, kind, *name)
    return path("api", "v1", "namespaces", namespace, kind, *name)


class Objects:
    """Deployments and Services, as a service variant's copy needs them (create idempotent,
    delete in the foreground: the Deployment goes after its Pods)."""

    def __init__(self, rest: Rest) -> None:
        self.rest = rest

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.rest.request("GET", objects_path(kind, namespace, name))
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def list(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        query = {"labelSelector": selector}
        return _items(self.rest.request("GET", objects_path(kind, namespace), query=query))

    def create(self, kind: str, manifest: dict[str, Any]) -> bool:
        """False when it exists already (made before a restart)."""
        try:
            url = objects_path(kind, manifest["metadata"]["namespace"])
            self.rest.request("POST", url, manifest, read=False)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    def delete(self, kind: str, namespace: str, name: str) -> None:
        query = {"propagationPolicy": "Foreground"}
        try:
            url = objects_path(kind, namespace, name)
            self.rest.request("DELETE", url, query=query, read=False)
        except ApiException as error:
            if error.status != 404:
                raise


def _items(listed: dict[str, Any]) -> list[dict[str, Any]]:
    """A list's items; an empty PartialObjectMetadataList says "items": null (Go's nil slice)."""
    items: list[dict[str, Any]] = listed.get("items") or []
    return items


def read_experiment(namespace: str, name: str) -> dict[str, Any]:
    """One experiment from the cluster in KUBECONFIG (for cxlab report/summary), its status
    with the full trial entries and summary from their ConfigMaps
    (cxlab.experiments.results_store)."""
    load_configuration()
    experiment = Kube().get_experiment(namespace, name, full=True)
    if experiment is None:
        raise ApiException(status=404, reason=f"no ConcurrencyExperiment {namespace}/{name}")
    return experiment
