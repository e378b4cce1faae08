"""Every CEL rule of the CRD has a case (tests/crd_rules.py), and `cxlab plan` agrees with it:
the valid manifest plans, the invalid one exits 2 naming the field the apiserver names. The
apiserver's side is tests/cluster/test_crd_rules_on_apiserver.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from crd_rules import CASES, Case, declared_rules, field_path, plan_problems
from test_crd import _openapi_to_jsonschema

from cxlab.cli import main
from cxlab.cli.exits import USAGE_ERROR
from cxlab.crd import CRD_PATH


def test_every_rule_of_the_crd_has_a_case_and_every_case_a_rule() -> None:
    declared = list(declared_rules(CRD_PATH))
    cases = [c.rule for c in CASES]
    assert declared, "no x-kubernetes-validations found: the walk is broken"
    assert not [r for r, n in Counter(declared).items() if n > 1], "two rules, one message"
    assert not [r for r, n in Counter(cases).items() if n > 1], "two cases for one rule"
    missing = sorted(set(declared) - set(cases))
    assert not missing, f"CEL rules without a case in tests/crd_rules.py: {missing}"
    stale = sorted(set(cases) - set(declared))
    assert not stale, f"cases for rules the CRD no longer has: {stale}"


def test_field_path_reads_every_spelling() -> None:
    assert field_path("spec.models.1.workers") == "spec.models[1].workers"
    assert field_path("spec.models[1].workers") == "spec.models[1].workers"
    assert field_path(".metadata.name") == "metadata.name"
    assert field_path("spec") == "spec"


@pytest.fixture(scope="module")
def openapi_schema() -> Any:
    """A validator built once: jsonschema.validate checks the (large) schema itself on every
    call, which made these cases a minute of CPU."""
    crd = yaml.safe_load(CRD_PATH.read_text())
    schema = _openapi_to_jsonschema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_both_manifests_fit_the_schema_so_only_the_rule_decides(
    case: Case, openapi_schema: Any
) -> None:
    # The apiserver skips CEL when the object already breaks the schema's types.
    openapi_schema.validate(case.valid)
    openapi_schema.validate(case.invalid)


def _plan(document: dict[str, Any], tmp_path: Path) -> int:
    """`cxlab plan FILE` in this process: its exit status (its output stays in capsys)."""
    path = tmp_path / "experiment.yaml"
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
