"""A service variant's copy as manifests (pure): the user's Deployment copied with the
variant's changes and cxlab's own labels, a Service with the user's ports."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from cxlab.experiments.service_copy import (
    build_copy_deployment,
    build_copy_service,
    copy_name,
    copy_request,
    copy_url,
)
from cxlab.experiments.spec.service import Variant
from cxlab.experiments.target import ServiceRef

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

USER: dict[str, Any] = {
    "metadata": {"name": "api", "namespace": "shop", "labels": {"app": "api"}},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "api"}},
        "template": {
            "metadata": {"labels": {"app": "api"}, "annotations": {"a": "b"}},
            "spec": {
                "securityContext": {"runAsNonRoot": True},
                "volumes": [{"name": "key", "secret": {"secretName": "api-key"}}],
                "containers": [
                    {"name": "sidecar", "image": "proxy:1"},
                    {"name": "app", "image": "app:1", "args": ["--old"],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {
                         "secretKeyRef": {"name": "api-key", "key": "b"}}}],
                     "resources": {"requests": {"memory": "64Mi"}}},
                ],
            },
        },
    },
}  # fmt: skip


def test_the_copy_has_the_variants_changes_and_only_cxlabs_labels() -> None:
    before = copy.deepcopy(USER)
    variant = Variant(
        index=2, name="v", replicas=1, cpu=0.5, memory="256Mi", image="app:2",
        args=("--new",), env=(("A", "2"), ("C", "3")),
    )  # fmt: skip
    made = build_copy_deployment(USER, variant, "app", "exp", "uid-1")
    assert before == USER, "the user's Deployment is never changed"
    assert made["metadata"]["name"] == "cx-exp-v2"
    assert made["metadata"]["ownerReferences"][0]["controller"] is True
    template = made["spec"]["template"]
    assert "app" not in template["metadata"]["labels"]
    assert made["spec"]["selector"]["matchLabels"] == template["metadata"]["labels"]
    assert template["metadata"]["labels"]["cxlab.dev/service-variant"] == "2"
    assert template["metadata"]["annotations"] == {"a": "b"}
    assert made["spec"]["replicas"] == 1
    sidecar, app = template["spec"]["containers"]
    assert sidecar == {"name": "sidecar", "image": "proxy:1"}
    assert app["image"] == "app:2" and app["args"] == ["--new"]
    assert app["env"][0]["name"] == "B" and app["env"][0]["valueFrom"]  # a reference still
    assert {e["name"]: e.get("value") for e in app["env"]} == {"A": "2", "B": None, "C": "3"}
    assert app["resources"] == {
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    assert template["spec"]["securityContext"] == {"runAsNonRoot": True}
    assert template["spec"]["volumes"] == USER["spec"]["template"]["spec"]["volumes"]


def test_without_changes_the_copy_is_the_template_with_the_users_replicas() -> None:
    made = build_copy_deployment(USER, Variant(index=1, name="default"), None, "exp", "u")
    assert made["spec"]["replicas"] == 3
    containers = made["spec"]["template"]["spec"]["containers"]
    assert containers == USER["spec"]["template"]["spec"]["containers"]


def test_a_deployment_scaled_to_none_is_copied_as_one_replica_unless_a_variant_says() -> None:
    user = copy.deepcopy(USER)
    user["spec"]["replicas"] = 0
    made = build_copy_deployment(user, Variant(index=1, name="default"), None, "exp", "u")
    assert made["spec"]["replicas"] == 1  # a copy of none would answer nothing
    sized = Variant(index=2, name="r2", replicas=2)
    assert build_copy_deployment(user, sized, None, "exp", "u")["spec"]["replicas"] == 2


def test_a_container_the_deployment_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="no container 'web'"):
        build_copy_deployment(USER, Variant(index=1, name="v"), "web", "exp", "u")


def test_the_service_keeps_the_ports_and_selects_only_the_copy() -> None:
    user = {
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"type": "NodePort", "selector": {"app": "api"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]},
    }  # fmt: skip
    made = build_copy_service(user, Variant(index=1, name="v"), "exp", "u")
    assert made["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8080}]
    assert made["spec"]["selector"]["cxlab.dev/service-variant"] == "1"
    assert "app" not in made["spec"]["selector"] and made["spec"]["type"] == "ClusterIP"


@pytest.mark.parametrize("experiment", ["a", "x" * 63, "my.exp." + "y" * 240, "9lives"])
def test_copy_names_are_short_dns_labels_of_their_own(experiment: str) -> None:
    name = copy_name(experiment, 16)
    assert DNS_1035.match(name) and len(name) <= 50, name
    assert copy_name(experiment, 1) != copy_name(experiment + "z", 1)


def test_the_trials_call_the_copy_with_the_targets_port_path_and_scheme() -> None:
    target = ServiceRef(name="api", port=443, path="/delay/0.05", scheme="https")
    assert copy_url(target, "exp", 3, "shop") == "https://cx-exp-v3.shop.svc:443/delay/0.05"


def test_the_copy_requests_its_largest_variants_replicas_cpu_and_memory() -> None:
    user = copy.deepcopy(USER)
    pod = user["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"limits": {"cpu": "100m", "memory": "32Mi"}}  # limits only
    pod["initContainers"] = [{"name": "migrate", "resources": {"requests": {"memory": "1Gi"}}}]
    pod["nodeSelector"] = {"pool": "services"}
    variants = [
        Variant(index=1, name="small", replicas=1, cpu=0.25),
        Variant(index=2, name="wide", replicas=2),  # the Deployment's own CPU: none set
        Variant(index=3, name="big", replicas=1, cpu=1.5),
    ]
    made = copy_request(user, variants, "app")
    assert made.replicas == 2  # the most of any variant
    assert made.cpu == 1.6  # the sidecar's limit, its request, and the largest variant's 1.5
    assert made.memory_bytes == 2**30  # the init container's 1Gi over 32Mi + 64Mi
    assert made.node_selector == {"pool": "services"}
    without = copy_request(USER, [Variant(index=1, name="default")], None)
    assert (without.replicas, without.cpu, without.memory_bytes) == (3, 0.0, 64 * 2**20)
