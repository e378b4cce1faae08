"""The Helm chart (charts/cxlab), rendered without a cluster: lint with each ci/ scenario,
what the templates produce, and no drift from the canonical CRD, RBAC rules and dashboards."""

from __future__ import annotations

import filecmp
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.chart import CHART, HELM, helm, of_kind, only, render

from cxlab.config import OperatorConfig
from cxlab.crd import GENERATED

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "manifests" / "rbac" / "operator.yaml"
SCENARIOS = sorted(p.name for p in (CHART / "ci").glob("*.yaml"))


def rule_set(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Rules as (group, resource, verb) triples: the same permissions however they are grouped."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


@pytest.mark.parametrize("scenario", [None, *SCENARIOS])
def test_helm_lint(scenario: str | None) -> None:
    extra = ["--values", str(CHART / "ci" / scenario)] if scenario else []
    helm("lint", "--strict", str(CHART), *extra)


def test_the_schema_refuses_bad_values() -> None:
    run = subprocess.run(
        [str(HELM), "template", "cx", str(CHART), "--set", "settings.maxAttempts=0"],
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "maxAttempts" in run.stderr


def test_deployment_restricted_no_resources() -> None:
    deployment = only(render(), "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert "resources" not in container, "no default resources: trials need the node's CPUs"
    assert container["command"] == ["python3", "-m", "cxlab.cli", "operator"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "metrics": 8081}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CXLAB_RUNNER_IMAGE"] == "cxlab.dev/runner:dev"
    assert env["CXLAB_RUNNER_LINGER"] == "0s"  # no PodMonitor: nothing to linger for
    assert env["CXLAB_RUNNER_FINAL_READ"] == "10s" == OperatorConfig().final_read
    assert env["CXLAB_RECONCILE_INTERVAL"] == "30s" and env["CXLAB_WORKERS"] == "16"
    assert not any(arg.startswith("--namespace") for arg in container["args"])
    # the selector must never catch trial Pods (app.kubernetes.io/name=cxlab, instance=<experiment>)
    assert spec["selector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"


def test_values_reach_the_operator() -> None:
    deployment = only(
        render(
            "runnerImage.repository=registry.example.com/runner",
            "runnerImage.tag=1.2",
            "settings.runnerLinger=5s",
            "image.tag=abc",
            "resources.requests.cpu=50m",
        ),
        "Deployment",
    )
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CXLAB_RUNNER_IMAGE"] == "registry.example.com/runner:1.2"
    assert env["CXLAB_RUNNER_LINGER"] == "5s"
    assert container["image"] == "cxlab.dev/operator:abc"
    assert container["resources"] == {"requests": {"cpu": "50m"}}


def test_monitors_only_when_enabled() -> None:
    kinds = {doc["kind"] for doc in render()}
    assert not kinds & {"PodMonitor", "ServiceMonitor"}
    docs = render("prometheus.podMonitor.enabled=true", "prometheus.serviceMonitor.enabled=true")
    pod_monitor = only(docs, "PodMonitor")
    assert pod_monitor["spec"]["selector"]["matchExpressions"] == [
        {"key": "app.kubernetes.io/component", "operator": "In", "values": ["trial", "trial-host"]}
    ]
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert pod_monitor["spec"]["namespaceSelector"] == {"any": True}
    # a runner lingers long enough for a 2 s scrape to see its final values
    (container,) = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {"name": "CXLAB_RUNNER_LINGER", "value": "5s"} in container["env"]
    service_monitor = only(docs, "ServiceMonitor")
    service = only(docs, "Service")
    assert service_monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    # the dashboards select the operator by job="cxlab-operator", the schedule gauges by their
    # own namespace label: both must survive the Prometheus Operator's relabelling
    [endpoint] = service_monitor["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True
    assert {"targetLabel": "job", "replacement": "cxlab-operator"} in endpoint["relabelings"]


def test_cluster_wide_rbac_is_the_rbac_of_manifests() -> None:
    docs = render()
    (canonical,) = (d for d in yaml.safe_load_all(RBAC.read_text()) if d["kind"] == "ClusterRole")
    cluster_role = only(docs, "ClusterRole")
    assert cluster_role["rules"] == canonical["rules"], "charts/cxlab and manifests/rbac differ"
    assert [r["metadata"]["name"] for r in of_kind(docs, "Role")] == ["cx-cxlab-leader-election"]
    binding = only(docs, "ClusterRoleBinding")
    account = only(docs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "cxlab-system"}
    ]


def test_namespaced_rbac_grants_the_same_only_in_the_listed_namespaces() -> None:
    docs = render("watchNamespaces={team-a,team-b}")
    (canonical,) = (d for d in yaml.safe_load_all(RBAC.read_text()) if d["kind"] == "ClusterRole")
    cluster_role = only(docs, "ClusterRole")
    roles = [r for r in of_kind(docs, "Role") if not r["metadata"]["name"].endswith("election")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    bindings = of_kind(docs, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == [
        "cxlab-system",  # the Lease's
        "team-a",
        "team-b",
    ]
    # cluster-wide only reads of cluster-scoped resources (CRDs, namespaces, nodes, and the
    # kubelets' counters of a service's copy through the node proxy)
    assert {resource for _, resource, _ in rule_set(cluster_role["rules"])} == {
        "customresourcedefinitions",
        "namespaces",
        "nodes",
        "nodes/proxy",
    }
    for role in roles:
        assert rule_set(role["rules"]) | rule_set(cluster_role["rules"]) == rule_set(
            canonical["rules"]
        )
    (container,) = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [a for a in container["args"] if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    pod_monitor = only(
        render("watchNamespaces={team-a}", "prometheus.podMonitor.enabled=true"), "PodMonitor"
    )
    assert pod_monitor["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}


def test_chart_crds_are_the_canonical_crds() -> None:
    for path in GENERATED:
        chart = CHART / "files" / "crds" / path.name
        assert filecmp.cmp(chart, path, shallow=False), "run `make chart-sync`"
    assert {p.name for p in (CHART / "files" / "crds").glob("*.yaml")} == {
        p.name for p in GENERATED
    }


def test_crds_rendered_with_keep_and_only_when_installed() -> None:
    canonical = {
        d["metadata"]["name"]: d for d in (yaml.safe_load(p.read_text()) for p in GENERATED)
    }
    rendered = of_kind(render(), "CustomResourceDefinition")
    assert {crd["metadata"]["name"] for crd in rendered} == set(canonical)  # both kinds
    for crd in rendered:
        assert crd["spec"] == canonical[crd["metadata"]["name"]]["spec"]
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    for crd in of_kind(render("crds.keep=false"), "CustomResourceDefinition"):
        assert "annotations" not in crd["metadata"]
    assert not of_kind(render("crds.install=false"), "CustomResourceDefinition")


def test_chart_dashboards_are_the_repository_dashboards() -> None:
    repository = sorted((ROOT / "dashboards").glob("*.json"))
    chart = sorted((CHART / "dashboards").glob("*.json"))
    assert [p.name for p in chart] == [p.name for p in repository], "run `make chart-sync`"
    for mine, theirs in zip(chart, repository, strict=True):
        assert filecmp.cmp(mine, theirs, shallow=False), f"{mine.name}: run `make chart-sync`"


def test_dashboards_as_configmaps_for_the_grafana_sidecar() -> None:
    chart = sorted((CHART / "dashboards").glob("*.json"))
    if not chart:
        pytest.skip("no dashboards yet (dashboards/*.json)")
    maps = [
        m for m in of_kind(render(), "ConfigMap") if "grafana_dashboard" in m["metadata"]["labels"]
    ]
    assert len(maps) == len(chart)
    for config_map in maps:
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((key, text),) = config_map["data"].items()
        assert text == (CHART / "dashboards" / key).read_text().rstrip("\n")
    assert not of_kind(render("dashboards.enabled=false"), "ConfigMap")


def test_helm_test_pod_runs_as_its_own_least_privileged_account() -> None:
    docs = render()
    pod = only(docs, "Pod", hooks=True)
    role = only(docs, "Role", hooks=True)
    account = only(docs, "ServiceAccount", hooks=True)
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert rule_set(role["rules"]) == {
        ("cxlab.dev", "concurrencyexperiments", verb) for verb in ("create", "get", "delete")
    }
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def admission(docs: list[dict[str, Any]], what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ValidatingAdmissionPolicy of the chart and its binding: "images" or "targets"."""
    found = [
        doc
        for doc in docs
        if doc["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
        and doc["metadata"]["name"].endswith(f"-{what}")
    ]
    return only(found, "ValidatingAdmissionPolicy"), only(found, "ValidatingAdmissionPolicyBinding")


def image_policy(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ValidatingAdmissionPolicy on spec.image and its binding."""
    return admission(docs, "images")


def target_policy(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ValidatingAdmissionPolicy on workload.target and its binding."""
    return admission(docs, "targets")


def variable(policy: dict[str, Any], name: str) -> str:
    (expression,) = (v["expression"] for v in policy["spec"]["variables"] if v["name"] == name)
    return str(expression)


def allowed_images(policy: dict[str, Any]) -> list[str]:
    """The policy's allowed entries: its `allowed` variable, a CEL list literal of strings."""
    entries: list[str] = json.loads(variable(policy, "allowed"))
    return entries


def test_image_policy_limits_spec_image_to_the_runner_repository_by_default() -> None:
    policy, binding = image_policy(render())
    # cluster-scoped: unique per release (name and namespace), with the usual labels
    assert policy["metadata"]["name"] == "cx-cxlab-cxlab-system-images"
    assert binding["metadata"]["name"] == policy["metadata"]["name"]
    assert "namespace" not in policy["metadata"] and "namespace" not in binding["metadata"]
    for doc in (policy, binding):
        assert doc["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "cx"
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail" and "paramKind" not in spec
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["cxlab.dev"]
    # both kinds: a schedule's template is checked when the schedule is written; not the
    # status subresources
    assert rule["resources"] == ["concurrencyexperiments", "experimentschedules"]
    assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
    assert allowed_images(policy) == ["cxlab.dev/runner"]
    conditions = {c["name"]: c["expression"] for c in spec["matchConditions"]}
    sets_image = conditions["sets-spec-image"]
    for what in ("has(dyn(object.spec).image)",
                 "has(dyn(object.spec).experimentTemplate.spec.image)"):  # fmt: skip
        assert what in sets_image, what
    assert "oldObject.spec != object.spec" in conditions["creates-or-changes-spec"]
    assert "experimentTemplate.spec.image" in variable(policy, "image")
    assert "'spec.experimentTemplate.spec.image'" in variable(policy, "field")
    (validation,) = spec["validations"]
    assert validation["reason"] == "Forbidden"
    assert "\n" not in validation["message"]
    assert "imagePolicy.allowedImages" in validation["message"]
    message = validation["messageExpression"]
    for what in ("variables.field", "variables.image", "variables.allowed.join",
                 "imagePolicy.allowedImages", "release cx in namespace cxlab-system",
                 '"cxlab.dev/runner:dev"'):  # fmt: skip
        assert what in message, what
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "paramRef" not in binding["spec"]
    # every namespace when the operator watches every namespace
    assert binding["spec"]["matchResources"] == {"namespaceSelector": {}}


def test_image_policy_allowed_list_follows_values() -> None:
    policy, _ = image_policy(
        render(
            "runnerImage.repository=registry.example.com/cx/runner",
            "imagePolicy.allowedImages={registry.example.com/team/,docker.io/library/busybox}",
        )
    )
    # the runner repository always, then the listed entries, once each
    assert allowed_images(policy) == [
        "registry.example.com/cx/runner",
        "registry.example.com/team/",
        "docker.io/library/busybox",
    ]
    policy, _ = image_policy(render("imagePolicy.allowedImages={cxlab.dev/runner,cxlab.dev/}"))
    assert allowed_images(policy) == ["cxlab.dev/runner", "cxlab.dev/"]


def test_image_policy_binding_scoped_to_the_watched_or_selected_namespaces() -> None:
    _, binding = image_policy(render("watchNamespaces={team-a,team-b}"))
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
        ]
    }
    _, binding = image_policy(
        render("watchNamespaces={team-a}", "imagePolicy.namespaceSelector.matchLabels.cx=on")
    )
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"cx": "on"}}


POLICIES = {"imagePolicy": "images", "targetPolicy": "targets", "subjectPolicy": "subjects"}


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_disabled_renders_nothing_of_its_own(policy: str) -> None:
    names = {doc["metadata"]["name"] for doc in render(f"{policy}.enabled=false")}
    for other, suffix in POLICIES.items():
        assert (f"cx-cxlab-cxlab-system-{suffix}" in names) == (other != policy), names
    kinds = {doc["kind"] for doc in render(*(f"{p}.enabled=false" for p in POLICIES))}
    assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@pytest.mark.parametrize(
    "entry",
    [
        "cxlab.dev/runner:dev",  # a tag: entries are repositories
        "cxlab.dev/runner@sha256:0123",
        "nginx:1",
        "",
        "a b",
        "/abs",
        "registry.example.com/team//x",
        'cxlab.dev/ru"nner',  # nothing that could leave the CEL string literal
    ],
)
def test_the_schema_refuses_an_allowed_image_that_is_no_repository(entry: str) -> None:
    run = subprocess.run(
        [str(HELM), "template", "cx", str(CHART), "--set-json",
         f"imagePolicy.allowedImages={json.dumps([entry])}"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert run.returncode != 0 and "imagePolicy.allowedImages" in run.stderr


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_needs_kubernetes_1_30(policy: str) -> None:
    others = [arg for p in POLICIES if p != policy for arg in ("--set", f"{p}.enabled=false")]
    older = ["--kube-version", "1.29.4", *others]
    run = subprocess.run(
        [str(HELM), "template", "cx", str(CHART), *older], capture_output=True, text=True
    )
    assert run.returncode != 0 and f"{policy}.enabled=false" in run.stderr
    helm("template", "cx", str(CHART), *older, "--set", f"{policy}.enabled=false")


def target_lists(policy: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The policy's allowed namespaces and url patterns: CEL list literals of strings."""
    namespaces: list[str] = json.loads(variable(policy, "namespaces"))
    patterns: list[str] = json.loads(variable(policy, "urlPatterns"))
    return namespaces, patterns


def test_target_policy_allows_only_a_service_in_the_own_namespace_by_default() -> None:
    policy, binding = target_policy(render())
    # cluster-scoped: unique per release (name and namespace), with the usual labels
    assert policy["metadata"]["name"] == "cx-cxlab-cxlab-system-targets"
    assert binding["metadata"]["name"] == policy["metadata"]["name"]
    assert "namespace" not in policy["metadata"] and "namespace" not in binding["metadata"]
    for doc in (policy, binding):
        assert doc["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "cx"
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail" and "paramKind" not in spec
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["cxlab.dev"]
    assert rule["resources"] == ["concurrencyexperiments", "experimentschedules"]
    assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
    assert target_lists(policy) == ([], [])
    conditions = {c["name"]: c["expression"] for c in spec["matchConditions"]}
    # an object without a target passes; so does an update that leaves the spec alone
    for what in ("has(dyn(object.spec).workload.target)",
                 "has(dyn(object.spec).experimentTemplate.spec.workload.target)"):  # fmt: skip
        assert what in conditions["sets-a-target"], what
    assert "oldObject.spec != object.spec" in conditions["creates-or-changes-spec"]
    assert "experimentTemplate.spec.workload.target" in variable(policy, "target")
    assert "request.namespace" in variable(policy, "serviceNamespace")
    service, url = spec["validations"]
    assert "variables.serviceNamespace == request.namespace" in service["expression"]
    assert "allowed == '*'" in service["expression"]
    assert "'^(?:' + pattern + ')$'" in url["expression"]  # the whole url, not a part of it
    for validation, value, rule_text in (
        (service, "targetPolicy.namespaces",
         "a target Service must be in the experiment\\'s own namespace"),
        (url, "targetPolicy.urlPatterns", "a target url must match one of the allowed patterns"),
    ):  # fmt: skip
        assert validation["reason"] == "Forbidden"
        assert "\n" not in validation["message"] and value in validation["message"]
        message = validation["messageExpression"]
        # the target, the rule, the value to change
        for what in ("variables.field", rule_text, value, "release cx in namespace cxlab-system"):
            assert what in message, what
    assert "variables.target.service.name" in service["messageExpression"]
    assert "variables.url" in url["messageExpression"]
    assert "substring(0, 200)" in variable(policy, "url")
    assert "there are none: every url target is refused" in url["messageExpression"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"] == {"namespaceSelector": {}}


def test_target_policy_lists_follow_values() -> None:
    patterns = ["https://api\\.example\\.com(/.*)?", "http://[a-z]+\\.team\\.svc(:8080)?/.*"]
    policy, _ = target_policy(
        render("targetPolicy.namespaces={shared,tools}",
               json_values={"targetPolicy.urlPatterns": patterns})
    )  # fmt: skip
    assert target_lists(policy) == (["shared", "tools"], patterns)
    service, url = policy["spec"]["validations"]
    assert "or in shared, tools." in service["messageExpression"]
    assert "allowed patterns in full: " in url["messageExpression"]
    assert json.dumps(", ".join(patterns))[1:-1] in url["messageExpression"]
    everywhere, _ = target_policy(render("targetPolicy.namespaces={*}"))
    assert target_lists(everywhere) == (["*"], [])


def test_target_policy_patterns_survive_quoting() -> None:
    """A pattern reaches CEL as a JSON string literal (a CEL one too): quotes and backslashes
    stay what the admin wrote."""
    patterns = ['https://x\\.example/"q"', "https://y\\.example/'s'", "https://z/\\d+<&>"]
    policy, _ = target_policy(render(json_values={"targetPolicy.urlPatterns": patterns}))
    assert target_lists(policy) == ([], patterns)


def test_target_policy_binding_scoped_to_the_watched_or_selected_namespaces() -> None:
    _, binding = target_policy(render("watchNamespaces={team-a,team-b}"))
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
        ]
    }
    _, binding = target_policy(
        render("watchNamespaces={team-a}", "targetPolicy.namespaceSelector.matchLabels.cx=on")
    )
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"cx": "on"}}


@pytest.mark.parametrize(
    ("value", "entry"),
    [
        ("namespaces", "Team_A"),
        ("namespaces", "team-a.svc"),
        ("namespaces", "a" * 64),
        ("namespaces", "*team"),
        ("urlPatterns", ""),
        ("urlPatterns", "https://(x"),  # no RE2
        ("urlPatterns", "https://x(?=y)"),  # lookahead: not RE2
    ],
)
def test_the_schema_refuses_a_bad_target_policy_entry(value: str, entry: str) -> None:
    run = subprocess.run(
        [str(HELM), "template", "cx", str(CHART), "--set-json",
         f"targetPolicy.{value}={json.dumps([entry])}"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert run.returncode != 0 and f"targetPolicy.{value}" in run.stderr


def test_two_replicas_take_turns_through_a_lease_one_runs_without() -> None:
    docs = render()
    deployment = only(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"  # the new one stands by
    assert "--leader-elect" in container["args"]
    assert "--lease-duration=15" in container["args"]
    namespace = next(e for e in container["env"] if e["name"] == "POD_NAMESPACE")
    assert namespace["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    role = next(
        r for r in of_kind(docs, "Role") if r["metadata"]["name"].endswith("leader-election")
    )
    assert role["metadata"]["namespace"] == "cxlab-system"
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}]  # fmt: skip
    spread = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert spread["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 100
    single = render("replicas=1")
    deployment = only(single, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert deployment["spec"]["strategy"]["type"] == "Recreate"  # never two at once
    assert "--leader-elect" not in container["args"] and not of_kind(single, "Role")


def test_subject_policy_asks_the_authorizer_whether_the_requester_may_create_the_copies() -> None:
    """spec.service makes the operator create a Deployment and a Service with its own rights:
    the requester must hold both rights in the namespace (the apiserver's authorizer)."""
    policy, binding = admission(render("watchNamespaces={team-a}"), "subjects")
    assert policy["metadata"]["name"] == "cx-cxlab-cxlab-system-subjects"
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["concurrencyexperiments", "experimentschedules"]
    conditions = {c["name"]: c["expression"] for c in spec["matchConditions"]}
    assert "has(dyn(object.spec).service)" in conditions["sets-spec-service"]
    assert "experimentTemplate.spec.service" in conditions["sets-spec-service"]
    assert "oldObject.spec != object.spec" in conditions["creates-or-changes-spec"]
    deployments = " ".join(variable(policy, "mayCreateDeployments").split())
    services = " ".join(variable(policy, "mayCreateServices").split())
    assert deployments == (
        "authorizer.group('apps').resource('deployments').namespace(request.namespace)"
        " .check('create').allowed()"
    )
    assert services == (
        "authorizer.group('').resource('services').namespace(request.namespace)"
        " .check('create').allowed()"
    )
    expressions = [v["expression"] for v in spec["validations"]]
    assert expressions == ["variables.mayCreateDeployments", "variables.mayCreateServices"]
    # a messageExpression may not call the authorizer (the apiserver falls back to the static
    # message): the variables that do are in the expressions only
    for validation, right in zip(
        spec["validations"], ("deployments.apps", "services"), strict=True
    ):
        assert "mayCreate" not in validation["messageExpression"]
        assert f"may not create {right} there" in validation["messageExpression"]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}
        ]
    }
