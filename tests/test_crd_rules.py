"""Every CEL rule of both CRDs is a rule a model declares, and each declared rule has its cases
(tests/helpers/rule_cases.py, made from the declaration's own examples); `cxlab plan` agrees with
every case: the valid manifest plans, the invalid one exits 2 naming the field. The apiserver's side
is tests/cluster/test_crd_rules_on_apiserver.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers.rule_cases import CASES, TEMPLATE, Case, declared_rules, field_path, plan_problems
from helpers.schema import openapi_to_jsonschema

from cxlab.cli import main
from cxlab.cli.exits import USAGE_ERROR
from cxlab.crd import CRD_PATH, SCHEDULE_CRD_PATH
from cxlab.experiments.spec import KIND
from cxlab.schedules.spec import SCHEDULE_KIND

CRDS = {KIND: CRD_PATH, SCHEDULE_KIND: SCHEDULE_CRD_PATH}


def _cased(kind: str) -> list[tuple[str, str]]:
    return [c.rule for c in CASES if c.kind == kind and not c.local_only]


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_rule_of_the_crd_has_a_case_and_every_case_a_rule(kind: str) -> None:
    declared = list(declared_rules(CRDS[kind]))
    assert declared, "no x-kubernetes-validations found: the walk is broken"
    assert not [r for r, n in Counter(declared).items() if n > 1], "two rules, one message"
    cases = _cased(kind)
    assert not [r for r, n in Counter(cases).items() if n > 1], "two cases for one rule"
    if kind == SCHEDULE_KIND:  # its template's rules are an experiment spec's, cased there
        template = {("spec" + p.removeprefix(TEMPLATE), m) for p, m in declared
                    if p.startswith(TEMPLATE)}  # fmt: skip
        assert template == set(_cased(KIND)) - {r for r in _cased(KIND) if not r[0]}
        declared = [(p, m) for p, m in declared if not p.startswith(TEMPLATE)]
    missing = sorted(set(declared) - set(cases))
    assert not missing, f"CEL rules no model declares (cxlab.rules): {missing}"
    stale = sorted(set(cases) - set(declared))
    assert not stale, f"declared CEL rules the CRD does not have (make crd): {stale}"


def test_every_case_is_made_and_named_once() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.kind for c in CASES} == {KIND, SCHEDULE_KIND}
    assert any(c.local_only for c in CASES) and any(c.cluster_only for c in CASES)


def test_field_path_reads_every_spelling() -> None:
    assert field_path("spec.models.1.workers") == "spec.models[1].workers"
    assert field_path("spec.models[1].workers") == "spec.models[1].workers"
    assert field_path(".metadata.name") == "metadata.name"
    assert field_path("spec") == "spec"


@pytest.fixture(scope="module")
def openapi_schemas() -> dict[str, Any]:
    """A validator per kind, built once: jsonschema.validate checks the (large) schema itself
    on every call, which made these cases a minute of CPU."""
    validators = {}
    for kind, path in CRDS.items():
        crd = yaml.safe_load(path.read_text())
        schema = openapi_to_jsonschema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        jsonschema.Draft202012Validator.check_schema(schema)
        validators[kind] = jsonschema.Draft202012Validator(schema)
    return validators


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_both_manifests_fit_the_schema_so_only_the_rule_decides(
    case: Case, openapi_schemas: dict[str, Any]
) -> None:
    # The apiserver skips CEL when the object already breaks the schema's types.
    openapi_schemas[case.kind].validate(case.valid)
    openapi_schemas[case.kind].validate(case.invalid)


def _plan(document: dict[str, Any], tmp_path: Path) -> int:
    """`cxlab plan FILE` in this process (an experiment or a schedule): its exit status (its
    output stays in capsys)."""
    path = tmp_path / "resource.yaml"
    path.write_text(yaml.safe_dump(document))
    try:
        return main(["plan", str(path)])
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_plan_accepts_the_valid_manifest(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _plan(case.valid, tmp_path)
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_plan_rejects_the_invalid_manifest_naming_the_field(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _plan(case.invalid, tmp_path)
    err = capsys.readouterr().err
    if case.cluster_only:  # cxlab's own rule for the cluster: a plan may name the variable
        assert code == 0, err
        return
    assert code == USAGE_ERROR, err
    assert [field for field, _ in plan_problems(err)] == [case.field], err
