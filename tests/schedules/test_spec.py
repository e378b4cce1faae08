"""The ExperimentSchedule CRD: generated from the typed schedule spec, every example fits it
and parses, its template carries every rule of an experiment's spec, and what the apiserver
can refuse it refuses (checked offline here against the schema; on the apiserver in
tests/cluster/test_bad_input_on_apiserver.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers import EXAMPLES
from helpers.schema import openapi_to_jsonschema

from cxlab.crd import schedule_resource_definition
from cxlab.experiments.fields import SpecError
from cxlab.experiments.spec import ExperimentSpec
from cxlab.rules import Rule, declarations
from cxlab.schedules.cron import CRON_PATTERN
from cxlab.schedules.spec import parse_experiment_schedule

SCHEDULES = sorted((EXAMPLES / "schedules").glob("*.yaml"))


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    version = schedule_resource_definition()["spec"]["versions"][0]
    converted: dict[str, Any] = openapi_to_jsonschema(version["schema"]["openAPIV3Schema"])
    return converted


def test_there_is_an_example() -> None:
    assert SCHEDULES


@pytest.mark.parametrize("path", SCHEDULES, ids=lambda p: p.stem)
def test_every_schedule_example_fits_the_schema_and_parses(
    path: Path, schema: dict[str, Any]
) -> None:
    validator = jsonschema.Draft202012Validator(schema)  # validate() checks the schema anew
    for document in yaml.safe_load_all(path.read_text()):
        validator.validate(document)
        assert parse_experiment_schedule(document).spec.experiment_template.spec.capacity


def test_printer_columns_short_name_and_status() -> None:
    crd = schedule_resource_definition()["spec"]
    assert crd["names"]["shortNames"] == ["cxs"]
    columns = [c["name"] for c in crd["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Schedule", "Suspend", "Last Schedule", "Regressed", "Plan", "Age"]
    assert crd["versions"][0]["subresources"] == {"status": {}}


def test_the_template_carries_every_rule_of_an_experiment_spec() -> None:
    spec = schedule_resource_definition()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    template = spec["properties"]["spec"]["properties"]["experimentTemplate"]
    node = template["properties"]["spec"]
    declared = {r["message"] for r in node.get("x-kubernetes-validations", [])}
    experiment = {d.rule.message for d in declarations(ExperimentSpec)
                  if d.path == "spec" and isinstance(d.rule, Rule) and d.rule.cel}  # fmt: skip
    assert experiment and experiment <= declared
    shape = _cel_patterns(spec["properties"]["spec"]["properties"]["schedule"])
    assert CRON_PATTERN in shape


def _cel_patterns(node: dict[str, Any]) -> list[str]:
    """The regular expressions a field's CEL rules match it against (r'...'), as Python reads
    them (RE2's \\t is a tab)."""
    rules = [r["rule"] for r in node.get("x-kubernetes-validations", [])]
    return [p.replace("\\t", "\t") for rule in rules for p in re.findall(r"r'([^']*)'", rule)]


def base() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "schedules" / "capacity-nightly.yaml").read_text())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": "every 5 minutes"}, "schedule"),
        ({"concurrencyPolicy": "Allow"}, "concurrencyPolicy"),
        ({"historyLimit": 0}, "historyLimit"),
        ({"regression": {"significance": 0.5}}, "significance"),
        ({"startingDeadlineSeconds": 0}, "startingDeadlineSeconds"),
    ],
)
def test_the_schema_refuses_by_type_and_bound(
    change: dict[str, Any], field: str, schema: dict[str, Any]
) -> None:
    document = base()
    document["spec"] |= change
    if field == "schedule":  # the CRD checks its shape with CEL: the regular expression it uses
        node = schedule_resource_definition()["spec"]["versions"][0]["schema"]
        node = node["openAPIV3Schema"]["properties"]["spec"]["properties"]["schedule"]
        assert not re.match(_cel_patterns(node)[-1], change["schedule"])
    else:
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(document))
        assert any(field in ".".join(map(str, e.path)) for e in errors), errors
    with pytest.raises(Exception, match=re.escape(field)):
        parse_experiment_schedule(document)


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ("CRON_TZ=UTC 0 3 * * *", "names a time zone; CRON_TZ= and TZ= are not supported here"),
        ("TZ=Europe/Berlin 0 3 * * *", "put the zone in spec.timeZone"),
        ("0 0 3 * * *", "has 6 fields; use 5 (minute hour day-of-month month day-of-week)"),
        ("0 3 * *", "has 4 fields; use 5"),
    ],
)
def test_a_schedule_cron_cannot_read_is_refused_in_the_parsers_words(
    schedule: str, says: str
) -> None:
    """One line, the calendar parser's own, never the shape's regular expression."""
    document = base()
    document["spec"]["schedule"] = schedule
    with pytest.raises(SpecError) as refused:
        parse_experiment_schedule(document)
    [problem] = refused.value.problems
    assert problem.startswith("spec.schedule: ") and says in problem, problem
    assert "[ \t]" not in problem and "(?:" not in problem, problem
