"""The Helm chart installed for real on the local cluster: the operator image runs in a Pod
under the chart's ServiceAccount and RBAC, `helm test` takes a tiny experiment to Succeeded,
the account has what it needs and nothing else, the image policy refuses an experiment (or a
schedule's template) whose spec.image is not allowed at `kubectl apply`, the target policy one
whose workload.target is not, and `helm uninstall` removes the operator and the policies.

The release watches only its own namespace (watchNamespaces), so it never reconciles the
experiments of other tests sharing the cluster; the CRD is installed by the chart only when
the cluster lacks it (other tests apply it too), and kept on uninstall. The policies are
cluster-scoped, but their bindings follow watchNamespaces: they too act only in the release's
namespace, never on other tests' experiments."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import kubernetes
import pytest
import yaml
from helpers.cluster import KUBECONFIG, ROOT, crd_lock
from kubernetes.client.exceptions import ApiException

from cxlab.crd import CRD_PATH, GROUP, PLURAL, SCHEDULE_PLURAL, VERSION

HELM = ROOT / "build" / "bin" / "helm"
KUBECTL = ROOT / "build" / "k8s" / "bin" / "kubectl"
CHART = ROOT / "charts" / "cxlab"
RELEASE = "cxlab"
OPERATOR_PODS = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def run(
    *command: object, check: bool = True, timeout: float = 240, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in command],
        input=stdin,
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
    # make test builds Helm after Kubernetes, beside these tests: `make helm` waits for that
    # build (the cache's lock, hack/lib.sh), or links the one the machine cache holds.
    made = subprocess.run(["make", "-s", "helm"], cwd=ROOT, capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"make helm failed: {made.stdout[-3000:]}{made.stderr[-3000:]}")
    # cluster-up has imported cxlab.dev/operator:dev with the other images (hack/images.sh)
    namespace = f"cxlab-chart-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": namespace}})
    installed = Release(namespace)
    start = time.monotonic()
    try:  # a failed install too leaves cluster-scoped objects (ClusterRole, image policy)
        # The chart creates the CRD where no other test has: decided and created under the
        # lock the other workers apply it under; the wait for the operator comes after it.
        with crd_lock():
            run(
                HELM, "install", RELEASE, CHART, "--namespace", namespace,
                "--set", f"watchNamespaces={{{namespace}}}",
                "--set", f"crds.install={str(not _crd_exists()).lower()}",
                # the node's one CPU may be busy with another test's trial for a while
                "--set", "settings.unschedulableGrace=90s",
            )  # fmt: skip
        run(KUBECTL, "rollout", "status", f"deployment/{RELEASE}", "--namespace", namespace,
            "--timeout", "120s")  # fmt: skip
        installed.figures["install → Ready (s)"] = time.monotonic() - start
        yield installed
    finally:
        run(HELM, "uninstall", RELEASE, "--namespace", namespace, "--wait", check=False)
        print(f"\nchart figures: {installed.figures}")
        core.delete_namespace(namespace)


def test_two_replicas_run_ready_without_resources_one_holding_the_lease(
    release: Release,
) -> None:
    core = kubernetes.client.CoreV1Api()
    pods = core.list_namespaced_pod(release.namespace, label_selector=OPERATOR_PODS).items
    assert len(pods) == 2
    for pod in pods:  # the standby is alive and ready too: it serves /healthz and /metrics
        assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)
    lease = kubernetes.client.CoordinationV1Api().read_namespaced_lease(RELEASE, release.namespace)
    leaders = [p for p in pods if lease.spec.holder_identity.startswith(f"{p.metadata.name}-")]
    assert len(leaders) == 1, lease.spec.holder_identity
    pod = leaders[0]
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
        # spec.service: copies of the user's Deployment and Service, never a change to theirs
        ("create", "deployments.apps", "release", True),
        ("delete", "deployments.apps", "release", True),
        ("patch", "deployments.apps", "release", False),
        ("update", "deployments.apps", "release", False),
        ("create", "deployments.apps", "default", False),  # only the watched namespace
        ("create", "services", "release", True),
        ("patch", "services", "release", False),
        ("list", "endpointslices.discovery.k8s.io", "release", True),
        ("create", "pods", "default", False),  # only the watched namespace
        ("create", "concurrencyexperiments.cxlab.dev", "release", True),  # schedules' runs
        ("watch", "experimentschedules.cxlab.dev", "release", True),
        ("update", "experimentschedules.cxlab.dev --subresource=status", "release", True),
        ("create", "experimentschedules.cxlab.dev", "release", False),
        ("list", "nodes", "release", True),  # the queue: what the nodes can hold
        ("update", "leases.coordination.k8s.io", "release", True),  # one active replica
        ("update", "leases.coordination.k8s.io", "default", False),
        ("create", "configmaps", "release", True),  # the full trial entries
        ("patch", "configmaps", "release", True),
        ("delete", "configmaps", "release", False),
        ("patch", "nodes", "release", False),
        # spec.service: the copy's counters, read from the kubelets through the node proxy
        ("get", "nodes --subresource=proxy", "release", True),
        ("create", "nodes --subresource=proxy", "release", False),
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


# --- the image policy: who may run which image ---------------------------------------------


def policy_name(release: Release) -> str:
    return f"{RELEASE}-{release.namespace}-images"  # fullname, namespace: unique per release


def experiment_spec(
    image: str | None = None, target: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A small experiment's spec: sleep tasks, or http ones calling the target."""
    spec: dict[str, Any] = {
        "workload": {"type": "sleep", "tasks": 5, "rtt": "100ms"},
        "models": [{"model": "asyncio", "workers": [0]}],
        "resources": {"cpu": 1, "memory": "256Mi"},
    }
    if image is not None:
        spec["image"] = image
    if target is not None:
        spec["workload"] = {"type": "http", "tasks": 5, "target": target}
    return spec


def apply(
    namespace: str,
    kind: str,
    spec: dict[str, Any],
    name: str,
    dry_run: bool = True,
    finalizers: list[str] | None = None,
    as_user: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`kubectl apply` of an experiment or schedule, by default --dry-run=server: through
    admission (the policies included), nothing stored; as the admin, or as `as_user`
    (impersonated)."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, **({"finalizers": finalizers} if finalizers else {})},
        "spec": spec,
    }
    dry = ["--dry-run=server"] if dry_run else []
    who = ["--as", as_user] if as_user else []
    return run(
        KUBECTL, "apply", *dry, *who, "-n", namespace, "-f", "-", stdin=yaml.safe_dump(body),
        check=False,
    )  # fmt: skip


def apply_experiment(
    namespace: str,
    image: str | None,
    name: str = "image-check",
    dry_run: bool = True,
    finalizers: list[str] | None = None,
    target: dict[str, Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    """A small experiment through `kubectl apply`, by default a server dry run."""
    spec = experiment_spec(image, target)
    return apply(namespace, "ConcurrencyExperiment", spec, name, dry_run, finalizers)


def schedule_spec(template: dict[str, Any]) -> dict[str, Any]:
    """A schedule of this experiment spec whose first run is an hour after its creation."""
    return {"schedule": "@every 1h", "experimentTemplate": {"spec": template}}


def apply_schedule(
    namespace: str,
    image: str | None,
    name: str = "schedule-check",
    dry_run: bool = True,
    target: dict[str, Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    """A schedule of a small experiment through `kubectl apply`, by default a server dry run."""
    spec = schedule_spec(experiment_spec(image, target))
    return apply(namespace, "ExperimentSchedule", spec, name, dry_run)


def refused(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode != 0 and "denied request" in done.stderr


def eventually(what: str, check: Callable[[], bool], timeout: float = 20) -> None:
    """Admission picks up a new or changed policy or binding a moment after it is written."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


@pytest.fixture(scope="module")
def image_policy(release: Release) -> str:
    """The release's policy, once the apiserver enforces it."""
    eventually(
        "the image policy never refused a disallowed image",
        lambda: refused(apply_experiment(release.namespace, "evil.example/miner:1")),
    )
    return policy_name(release)


def test_image_policy_installed_and_bound_to_the_release_namespace(
    release: Release, image_policy: str
) -> None:
    api = kubernetes.client.AdmissionregistrationV1Api()
    policy = api.read_validating_admission_policy(image_policy)
    assert policy.metadata.labels["app.kubernetes.io/instance"] == RELEASE
    assert not (policy.status.type_checking and policy.status.type_checking.expression_warnings)
    binding = api.read_validating_admission_policy_binding(image_policy)
    assert binding.spec.policy_name == image_policy
    assert binding.spec.validation_actions == ["Deny"]
    (term,) = binding.spec.match_resources.namespace_selector.match_expressions
    assert (term.key, term.operator, term.values) == (
        "kubernetes.io/metadata.name",
        "In",
        [release.namespace],
    )


@pytest.mark.parametrize(
    "image",
    [
        "evil.example/miner:1",
        "cxlab.dev/runner-evil:dev",  # the allowed repository as a mere prefix
        "cxlab.dev/runner/evil:dev",  # a repository under it
        "cxlab.dev/runnerevil",
        "evil.example/cxlab.dev/runner:dev",  # the allowed repository inside another
        f"evil.example/miner@{DIGEST}",
    ],
)
def test_image_policy_refuses_a_disallowed_image_at_apply(
    release: Release, image_policy: str, image: str
) -> None:
    done = apply_experiment(release.namespace, image)
    assert done.returncode != 0, done.stdout
    message = done.stderr
    assert f"ValidatingAdmissionPolicy '{image_policy}'" in message, message
    assert f'spec.image "{image}" is not allowed' in message, message  # which image
    assert "only name an image of cxlab.dev/runner " in message, message  # which prefixes
    where = f"imagePolicy.allowedImages of release {RELEASE} in namespace {release.namespace}"
    assert where in message, message  # which value to change
    assert "leave spec.image unset" in message, message


@pytest.mark.parametrize(
    "image",
    [
        None,  # the operator's default runner image
        "cxlab.dev/runner",
        "cxlab.dev/runner:dev",
        f"cxlab.dev/runner@{DIGEST}",
        f"cxlab.dev/runner:dev@{DIGEST}",
    ],
)
def test_image_policy_accepts_an_allowed_image_at_apply(
    release: Release, image_policy: str, image: str | None
) -> None:
    done = apply_experiment(release.namespace, image)
    assert done.returncode == 0, done.stderr
    assert "created (server dry run)" in done.stdout


def test_image_policy_acts_only_in_the_release_namespace(image_policy: str) -> None:
    done = apply_experiment("default", "evil.example/miner:1")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "image",
    [
        "other.example/miner:1",
        "cxlab.dev/runner-evil:dev",  # the allowed repository as a mere prefix
    ],
)
def test_image_policy_refuses_a_schedule_whose_template_names_a_disallowed_image(
    release: Release, image_policy: str, image: str
) -> None:
    """A schedule's runs are experiments of its template: refused when the schedule is
    written, not only each run when the operator creates it (RunRefused)."""
    done = apply_schedule(release.namespace, image)
    assert refused(done), done.stdout
    message = done.stderr
    assert f"ValidatingAdmissionPolicy '{image_policy}'" in message, message
    assert f'spec.experimentTemplate.spec.image "{image}" is not allowed' in message, message
    assert "only name an image of cxlab.dev/runner" in message, message
    where = f"imagePolicy.allowedImages of release {RELEASE} in namespace {release.namespace}"
    assert where in message, message
    assert "leave spec.experimentTemplate.spec.image unset" in message, message


@pytest.mark.parametrize("image", [None, "cxlab.dev/runner:dev", f"cxlab.dev/runner@{DIGEST}"])
def test_image_policy_accepts_a_schedule_whose_template_names_an_allowed_image(
    release: Release, image_policy: str, image: str | None
) -> None:
    done = apply_schedule(release.namespace, image)
    assert done.returncode == 0, done.stderr
    assert "created (server dry run)" in done.stdout


def _custom_patch(namespace: str, name: str, body: dict[str, Any]) -> None:
    """A merge patch of an experiment."""
    kubernetes.client.CustomObjectsApi().patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, body
    )


def _finalizers(namespace: str, name: str) -> list[str]:
    found = kubernetes.client.CustomObjectsApi().list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, field_selector=f"metadata.name={name}"
    )["items"]
    return list(found[0]["metadata"].get("finalizers") or []) if found else []


def test_image_policy_checks_spec_changes_not_metadata_of_an_older_experiment(
    release: Release, image_policy: str
) -> None:
    """An experiment created before the policy (here: while its binding was away) keeps its
    image: labels, finalizers and deletion still work (the operator's finalizer comes off
    through the policy); changing its spec is checked."""
    api = kubernetes.client.AdmissionregistrationV1Api()
    custom = kubernetes.client.CustomObjectsApi()
    namespace, name, hold = release.namespace, "older-image", "cxlab.dev/test-hold"
    binding = api.api_client.sanitize_for_serialization(
        api.read_validating_admission_policy_binding(image_policy)
    )
    meta = binding["metadata"]
    binding["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    api.delete_validating_admission_policy_binding(image_policy)
    restored = False
    try:
        eventually(
            "the policy still refused without its binding",
            lambda: not refused(apply_experiment(namespace, "evil.example/miner:1")),
        )
        created = apply_experiment(
            namespace, "evil.example/miner:1", name=name, dry_run=False, finalizers=[hold]
        )
        assert created.returncode == 0, created.stderr
        api.create_validating_admission_policy_binding(binding)
        restored = True
        eventually(
            "the restored binding never refused",
            lambda: refused(apply_experiment(namespace, "evil.example/miner:1")),
        )
        # metadata only: passes
        _custom_patch(namespace, name, {"metadata": {"labels": {"checked": "yes"}}})
        # the spec: checked, the image as well as any other field
        for spec, image in (
            ({"image": "evil.example/miner:2"}, "evil.example/miner:2"),
            ({"ttlSecondsAfterFinished": 600}, "evil.example/miner:1"),
        ):
            with pytest.raises(ApiException) as error:
                _custom_patch(namespace, name, {"spec": spec})
            assert error.value.status == 403
            message = json.loads(error.value.body)["message"]
            assert f'spec.image "{image}" is not allowed' in message, message
        eventually(
            "the operator never took the experiment",
            lambda: "cxlab.dev/finalizer" in _finalizers(namespace, name),
            timeout=60,
        )
        # deletion: the finalizers come off, updates that leave the spec alone; first the
        # operator's, then ours
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        eventually(
            "the operator never removed its finalizer",
            lambda: _finalizers(namespace, name) == [hold],
            timeout=60,
        )
        ours_off = [
            {"op": "test", "path": "/metadata/finalizers", "value": [hold]},
            {"op": "remove", "path": "/metadata/finalizers"},
        ]
        run(KUBECTL, "patch", "-n", namespace, f"{PLURAL}.{GROUP}", name, "--type=json",
            "-p", json.dumps(ours_off))  # fmt: skip
        eventually(
            "the experiment was never deleted",
            lambda: (
                not custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, field_selector=f"metadata.name={name}"
                )["items"]
            ),
        )
    except BaseException:
        # Let nothing hold the namespace, even a policy that (wrongly) refuses the cleanup:
        # without the binding, strip the finalizers, then delete.
        if restored:
            api.delete_validating_admission_policy_binding(image_policy)
            restored = False
        strip = [KUBECTL, "patch", "-n", namespace, f"{PLURAL}.{GROUP}", name, "--type=merge",
                 "-p", '{"metadata":{"finalizers":null}}']  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = run(*strip, check=False)
            if done.returncode == 0 or "NotFound" in done.stderr:
                break
            time.sleep(0.5)
        run(KUBECTL, "delete", "-n", namespace, f"{PLURAL}.{GROUP}", name, "--wait=false",
            "--ignore-not-found", check=False)  # fmt: skip
        raise
    finally:
        if not restored:
            api.create_validating_admission_policy_binding(binding)


def test_image_policy_follows_the_values_on_upgrade(release: Release, image_policy: str) -> None:
    run(
        HELM, "upgrade", RELEASE, CHART, "--namespace", release.namespace, "--reuse-values",
        "--wait", "--timeout", "120s", "--set", "imagePolicy.allowedImages={evil.example/}",
    )  # fmt: skip
    eventually(
        "evil.example/ never became allowed",
        lambda: apply_experiment(release.namespace, "evil.example/miner:1").returncode == 0,
    )
    done = apply_experiment(release.namespace, "cxlab.dev/runner-evil:dev")
    assert refused(done), done.stdout
    assert "only name an image of cxlab.dev/runner, evil.example/ " in done.stderr, done.stderr
    assert apply_experiment(release.namespace, "cxlab.dev/runner:dev").returncode == 0


# --- the target policy: which service an http workload may load -----------------------------

# Namespaces the policy only reads the names of: they need not exist.
ELSEWHERE = "cxlab-chart-elsewhere"
THIRD = "cxlab-chart-third"
URL = "https://api.example.com/items?limit=10"
PATTERN = r"https://api\.example\.com(/.*)?"
KINDS = ("experiment", "schedule")
FIELD = {
    "experiment": "spec.workload.target",
    "schedule": "spec.experimentTemplate.spec.workload.target",
}


def target_policy_name(release: Release) -> str:
    return f"{RELEASE}-{release.namespace}-targets"


def service(namespace: str | None = None) -> dict[str, Any]:
    """A target Service: in the experiment's namespace, or in the one named."""
    return {"name": "api", "port": 8080, **({"namespace": namespace} if namespace else {})}


def apply_target(
    namespace: str, kind: str, target: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """A server dry run of an http experiment, or a schedule of one, calling the target."""
    if kind == "experiment":
        return apply_experiment(namespace, None, name="target-check", target=target)
    return apply_schedule(namespace, None, name="target-check", target=target)


def apply_subject(
    namespace: str, kind: str, target_namespace: str | None, as_user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """A server dry run of an experiment (or a schedule of one) whose subject is Deployment
    api, behind its target Service api (in `target_namespace`, else its own). The copy is
    made beside the experiment (its owner) from the Deployment of its own namespace, so the
    CRD refuses a target elsewhere beside a service, at any targetPolicy."""
    spec = experiment_spec(None, {"service": service(target_namespace)})
    spec["service"] = {"deployment": "api"}
    if kind == "experiment":
        return apply(namespace, "ConcurrencyExperiment", spec, "subject-check", as_user=as_user)
    return apply(
        namespace, "ExperimentSchedule", schedule_spec(spec), "subject-check", as_user=as_user
    )


def upgrade(release: Release, values: dict[str, Any]) -> None:
    """helm upgrade with these values (--set-json: a pattern's backslashes stay)."""
    sets = [
        arg for key, value in values.items() for arg in ("--set-json", f"{key}={json.dumps(value)}")
    ]
    run(HELM, "upgrade", RELEASE, CHART, "--namespace", release.namespace, "--reuse-values",
        "--wait", "--timeout", "120s", *sets)  # fmt: skip


@pytest.fixture(scope="module")
def target_policy(release: Release) -> str:
    """The release's target policy, once the apiserver enforces it (either rule: each test
    says which it found broken)."""
    probes = ({"service": service(ELSEWHERE)}, {"url": URL})
    eventually(
        "the target policy never refused a Service in another namespace nor a url",
        lambda: any(refused(apply_target(release.namespace, "experiment", p)) for p in probes),
    )
    return target_policy_name(release)


def test_target_policy_installed_and_bound_to_the_release_namespace(
    release: Release, target_policy: str
) -> None:
    api = kubernetes.client.AdmissionregistrationV1Api()
    policy = api.read_validating_admission_policy(target_policy)
    assert policy.metadata.labels["app.kubernetes.io/instance"] == RELEASE
    assert policy.spec.failure_policy == "Fail"
    assert not (policy.status.type_checking and policy.status.type_checking.expression_warnings)
    binding = api.read_validating_admission_policy_binding(target_policy)
    assert binding.spec.policy_name == target_policy
    assert binding.spec.validation_actions == ["Deny"]
    (term,) = binding.spec.match_resources.namespace_selector.match_expressions
    assert (term.key, term.operator, term.values) == (
        "kubernetes.io/metadata.name",
        "In",
        [release.namespace],
    )


def assert_service_refused(
    done: subprocess.CompletedProcess[str], release: Release, kind: str, namespace: str, rule: str
) -> None:
    """Refused by the target policy, naming the target, the rule and the value to change."""
    assert refused(done), done.stdout
    message = done.stderr
    assert f"ValidatingAdmissionPolicy '{target_policy_name(release)}'" in message, message
    assert f'{FIELD[kind]}.service "api.{namespace}" is not allowed' in message, message
    assert rule in message, message
    where = f"targetPolicy.namespaces of release {RELEASE} in namespace {release.namespace}"
    assert where in message, message


def assert_url_refused(
    done: subprocess.CompletedProcess[str], release: Release, kind: str, url: str, rule: str
) -> None:
    assert refused(done), done.stdout
    message = done.stderr
    assert f"ValidatingAdmissionPolicy '{target_policy_name(release)}'" in message, message
    assert f'{FIELD[kind]}.url "{url}" is not allowed' in message, message
    assert rule in message, message
    where = f"targetPolicy.urlPatterns of release {RELEASE} in namespace {release.namespace}"
    assert where in message, message


@pytest.mark.parametrize("kind", KINDS)
def test_target_policy_refuses_a_service_in_another_namespace(
    release: Release, target_policy: str, kind: str
) -> None:
    done = apply_target(release.namespace, kind, {"service": service(ELSEWHERE)})
    rule = f"a target Service must be in the experiment's own namespace {release.namespace}."
    assert_service_refused(done, release, kind, ELSEWHERE, rule)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("named", [False, True], ids=["unset", "named"])
def test_target_policy_accepts_a_service_in_the_own_namespace(
    release: Release, target_policy: str, kind: str, named: bool
) -> None:
    target = {"service": service(release.namespace if named else None)}
    done = apply_target(release.namespace, kind, target)
    assert done.returncode == 0, done.stderr
    assert "created (server dry run)" in done.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_target_policy_refuses_a_url_by_default(
    release: Release, target_policy: str, kind: str
) -> None:
    done = apply_target(release.namespace, kind, {"url": URL})
    rule = "a target url must match one of the allowed patterns, and there are none"
    assert_url_refused(done, release, kind, URL, rule)


def test_target_policy_follows_the_values_on_upgrade(release: Release, target_policy: str) -> None:
    """Another namespace and a url pattern allowed by Helm values, for experiments and
    schedules alike; the release's values restored after (later tests expect the default)."""
    namespace = release.namespace
    upgrade(
        release, {"targetPolicy.namespaces": [ELSEWHERE], "targetPolicy.urlPatterns": [PATTERN]}
    )
    try:
        eventually(
            f"{ELSEWHERE} never became allowed",
            lambda: (
                apply_target(namespace, "experiment", {"service": service(ELSEWHERE)}).returncode
                == 0
            ),
        )
        for kind in KINDS:
            for target in ({"service": service(ELSEWHERE)}, {"url": URL}):
                done = apply_target(namespace, kind, target)
                assert done.returncode == 0, f"{kind} {target}: {done.stderr}"
            done = apply_target(namespace, kind, {"service": service(THIRD)})
            rule = f"own namespace {namespace} or in {ELSEWHERE}."
            assert_service_refused(done, release, kind, THIRD, rule)
            # a service subject stays in its own namespace whatever targetPolicy allows
            done = apply_subject(namespace, kind, ELSEWHERE)
            assert done.returncode != 0 and "workload.target.service" in done.stderr, done
            done = apply_subject(namespace, kind, None)
            assert done.returncode == 0, f"{kind}: {done.stderr}"
            # the whole url must match, not a part of it: the host ends where the pattern says
            evil = "https://api.example.com.evil.example/items"
            done = apply_target(namespace, kind, {"url": evil})
            rule = f"a target url must match one of the allowed patterns in full: {PATTERN}."
            assert_url_refused(done, release, kind, evil, rule)
    finally:
        upgrade(release, {"targetPolicy.namespaces": [], "targetPolicy.urlPatterns": []})
    eventually(
        "the default never came back",
        lambda: refused(apply_target(namespace, "schedule", {"url": URL})),
    )


def test_target_policy_checks_spec_changes_not_metadata_of_an_older_schedule(
    release: Release, target_policy: str
) -> None:
    """A schedule created before the policy (here: while its binding was away) keeps its
    target: labels, finalizers and deletion still work; changing its spec, any field of it,
    is checked."""
    api = kubernetes.client.AdmissionregistrationV1Api()
    custom = kubernetes.client.CustomObjectsApi()
    namespace, name, hold = release.namespace, "older-target", "cxlab.dev/test-hold"
    binding = api.api_client.sanitize_for_serialization(
        api.read_validating_admission_policy_binding(target_policy)
    )
    meta = binding["metadata"]
    binding["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    other = {"service": service(ELSEWHERE)}
    api.delete_validating_admission_policy_binding(target_policy)
    restored = False

    def finalizers() -> list[str] | None:
        found = custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, SCHEDULE_PLURAL, field_selector=f"metadata.name={name}"
        )["items"]
        return list(found[0]["metadata"].get("finalizers") or []) if found else None

    try:
        eventually(
            "the policy still refused without its binding",
            lambda: not refused(apply_target(namespace, "schedule", other)),
        )
        spec = schedule_spec(experiment_spec(target=other))
        created = apply(
            namespace, "ExperimentSchedule", spec, name, dry_run=False, finalizers=[hold]
        )
        assert created.returncode == 0, created.stderr
        api.create_validating_admission_policy_binding(binding)
        restored = True
        eventually(
            "the restored binding never refused",
            lambda: refused(apply_target(namespace, "schedule", other)),
        )
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            SCHEDULE_PLURAL,
            name,
            {"metadata": {"labels": {"checked": "yes"}}},
        )
        with pytest.raises(ApiException) as error:  # any field of the spec: the target is read
            custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                SCHEDULE_PLURAL,
                name,
                {"spec": {"schedule": "@every 2h"}},
            )
        assert error.value.status == 403
        message = json.loads(error.value.body)["message"]
        assert f'{FIELD["schedule"]}.service "api.{ELSEWHERE}" is not allowed' in message, message
        # deletion: the finalizers come off, updates that leave the spec alone (the operator's,
        # if it put one on, then ours)
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, SCHEDULE_PLURAL, name)
        eventually("the operator kept its finalizer", lambda: finalizers() == [hold], timeout=60)
        ours_off = [
            {"op": "test", "path": "/metadata/finalizers", "value": [hold]},
            {"op": "remove", "path": "/metadata/finalizers"},
        ]
        run(KUBECTL, "patch", "-n", namespace, f"{SCHEDULE_PLURAL}.{GROUP}", name, "--type=json",
            "-p", json.dumps(ours_off))  # fmt: skip
        eventually("the schedule was never deleted", lambda: finalizers() is None)
    except BaseException:
        # Let nothing hold the namespace, even a policy that (wrongly) refuses the cleanup:
        # without the binding (once the apiserver has seen it go), strip the finalizers, delete.
        if restored:
            api.delete_validating_admission_policy_binding(target_policy)
            restored = False
        strip = [KUBECTL, "patch", "-n", namespace, f"{SCHEDULE_PLURAL}.{GROUP}", name,
                 "--type=merge", "-p", '{"metadata":{"finalizers":null}}']  # fmt: skip
        eventually(
            "the finalizers never came off",
            lambda: run(*strip, check=False).returncode == 0 or finalizers() is None,
        )
        run(KUBECTL, "delete", "-n", namespace, f"{SCHEDULE_PLURAL}.{GROUP}", name, "--wait=false",
            "--ignore-not-found", check=False)  # fmt: skip
        raise
    finally:
        if not restored:
            api.create_validating_admission_policy_binding(binding)


# --- the subject policy: who may make the operator copy a Deployment -----------------------

SUBJECT_FIELD = {"experiment": "spec.service", "schedule": "spec.experimentTemplate.spec.service"}


def _grant(namespace: str, name: str, rules: list[dict[str, Any]], account: str) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api()
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    })  # fmt: skip


@pytest.fixture(scope="module")
def experimenter(release: Release) -> str:
    """A ServiceAccount of the release's namespace that may apply experiments and schedules,
    and nothing else (its user name, for impersonation)."""
    namespace = release.namespace
    kubernetes.client.CoreV1Api().create_namespaced_service_account(
        namespace, {"metadata": {"name": "experimenter"}}
    )
    verbs = ["create", "get", "patch"]  # what kubectl apply asks for
    rules = [{"apiGroups": [GROUP], "resources": [PLURAL, SCHEDULE_PLURAL], "verbs": verbs}]
    _grant(namespace, "experimenter", rules, "experimenter")
    return f"system:serviceaccount:{namespace}:experimenter"


def test_subject_policy_refuses_a_service_subject_unless_its_author_may_create_the_copies(
    release: Release, experimenter: str
) -> None:
    """The operator creates a variant's Deployment and Service with its own rights: one who may
    create experiments but not those is refused, naming what they lack, until RBAC grants it."""
    namespace, policy = release.namespace, f"{RELEASE}-{release.namespace}-subjects"

    def says(lacking: str) -> Callable[[], bool]:
        def check() -> bool:
            for kind in KINDS:
                done = apply_subject(namespace, kind, None, as_user=experimenter)
                if not refused(done) or f"{experimenter} may not create {lacking} there" not in (
                    done.stderr
                ):
                    return False
                assert f"ValidatingAdmissionPolicy '{policy}'" in done.stderr, done.stderr
                assert f"{SUBJECT_FIELD[kind]} makes the operator create a copy" in done.stderr
            return True

        return check

    # lacking both rights, the first is named
    eventually("never refused for lack of both rights", says("deployments.apps"))
    # what it may do without a service subject, it still may
    done = apply(
        namespace, "ConcurrencyExperiment", experiment_spec(), "plain", as_user=experimenter
    )
    assert done.returncode == 0, done.stderr
    _grant(namespace, "deployments", [{"apiGroups": ["apps"], "resources": ["deployments"],
                                       "verbs": ["create"]}], "experimenter")  # fmt: skip
    eventually("never refused for lack of services alone", says("services"))
    _grant(namespace, "services", [{"apiGroups": [""], "resources": ["services"],
                                    "verbs": ["create"]}], "experimenter")  # fmt: skip

    def accepted() -> bool:
        return all(
            apply_subject(namespace, kind, None, as_user=experimenter).returncode == 0
            for kind in KINDS
        )

    eventually("never accepted once both rights were granted", accepted)


def test_uninstall_leaves_no_operator_pods(release: Release) -> None:
    run(HELM, "uninstall", RELEASE, "--namespace", release.namespace, "--wait")
    core = kubernetes.client.CoreV1Api()
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod(release.namespace, label_selector=OPERATOR_PODS).items:
        assert time.monotonic() < deadline, "the operator Pod outlived helm uninstall"
        time.sleep(0.5)
    assert not core.list_namespaced_pod(release.namespace).items
    assert _crd_exists(), "the CRD must outlive the release"
    # the cluster-scoped policies go with the release
    admission = kubernetes.client.AdmissionregistrationV1Api()
    mine = f"app.kubernetes.io/instance={RELEASE}"
    for listed in (
        admission.list_validating_admission_policy(label_selector=mine),
        admission.list_validating_admission_policy_binding(label_selector=mine),
    ):
        names = {item.metadata.name for item in listed.items}
        assert not {policy_name(release), target_policy_name(release),
                    f"{RELEASE}-{release.namespace}-subjects"} & names  # fmt: skip
