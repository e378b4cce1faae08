"""The real local cluster for operator tests: brought up by the test run itself
(`make cluster-up`, idempotent), refused if the kubeconfig is not the project's own, and
brought down again at the end if this run started it. The operator runs as a subprocess,
so a test can kill it (-9) and start it again.

Side by side (make test runs these tests in pytest-xdist workers), each worker has an
operator of its own, serving only its own namespaces (tests/helpers/cluster.py): a test that
kills or restarts its worker's operator disturbs no other test. What every test shares — the cluster
itself, KWOK's nodes, Kueue's webhooks, Prometheus, the apiserver's load of a thousand
trials, room on the node for all the Pods of a trial at once — is started, stopped or
loaded only by the tests marked `solo`, which run alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from helpers.cluster import KUBECONFIG, NAMESPACE_PREFIX, ROOT, WORKER, Lab, Operator, crd_lock
from kubernetes.client.exceptions import ApiException

from cxlab.crd import GENERATED, GROUP, PLURAL, SCHEDULE_PLURAL, VERSION

# The order `make tools` builds them in. make test builds them beside the tests and starts the
# solo tests without waiting (hack/test.sh): those that need no tool go first, then each as its
# tool is built (`hack/<tool>.sh start` waits for a build under way).
TOOLS_IN_BUILD_ORDER = ("kwok", "prometheus", "kueue")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test in this folder needs the cluster: `pytest -m "not cluster"` skips them all.
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.cluster)
    items.sort(key=_order)  # stable: the rest keep their order


def _order(item: pytest.Item) -> tuple[int, int]:
    """Solo tests by the tool they need (in build order); before the rest, the long ones:
    the workers take tests in this order, and a long test begun last is the phase's tail."""
    solo = item.get_closest_marker("solo")
    tool = solo.kwargs.get("tool") if solo else None
    rank = TOOLS_IN_BUILD_ORDER.index(tool) + 1 if tool else 0
    return rank, 0 if item.get_closest_marker("long") else 1


def _make(target: str) -> None:
    # On failure the error itself carries the end of the output (which component failed, the
    # tail of its log): every cluster test reports it, not only a captured-output section.
    done = subprocess.run(
        ["make", "-s", target],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sys.stderr.write(done.stdout)
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-40:])
        pytest.fail(f"make {target} failed (exit {done.returncode}):\n{tail}", pytrace=False)


def _cluster_is_up() -> bool:
    if not KUBECONFIG.exists():
        return False
    probe = subprocess.run(
        [sys.executable, "-c", "import kubernetes as k; k.config.load_kube_config(); "
         "k.client.CoreV1Api().list_node(_request_timeout=3)"],
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)}, capture_output=True,
    )  # fmt: skip
    return probe.returncode == 0


@pytest.fixture(scope="session")
def cluster() -> Iterator[None]:
    was_up = _cluster_is_up()
    # make test's bring-up phase has just built the images and brought the cluster up (about
    # 10 s a worker saved); run alone, cluster-up builds what changed and starts what is down.
    if not (was_up and os.environ.get("CXLAB_CLUSTER_READY")):
        _make("cluster-up")
    # Only ever the project's own cluster: never whatever context the machine has.
    os.environ["KUBECONFIG"] = str(KUBECONFIG)
    kubernetes.config.load_kube_config(config_file=str(KUBECONFIG))
    server = kubernetes.client.Configuration.get_default_copy().host
    assert server.startswith("https://127.0.0.1:"), (
        f"refusing a cluster that is not local: {server}"
    )
    yield
    # Workers of pytest-xdist share it: none knows whether it is the last one running, so the
    # run's driver (hack/test.sh, make test) takes it down; a single pytest does it itself.
    if not was_up and not WORKER:
        _make("cluster-down")


@pytest.fixture(scope="session")
def crd(cluster: None) -> None:
    """Both CRDs (experiments, schedules) as generated, Established: applied by one worker at
    a time (pytest-xdist workers share the cluster), the others finding them so."""
    import yaml

    api = kubernetes.client.ApiextensionsV1Api()
    with crd_lock():
        for path in GENERATED:
            _apply_crd(api, yaml.safe_load(path.read_text()))


def _apply_crd(api: kubernetes.client.ApiextensionsV1Api, body: dict[str, Any]) -> None:
    name = body["metadata"]["name"]
    try:
        current = api.read_custom_resource_definition(name)
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        api.replace_custom_resource_definition(name, body)
    except ApiException as error:
        if error.status != 404:
            raise
        api.create_custom_resource_definition(body)
    for _ in range(100):
        conditions = api.read_custom_resource_definition(name).status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        time.sleep(0.1)
    raise AssertionError(f"the CRD {name} never became Established")


@pytest.fixture(scope="session")
def operator(crd: None) -> Iterator[Operator]:
    running = Operator()
    running.start()
    yield running
    running.stop()


@pytest.fixture
def lab(operator: Operator) -> Iterator[Lab]:
    namespace = f"{NAMESPACE_PREFIX}{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": namespace}})
    yield Lab(namespace)
    # Delete the schedules (no new runs), then the experiments, while the operator still runs
    # (it removes its finalizers), then strip what is left: a namespace must never be held by
    # an object nobody serves.
    for plural in (SCHEDULE_PLURAL, PLURAL):
        _delete_all(namespace, plural)
    core.delete_namespace(namespace)


def _delete_all(namespace: str, plural: str) -> None:
    custom = kubernetes.client.CustomObjectsApi()
    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, namespace, plural)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]
        if not items:
            break
        time.sleep(0.5)
    for item in items:
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, item["metadata"]["name"],
            {"metadata": {"finalizers": None}},
        )  # fmt: skip


@pytest.fixture(scope="module")
def dry_run_namespace(crd: None) -> Iterator[str]:
    """A namespace for `kubectl apply --dry-run=server`: a dry run is still checked against
    the namespace, so it has to exist; nothing is ever created in it."""
    name = f"cxlab-test-dry-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
