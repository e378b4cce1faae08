"""The CRD is generated from the spec models: the committed file must match, and what the
models accept the schema accepts too (its CEL rules are exercised on the real apiserver in
tests/cluster)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers import EXAMPLES
from helpers.schema import openapi_to_jsonschema
from helpers.specs import document

from cxlab.crd import CRD_PATH, GENERATED, custom_resource_definition, render
from cxlab.experiments.resource import load_experiments
from cxlab.experiments.spec import ExperimentSpec
from cxlab.rules import declarations


def test_committed_crd_is_generated_from_the_models() -> None:
    assert CRD_PATH.read_text() == render(), "run `make crd` and commit the result"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    version = custom_resource_definition()["spec"]["versions"][0]
    converted: dict[str, Any] = openapi_to_jsonschema(version["schema"]["openAPIV3Schema"])
    return converted


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_fits_the_crd_schema(path: Path, schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema)  # validate() checks the schema anew
    for experiment in yaml.safe_load_all(path.read_text()):
        validator.validate(experiment)
    assert load_experiments(path)


def test_the_schema_rejects_what_the_models_reject_by_type(schema: dict[str, Any]) -> None:
    bad = document(
        workload={"type": "sleep", "tasks": 1, "rtt": "soon"},
        models=[{"model": "fibers", "workers": [-1]}],
    )
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
    assert {tuple(e.path)[-1] for e in errors} >= {"rtt", "model", 0}


def test_cross_field_rules_are_declared_where_the_models_check_them() -> None:
    rules: dict[str, list[str]] = {}
    for found in declarations(ExperimentSpec):
        if found.rule.cel is not None:
            rules.setdefault(found.path, []).append(found.rule.message)
    assert any("locust" in m for m in rules["spec"])
    assert any("at most 1000 trials" in m for m in rules["spec"])
    assert any("gomaxprocs applies to goroutines only" in m for m in rules["spec.models[]"])
    assert any("exactly one of rtt or rtts" in m for m in rules["spec.workload"])


def test_printer_columns_and_short_name() -> None:
    crd = custom_resource_definition()["spec"]
    assert crd["names"]["shortNames"] == ["cx"]
    columns = [c["name"] for c in crd["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Phase", "Progress", "Best", "Objectives", "Plan", "Age"]
    assert crd["versions"][0]["subresources"] == {"status": {}}


# What the apiserver refuses in a CRD that is not structural: the cluster tests see it only
# when the CRD is applied, after minutes of set-up; this walk sees it at once.
_JUNCTORS = ("oneOf", "anyOf", "allOf", "not")
_NOT_IN_JUNCTORS = {"type", "description", "default", "nullable", "additionalProperties"}


def _structural_problems(node: Any, where: str, in_junctor: bool = False) -> list[str]:
    if not isinstance(node, dict):
        return []
    problems = []
    kind = node.get("type")
    if in_junctor:
        problems += [f"{where}: {key} inside a junctor" for key in _NOT_IN_JUNCTORS & set(node)]
    elif kind is None and not node.get("x-kubernetes-int-or-string") and node != {}:
        problems.append(f"{where}: no type")
    if isinstance(kind, list) or kind == "null":
        problems.append(f"{where}: type {kind!r} (nullable: true instead)")
    if "properties" in node and isinstance(node.get("additionalProperties"), dict | bool):
        problems.append(f"{where}: properties and additionalProperties together")
    if node.get("nullable") and "enum" in node:  # the apiserver refuses null then
        problems.append(f"{where}: an enum on a nullable field")
    for key in ("exclusiveMinimum", "exclusiveMaximum"):  # booleans in OpenAPI v3.0
        if key in node and not isinstance(node[key], bool):
            problems.append(f"{where}: {key} {node[key]!r} is not a boolean")
    for name, child in node.get("properties", {}).items():
        problems += _structural_problems(child, f"{where}.{name}", in_junctor)
    for key in ("items", "additionalProperties"):
        problems += _structural_problems(node.get(key), f"{where}.{key}", in_junctor)
    int_or_string = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-int-or-string") and node.get("anyOf") == int_or_string:
        return problems  # the one typed junctor the apiserver allows (an IntOrString)
    for key in _JUNCTORS:
        for i, child in enumerate(node.get(key, []) if key != "not" else [node.get(key)]):
            problems += _structural_problems(child, f"{where}.{key}[{i}]", True)
    return problems


@pytest.mark.parametrize("path", list(GENERATED), ids=lambda p: p.stem)
def test_every_crd_is_structural_and_generated(path: Path) -> None:
    definition = GENERATED[path]()
    version = definition["spec"]["versions"][0]
    assert _structural_problems(version["schema"]["openAPIV3Schema"], "openAPIV3Schema") == []
    assert path.read_text() == render(definition), "run `make crd` and commit the result"


def test_no_crd_string_reads_as_a_boolean_to_go_yaml() -> None:
    """kubectl and Helm read YAML 1.1: a bare `n` or `on` is a boolean there, and the
    apiserver refuses a CRD with `required: [false]`."""
    bare = re.compile(r"^\s*(?:- |[\w.-]+: )(?:[yYnN]|yes|no|on|off|Yes|No|On|Off)\s*$")
    for path in GENERATED:
        found = [line for line in path.read_text().splitlines() if bare.match(line)]
        assert not found, f"{path.name}: {found}"
