"""The Helm chart installed for real on the local cluster: the operator image runs in a Pod
under the chart's ServiceAccount and RBAC, `helm test` takes a tiny experiment to Succeeded,
the account has what it needs and nothing else, and `helm uninstall` removes the operator.

The release watches only its own namespace (watchNamespaces), so it never reconciles the
experiments of other tests sharing the cluster; the CRD is installed by the chart only when
the cluster lacks it (other tests apply it too), and kept on uninstall."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import kubernetes
import pytest
from harness import KUBECONFIG, ROOT
from kubernetes.client.exceptions import ApiException

from cxlab.crd import CRD_PATH

HELM = ROOT / "build" / "bin" / "helm"
KUBECTL = ROOT / "build" / "k8s" / "bin" / "kubectl"
CHART = ROOT / "charts" / "cxlab"
RELEASE = "cxlab"
OPERATOR_PODS = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"


def run(
    *command: object, check: bool = True, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in command],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "KUBECONFIG": str(KUBECONFIG)},
    )
    if check:
        assert done.returncode == 0, f"{command}: {done.stderr}{done.stdout}"
    return done


@dataclass
class Release:
    namespace: str
    figures: dict[str, float] = field(default_factory=dict)


def _crd_exists() -> bool:
    name = f"{CRD_PATH.name.removesuffix('.yaml')}"
    try:
        kubernetes.client.ApiextensionsV1Api().read_custom_resource_definition(name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.fixture(scope="module")
def release(cluster: None) -> Iterator[Release]:
    if not HELM.exists():
        pytest.fail("helm is not built: run `make helm`")
    # cluster-up has imported cxlab.dev/operator:dev with the other images (hack/images.sh)
    namespace = f"cxlab-chart-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": namespace}})
    installed = Release(namespace)
    start = time.monotonic()
    run(
        HELM, "install", RELEASE, CHART, "--namespace", namespace, "--wait", "--timeout", "120s",
        "--set", f"watchNamespaces={{{namespace}}}",
        "--set", f"crds.install={str(not _crd_exists()).lower()}",
        # the node's one CPU may be busy with another test's trial for a while
        "--set", "settings.unschedulableGrace=90s",
    )  # fmt: skip
    installed.figures["install → Ready (s)"] = time.monotonic() - start
    try:
        yield installed
    finally:
        run(HELM, "uninstall", RELEASE, "--namespace", namespace, "--wait", check=False)
        print(f"\nchart figures: {installed.figures}")
        core.delete_namespace(namespace)


def test_operator_runs_ready_without_resources(release: Release) -> None:
    core = kubernetes.client.CoreV1Api()
    (pod,) = core.list_namespaced_pod(release.namespace, label_selector=OPERATOR_PODS).items
    assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)
    (container,) = pod.spec.containers
    assert not (container.resources.requests or container.resources.limits)
    assert pod.spec.security_context.run_as_user == 65532
    assert container.security_context.read_only_root_filesystem is True


def test_helm_test_runs_an_experiment_to_succeeded(release: Release) -> None:
    start = time.monotonic()
    done = run(
        HELM, "test", RELEASE, "--namespace", release.namespace, "--timeout", "200s", check=False
    )
    release.figures["helm test (s)"] = time.monotonic() - start
    if done.returncode != 0:
        logs = run(KUBECTL, "logs", "-n", release.namespace, f"{RELEASE}-test", check=False)
        operator = run(KUBECTL, "logs", "-n", release.namespace, "deploy/cxlab", check=False)
        pytest.fail(
            f"helm test failed: {done.stderr}{done.stdout}\ntest Pod: {logs.stdout}{logs.stderr}"
            f"\noperator: {operator.stdout[-3000:]}"
        )
    assert "Phase:          Succeeded" in done.stdout


@pytest.mark.parametrize(
    ("verb", "resource", "where", "allowed"),
    [
        ("create", "pods", "release", True),
        ("delete", "pods", "release", True),
        ("patch", "concurrencyexperiments.cxlab.dev --subresource=status", "release", True),
        ("watch", "concurrencyexperiments.cxlab.dev", "release", True),
        ("create", "events", "release", True),
        ("get", "secrets", "release", False),
        ("create", "deployments.apps", "release", False),
        ("create", "pods", "default", False),  # only the watched namespace
        ("create", "concurrencyexperiments.cxlab.dev", "release", False),
    ],
)
def test_service_account_rights(
    release: Release, verb: str, resource: str, where: str, allowed: bool
) -> None:
    namespace = release.namespace if where == "release" else where
    account = f"system:serviceaccount:{release.namespace}:{RELEASE}"
    command = [KUBECTL, "auth", "can-i", verb, *resource.split(), "--namespace", namespace]
    done = run(*command, "--as", account, check=False)
    assert done.stdout.strip() == ("yes" if allowed else "no"), done.stderr


def test_uninstall_leaves_no_operator_pods(release: Release) -> None:
    run(HELM, "uninstall", RELEASE, "--namespace", release.namespace, "--wait")
    core = kubernetes.client.CoreV1Api()
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod(release.namespace, label_selector=OPERATOR_PODS).items:
        assert time.monotonic() < deadline, "the operator Pod outlived helm uninstall"
        time.sleep(0.5)
    assert not core.list_namespaced_pod(release.namespace).items
    assert _crd_exists(), "the CRD must outlive the release"
