"""An operator restarted while a namespace of its experiments is being deleted still lets
the namespace go: kopf does not serve a namespace already terminating when it starts, so the
operator's own sweep (cxlab.controller.terminating) removes its finalizer from the
experiments there."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import kubernetes
import pytest
from helpers.cluster import SHARED_POOL, Lab, Operator, experiment_spec
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.cluster

PATTERN = "cxlab-term-*"  # not the session operator's namespaces (cxlab-test-*)


@pytest.fixture
def own_operator(crd: None) -> Iterator[Operator]:
    running = Operator(log="operator-terminating", metrics_port=18095, namespaces=PATTERN)
    running.start()
    yield running
    running.stop()


def gone(core: kubernetes.client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespace(namespace)
    except ApiException as error:
        return error.status == 404
    return False


def test_a_namespace_deleted_while_the_operator_was_down_goes_once_it_is_back(
    own_operator: Operator,
) -> None:
    core = kubernetes.client.CoreV1Api()
    namespace = f"cxlab-term-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    lab = Lab(namespace)
    # long trials: the experiment is running (and holds the finalizer) when the operator dies
    slow = {"type": "sleep", "tasks": 600, "rtt": "100ms"}
    lab.apply("held", experiment_spec([{"model": "asyncio", "workers": [1]}], slow, **SHARED_POOL))
    lab.wait("held", lambda e: lab.phase(e) == "Running", timeout=120)
    finalizers = lab.stored("held")["metadata"].get("finalizers") or []
    assert "cxlab.dev/finalizer" in finalizers
    own_operator.kill()  # a crash: nothing tidied
    core.delete_namespace(namespace)
    time.sleep(5)  # the namespace controller marks the experiment deleted, and waits on it
    assert not gone(core, namespace), "the finalizer must hold the namespace while no one serves it"
    own_operator.start()
    deadline = time.monotonic() + 90
    while not gone(core, namespace):
        assert time.monotonic() < deadline, f"{namespace} still Terminating 90 s after the restart"
        time.sleep(1)
