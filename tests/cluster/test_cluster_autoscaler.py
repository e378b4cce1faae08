"""The local cluster's resource metrics API (metrics-server, from hack/cluster-up.sh) and the
HorizontalPodAutoscaler controller reading it: what a service plan's HPA needs to act. A
Deployment whose container burns a core against a 50 m request is scaled out by an
autoscaling/v2 HPA at 50 % CPU, as the apiserver reports (the HPA's status and the
Deployment's replicas); the node's and the Pods' usage are served by metrics.k8s.io."""

from __future__ import annotations

import time
from typing import Any

import kubernetes
from helpers.cluster import TIMEOUT_SCALE, Lab

from cxlab.config import OperatorConfig

# One Python loop a Pod: far over 50 % of its 50 m request (its limit, 100 m, caps it at 200 %:
# a fifth of a core for both, beside the other tests)
BURN = ["python3", "-c", "while True: pass"]


def _burner(replicas: int) -> dict[str, object]:
    container = {
        "name": "burn", "image": OperatorConfig().runner_image, "imagePullPolicy": "IfNotPresent",
        "command": BURN,
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"},
                      "limits": {"cpu": "100m", "memory": "64Mi"}},
    }  # fmt: skip
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "burn"},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": "burn"}},
            "template": {"metadata": {"labels": {"app": "burn"}},
                         "spec": {"containers": [container]}},
        },
    }  # fmt: skip


def _node_metrics(api: kubernetes.client.CustomObjectsApi) -> list[dict[str, Any]]:
    try:
        found = api.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    except kubernetes.client.ApiException as error:
        if error.status == 503:  # its first reading not taken yet
            return []
        raise
    return list(found["items"])


def test_an_hpa_scales_a_deployment_out_on_the_cpu_metrics_server_reports(lab: Lab) -> None:
    api = kubernetes.client.CustomObjectsApi()
    # a node's usage once metrics-server has read its kubelet twice (a CPU rate): 10-20 s
    # after a bring-up, which waits only for the APIService
    deadline = time.monotonic() + 60 * TIMEOUT_SCALE
    while not (nodes := _node_metrics(api)):
        assert time.monotonic() < deadline, "metrics-server never served the node's usage"
        time.sleep(1)
    assert all(n["usage"]["cpu"] for n in nodes), nodes
    apps = kubernetes.client.AppsV1Api()
    autoscaling = kubernetes.client.AutoscalingV2Api()
    apps.create_namespaced_deployment(lab.namespace, _burner(1))
    hpa = {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "burn"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "burn"},
            "minReplicas": 1, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
        },
    }  # fmt: skip
    autoscaling.create_namespaced_horizontal_pod_autoscaler(lab.namespace, hpa)
    deadline = time.monotonic() + 150 * TIMEOUT_SCALE
    seen = None
    while time.monotonic() < deadline:
        seen = autoscaling.read_namespaced_horizontal_pod_autoscaler("burn", lab.namespace)
        deployment = apps.read_namespaced_deployment("burn", lab.namespace)
        if seen.status.desired_replicas == 2 and deployment.spec.replicas == 2:
            break
        time.sleep(1)
    else:
        raise AssertionError(f"the HPA did not scale out: {seen.status if seen else None}")
    [current] = seen.status.current_metrics
    assert current.resource.name == "cpu" and current.resource.current.average_utilization > 50
    pods = api.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", lab.namespace, "pods")
    burning = [p for p in pods["items"] if p["metadata"]["name"].startswith("burn-")]
    assert burning and all(c["usage"]["cpu"] for p in burning for c in p["containers"]), pods
