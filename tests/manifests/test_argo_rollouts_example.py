"""The Argo Rollouts gate (manifests/examples/argo-rollouts/) against Argo Rollouts' own CRDs:
the AnalysisTemplate and the Rollout fit their schemas as `kubectl apply` checks them (unknown
fields refused: kubectl's default strict field validation); the experiment its Job applies is
one cxlab's parser and cxlab's CRD take; the Job applies that experiment and then runs
`cxlab wait` on it, as a ServiceAccount that may do both, with the chart's image.

The reference is Argo Rollouts' module from the Go module proxy, at the version and checksum
hack/argo-rollouts-crds.sh pins, its CRDs linked from the machine cache into
build/argo-rollouts/crds/. No cluster, no Argo Rollouts controller."""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers import EXAMPLES, ROOT
from helpers.schema import openapi_to_jsonschema

from cxlab.cli.parser import build_parser
from cxlab.cli.wait import wait_command
from cxlab.crd import custom_resource_definition
from cxlab.experiments.resource import load_experiments

FETCH = ROOT / "hack" / "argo-rollouts-crds.sh"
GATE = EXAMPLES / "argo-rollouts"
TEMPLATE = GATE / "analysis-template.yaml"
ROLLOUT = GATE / "rollout.yaml"
CHART_VALUES = ROOT / "charts" / "cxlab" / "values.yaml"
REVISION = "6d4f8b9c7f"  # a pod-template-hash, as the Rollout passes it


# ---- the reference ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def argo_crds() -> Path:
    """Argo Rollouts' CRDs, fetched unless build/argo-rollouts/crds/ is current. Never skipped:
    without its reference this test cannot say anything."""
    if shutil.which("go") is None:
        pytest.fail(f"go is not on PATH: {FETCH.relative_to(ROOT)} downloads the reference with it")
    fetched = subprocess.run(["bash", str(FETCH)], capture_output=True, text=True, timeout=300)
    if fetched.returncode:
        pytest.fail(
            f"{FETCH.relative_to(ROOT)} could not fetch Argo Rollouts' CRDs, the reference of "
            f"this test (exit {fetched.returncode}):\n{fetched.stdout}{fetched.stderr}"
        )
    return Path(fetched.stdout.strip().splitlines()[-1])


def closed(schema: Any) -> Any:
    """A structural schema whose objects refuse unknown fields, as the apiserver does under
    `kubectl apply`'s strict field validation: every object that lists its properties takes
    no others, unless it preserves unknown fields."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    listed = "properties" in schema and "additionalProperties" not in schema
    if listed and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def validator(crds: Path, name: str) -> jsonschema.Draft202012Validator:
    # libyaml where PyYAML has it: the CRDs are 0.6 MB each
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((crds / name).read_text(), Loader=loader)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema = openapi_to_jsonschema(closed(version["schema"]["openAPIV3Schema"]))
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def analysis_template_schema(argo_crds: Path) -> jsonschema.Draft202012Validator:
    return validator(argo_crds, "analysis-template-crd.yaml")


@pytest.fixture(scope="session")
def rollout_schema(argo_crds: Path) -> jsonschema.Draft202012Validator:
    return validator(argo_crds, "rollout-crd.yaml")


def refusals(schema: jsonschema.Draft202012Validator, document: dict[str, Any]) -> list[str]:
    return [
        f"{error.json_path}: {error.message}"
        for error in sorted(schema.iter_errors(document), key=lambda e: list(e.path))
    ]


# ---- the example ------------------------------------------------------------------------------


def documents(path: Path) -> dict[str, dict[str, Any]]:
    """The file's documents by kind."""
    found = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    by_kind = {d["kind"]: d for d in found}
    assert len(by_kind) == len(found), f"{path.name}: one document of each kind"
    return by_kind


def the_job(template: dict[str, Any]) -> dict[str, Any]:
    (metric,) = template["spec"]["metrics"]
    job: dict[str, Any] = metric["provider"]["job"]
    return job


def pod_spec(template: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = the_job(template)["spec"]["template"]["spec"]
    return spec


def argo_args(text: str) -> str:
    """What Argo Rollouts makes of {{args.revision}} before the Job is created."""
    return text.replace("{{args.revision}}", REVISION)


# ---- Argo Rollouts' schemas -------------------------------------------------------------------


def test_the_analysis_template_fits_argo_rollouts_crd(
    analysis_template_schema: jsonschema.Draft202012Validator,
) -> None:
    template = documents(TEMPLATE)["AnalysisTemplate"]
    assert (template["apiVersion"], template["kind"]) == (
        "argoproj.io/v1alpha1",
        "AnalysisTemplate",
    )
    problems = refusals(analysis_template_schema, template)
    assert not problems, "\n".join(problems)


def test_the_rollout_fits_argo_rollouts_crd_and_passes_the_templates_args(
    rollout_schema: jsonschema.Draft202012Validator,
) -> None:
    rollout = documents(ROLLOUT)["Rollout"]
    problems = refusals(rollout_schema, rollout)
    assert not problems, "\n".join(problems)
    template = documents(TEMPLATE)["AnalysisTemplate"]
    (step,) = [
        s["analysis"] for s in rollout["spec"]["strategy"]["canary"]["steps"] if "analysis" in s
    ]
    assert step["templates"] == [{"templateName": template["metadata"]["name"]}]
    needed = {a["name"] for a in template["spec"]["args"] if "value" not in a}
    assert {a["name"] for a in step["args"]} == needed
    assert {a["name"]: a["valueFrom"] for a in step["args"]}["revision"] == {
        "podTemplateHashValue": "Latest"
    }


def _parent(document: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    node: Any = document
    for step in path[:-1]:
        node = node[step]
    return node


def _rename(path: tuple[str | int, ...], new: str) -> Callable[[dict[str, Any]], None]:
    def change(template: dict[str, Any]) -> None:
        parent = _parent(template, path)
        parent[new] = parent.pop(path[-1])

    return change


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(template: dict[str, Any]) -> None:
        _parent(template, path)[path[-1]] = value

    return change


METRIC = ("spec", "metrics", 0)
POD = (*METRIC, "provider", "job", "spec", "template", "spec")
BROKEN = {
    "a misspelled metric field": _set((*METRIC, "sucessCondition"), "result == true"),
    "a misspelled limit": _rename((*METRIC, "failureLimit"), "failurLimit"),
    "a provider Argo Rollouts has not": _rename((*METRIC, "provider", "job"), "kubernetesJob"),
    "a misspelled Job field": _rename(
        (*METRIC, "provider", "job", "spec", "backoffLimit"), "backofLimit"
    ),
    "a misspelled container field": _rename((*POD, "containers", 0, "command"), "commands"),
    "a command that is not a list": _set(
        (*POD, "containers", 0, "command"), "python3 -m cxlab.cli"
    ),
    "a count that is not a count": _set((*METRIC, "count"), 1.5),
}


@pytest.mark.parametrize("change", BROKEN.values(), ids=BROKEN.keys())
def test_the_schema_refuses_a_broken_template(
    change: Callable[[dict[str, Any]], None],
    analysis_template_schema: jsonschema.Draft202012Validator,
) -> None:
    """What the checks above would miss if the reference were loose."""
    template = copy.deepcopy(documents(TEMPLATE)["AnalysisTemplate"])
    change(template)
    assert refusals(analysis_template_schema, template)


# ---- what the Job does ------------------------------------------------------------------------


def test_the_experiment_it_applies_is_valid(tmp_path: Path) -> None:
    """The ConfigMap's experiment, named as the Job names it, passes cxlab's parser (as
    `cxlab run` reads a file) and cxlab's CRD schema (as the apiserver checks it), and has
    objectives to gate on."""
    by_kind = documents(TEMPLATE)
    volumes = {v["name"]: v for v in pod_spec(by_kind["AnalysisTemplate"])["volumes"]}
    config_map = by_kind["ConfigMap"]
    assert volumes["experiment"]["configMap"]["name"] == config_map["metadata"]["name"]
    experiment = yaml.safe_load(config_map["data"]["experiment.yaml"])
    experiment["metadata"]["name"] = argo_args(_env(_container(by_kind, "apply"))["EXPERIMENT"])
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    (parsed,) = load_experiments(path)
    assert parsed.name == f"canary-gate-{REVISION}"
    assert parsed.spec.objectives, "a gate without objectives passes whatever it measures"
    crd = custom_resource_definition()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.validate(experiment, openapi_to_jsonschema(crd))


def _container(by_kind: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    spec = pod_spec(by_kind["AnalysisTemplate"])
    (found,) = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name]
    return found


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_job_applies_the_experiment_then_waits_for_it() -> None:
    """The init container applies the experiment; the Job's one container is `cxlab wait` on
    the same experiment, in the Pod's namespace, within the Job's deadline."""
    by_kind = documents(TEMPLATE)
    spec = pod_spec(by_kind["AnalysisTemplate"])
    assert [c["name"] for c in spec["initContainers"]] == ["apply"]
    (wait,) = spec["containers"]
    assert wait["command"] == ["python3", "-m", "cxlab.cli"], "the image's cxlab"
    args = build_parser().parse_args([argo_args(a) for a in wait["args"]])
    assert args.handler is wait_command
    name = argo_args(_env(_container(by_kind, "apply"))["EXPERIMENT"])
    assert args.source == f"cx/{name}"
    assert args.namespace == "$(NAMESPACE)"
    assert _env(wait)["NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert _env(_container(by_kind, "apply"))["NAMESPACE"] == _env(wait)["NAMESPACE"]
    job = the_job(by_kind["AnalysisTemplate"])["spec"]
    assert args.timeout < job["activeDeadlineSeconds"], "cxlab wait says it timed out (124)"
    assert job["backoffLimit"] == 0 and spec["restartPolicy"] == "Never"


def test_the_job_runs_the_charts_image_as_the_chart_runs_it() -> None:
    values = yaml.safe_load(CHART_VALUES.read_text())
    image = f"{values['image']['repository']}:{values['image']['tag']}"
    spec = pod_spec(documents(TEMPLATE)["AnalysisTemplate"])
    for container in spec["initContainers"] + spec["containers"]:
        assert container["image"] == image, container["name"]
        assert container["imagePullPolicy"] == values["image"]["pullPolicy"], container["name"]
        assert container["securityContext"] == values["securityContext"], container["name"]
    assert spec["securityContext"] == values["podSecurityContext"]


# What each step of the Job asks of the apiserver (API group, resource, verb), and why.
NEEDED = {
    ("cxlab.dev", "concurrencyexperiments", "create"),  # the apply
    ("cxlab.dev", "concurrencyexperiments", "delete"),  # the apply, when the revision ran before
    ("cxlab.dev", "concurrencyexperiments", "get"),  # cxlab wait, until it has finished
    (
        "",
        "configmaps",
        "list",
    ),  # cxlab wait's summary: the full trial entries (Kube.get_experiment)
}


def test_its_service_account_may_do_what_the_job_does() -> None:
    by_kind = documents(TEMPLATE)
    account = pod_spec(by_kind["AnalysisTemplate"])["serviceAccountName"]
    assert by_kind["ServiceAccount"]["metadata"]["name"] == account
    binding, role = by_kind["RoleBinding"], by_kind["Role"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted >= NEEDED
