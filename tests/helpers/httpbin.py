"""httpbin served by gunicorn (the image hack/images.sh builds from its pins) as a user's
Deployment `api` and Service `api` in a test's namespace: the subject of spec.service."""

from __future__ import annotations

import time
from typing import Any

import kubernetes

from helpers.cluster import TIMEOUT_SCALE, Lab

IMAGE = "cxlab.dev/httpbin:dev"


def deploy_httpbin(
    lab: Lab, cpu: str | None = None, replicas: int = 1
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The user's Deployment and Service (as the apiserver returned them), once Ready; with a
    CPU request where its throughput is measured (none: it fits beside any trial)."""
    apps = kubernetes.client.AppsV1Api()
    container = {
        "name": "httpbin", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080}],
        # a TCP probe: gunicorn's master accepts while every worker is busy; an HTTP probe
        # would queue behind the load (1.6 s at sync-2) and take the Pod out of its Service
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        # a request, no limit, where it is measured: BestEffort, the server would get the CPU
        # last of every process on the node (the control plane's, the client's). Elsewhere
        # none: the trials of the tests beside it (other workers' operators, whose queues do
        # not see this one's copy) may hold every core's request
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"} if cpu else {}},
    }  # fmt: skip
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "labels": {"app": "api"}},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": "api"}},
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }  # fmt: skip
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"},
        "spec": {"selector": {"app": "api"}, "ports": [{"name": "http", "port": 80,
                                                       "targetPort": 8080}]},
    }  # fmt: skip
    apps.create_namespaced_deployment(lab.namespace, deployment)
    created = lab.core.create_namespaced_service(lab.namespace, service)
    deadline = time.monotonic() + 90 * TIMEOUT_SCALE
    while time.monotonic() < deadline:
        read = apps.read_namespaced_deployment("api", lab.namespace)
        if (read.status.ready_replicas or 0) >= replicas:
            return read.to_dict(), created.to_dict()
        time.sleep(0.5)
    raise AssertionError(f"the user's httpbin never got Ready: {read.status}")
