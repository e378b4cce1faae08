"""Kueue on the real local cluster (hack/kueue.sh: built from the Go module proxy, its plain-Pod
integration): experiments that name a LocalQueue hand admission to Kueue. Their trial Pods are
created gated, Kueue admits them within its ClusterQueue's quota, and cxlab only follows: the
experiment is Pending and Queued (WaitingForKueue) while its Pods wait, records the wait, and
every trial runs once."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import kubernetes
import pytest
from helpers.cluster import ROOT, Lab
from helpers.queue import assert_ran_one_after_another, condition, moment, short, status

pytestmark = [pytest.mark.cluster, pytest.mark.solo(tool="kueue")]  # Kueue, its webhooks: alone

KUEUE = ROOT / "hack" / "kueue.sh"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"


@pytest.fixture(scope="module")
def kueue(cluster: None) -> Iterator[None]:
    was_running = subprocess.run([KUEUE, "status"], capture_output=True).returncode == 0
    subprocess.run([KUEUE, "start"], check=True, timeout=1200)
    yield
    if not was_running:
        subprocess.run([KUEUE, "stop"], check=True, timeout=120)


@pytest.fixture
def queue(kueue: None, lab: Lab) -> Iterator[str]:
    """A ClusterQueue with quota for one trial (1 CPU), and a LocalQueue in the lab's
    namespace, which Kueue's Pod integration serves (the namespace label)."""
    core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
    core.patch_namespace(
        lab.namespace, {"metadata": {"labels": {"kueue.cxlab.dev/managed": "true"}}}
    )
    name = f"cxlab-{uuid.uuid4().hex[:6]}"
    flavor = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
              "metadata": {"name": name}}  # fmt: skip
    cluster_queue = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": name, "resources": [
                    {"name": "cpu", "nominalQuota": 1}, {"name": "memory", "nominalQuota": "4Gi"},
                ]}],
            }],
        },
    }  # fmt: skip
    local = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
             "metadata": {"name": "experiments", "namespace": lab.namespace},
             "spec": {"clusterQueue": name}}  # fmt: skip
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", flavor)
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", cluster_queue)
    custom.create_namespaced_custom_object(GROUP, VERSION, lab.namespace, "localqueues", local)
    _wait_until_kueue_gates_pods_in(lab.namespace)
    yield "experiments"
    custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
    custom.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", name)


def _wait_until_kueue_gates_pods_in(namespace: str) -> None:
    """The apiserver matches webhooks against its cached namespaces: a label just set may not
    be seen for a moment. A probe Pod shows when Kueue's webhook gates Pods here."""
    core = kubernetes.client.CoreV1Api()
    probe = {
        "metadata": {"name": "kueue-probe", "labels": {"kueue.x-k8s.io/queue-name": "probe"}},
        "spec": {"containers": [{"name": "c", "image": "cxlab.dev/pause:dev"}]},
    }
    deadline = time.monotonic() + 30
    while True:
        created = core.create_namespaced_pod(namespace, probe)
        gated = bool(created.spec.scheduling_gates)
        core.delete_namespaced_pod("kueue-probe", namespace, grace_period_seconds=0)
        while any(
            p.metadata.name == "kueue-probe" for p in core.list_namespaced_pod(namespace).items
        ):
            time.sleep(0.2)  # Kueue's finalizer goes first
        if gated:
            return
        assert time.monotonic() < deadline, "Kueue's webhook never gated a Pod in the namespace"
        time.sleep(1)


def workloads(namespace: str) -> list[dict[str, Any]]:
    found = kubernetes.client.CustomObjectsApi().list_namespaced_custom_object(
        GROUP, VERSION, namespace, "workloads"
    )
    return list(found["items"])


def gated(lab: Lab, name: str) -> bool:
    return any(p.spec.scheduling_gates for p in lab.pods(name))


def _after_its_trial(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Kueue frees the quota when the first trial's Pod terminates, a moment before cxlab
    records the first experiment's completion, so the second may start before that stamp.
    It cannot start before the first trial's 3 s of sleep are over (1 s stamps)."""
    gap = moment(status(after)["startTime"]) - moment(status(before)["startTime"])
    return gap >= timedelta(seconds=3)


def test_kueue_admits_the_trial_pods_and_cxlab_follows(lab: Lab, queue: str) -> None:
    for name in ("ka", "kb"):
        lab.apply(name, {**short(), "queueName": queue})
    # Kueue picks the order (both were created in the same second): one runs, the other's
    # trial Pod exists but stays gated, since the quota (1 CPU) is the first one's.
    lab.wait("ka", lambda _: lab.running_pod("ka") or lab.running_pod("kb"), timeout=60)
    first, second = ("ka", "kb") if lab.running_pod("ka") else ("kb", "ka")
    lab.wait(second, lambda _: gated(lab, second), timeout=30)
    waiting = lab.wait(second, lambda e: bool(status(e).get("queue")), timeout=30)
    assert status(waiting)["phase"] == "Pending"
    assert status(waiting)["progress"]["display"] == "queued (Kueue)"
    queued = condition(waiting, "Queued")
    assert queued["reason"] == "WaitingForKueue" and f"LocalQueue {queue}" in queued["message"]
    assert workloads(lab.namespace), "Kueue made no Workload for the trial Pods"
    done = assert_ran_one_after_another(lab, [first, second], follows=_after_its_trial)
    assert status(done[1])["queuedSeconds"] > 0
    assert condition(done[1], "Queued")["reason"] == "Admitted"


def test_a_trial_of_several_pods_is_admitted_as_one_kueue_pod_group(lab: Lab, queue: str) -> None:
    spec = {
        "workload": {"type": "sleep", "tasks": 20, "rtt": "20ms"},
        "models": [{"model": "asyncio", "pods": [2]}],
        "resources": {"cpu": 0.3, "memory": "128Mi"},
        "pinning": "preferred",
        "queueName": queue,
    }
    lab.apply("kgroup", spec)

    def one_workload_of_two(_: dict[str, Any]) -> bool:
        # one Workload for both Pods: Kueue admits the group, not each Pod on its own
        return any(
            sum(s["count"] for s in w["spec"]["podSets"]) == 2 for w in workloads(lab.namespace)
        )

    lab.wait("kgroup", one_workload_of_two, timeout=60)
    done = lab.wait_finished("kgroup", timeout=120)
    assert status(done)["phase"] == "Succeeded", status(done)
    [entry] = status(done)["trials"]
    assert entry["result"]["pods"] == 2 and entry["result"]["startSkewSeconds"] is not None
