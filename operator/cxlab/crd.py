"""The two CRDs, generated: the spec schemas from the pydantic models (cxlab.experiments.spec,
cxlab.schedules.spec), with the CEL rules the models declare (cxlab.rules) where they declare
them; the status schemas from the typed statuses; the Result schema from the contract package
(cxlab_contract). `make crd` writes manifests/crds/; a test fails when the files and this
code disagree."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

import cxlab_contract
from cxlab.experiments.resource import ConcurrencyExperiment
from cxlab.experiments.spec import API_VERSION, KIND, ExperimentSpec
from cxlab.experiments.status import ExperimentStatus
from cxlab.schedules.spec import SCHEDULE_KIND, ExperimentSchedule, ScheduleSpec
from cxlab.schedules.status import ScheduleStatus

GROUP, VERSION = API_VERSION.split("/")
PLURAL = "concurrencyexperiments"
SCHEDULE_PLURAL = "experimentschedules"
CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
CRD_PATH = CRDS / f"{PLURAL}.{GROUP}.yaml"
SCHEDULE_CRD_PATH = CRDS / f"{SCHEDULE_PLURAL}.{GROUP}.yaml"

Schema = dict[str, Any]


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def structural(schema: Schema, definitions: Schema) -> Schema:
    """A pydantic/JSON Schema fragment as a Kubernetes structural schema: references
    inlined, optional (anyOf null) unwrapped, no additionalProperties: false (the apiserver
    prunes or, with kubectl's strict validation, rejects unknown fields), OpenAPI v3 forms
    of exclusive bounds and nullability."""
    if "$ref" in schema:
        target = definitions[schema["$ref"].rsplit("/", 1)[1]]
        return structural(
            {**target, **{k: v for k, v in schema.items() if k != "$ref"}}, definitions
        )
    if schema.get("x-kubernetes-int-or-string"):
        return schema  # its anyOf (an integer or a string) is what the apiserver expects
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        merged = {**{k: v for k, v in schema.items() if k != "anyOf"}, **options[0]}
        return structural(merged, definitions)
    out: Schema = {}
    for key, value in schema.items():
        out |= _keyword(key, value, definitions)
    return _typed(out)


_DROPPED = ("title", "$defs", "$schema", "$id", "propertyNames")  # no keys bound: a Check's CEL


def _keyword(key: str, value: Any, definitions: Schema) -> Schema:
    """One keyword of a JSON Schema as what a structural schema says for it."""
    if key in _DROPPED:
        return {}
    if key == "default":
        return {} if value is None else {key: _without_nulls(value)}  # null: no default
    if key == "description":
        return {key: " ".join(value.split())}  # docstrings are wrapped; kubectl explain rewraps
    if key == "additionalProperties":
        if value is True:
            return {"x-kubernetes-preserve-unknown-fields": True}
        return {key: structural(value, definitions)} if isinstance(value, dict) else {}
    if key == "patternProperties":  # the values' schema stays
        [(_, values)] = value.items()
        return {"additionalProperties": structural(values, definitions)}
    if key in ("exclusiveMinimum", "exclusiveMaximum"):
        return {key.removeprefix("exclusive").lower(): value, key: True}
    if key == "const":
        return {"enum": [value]}
    if key == "type" and isinstance(value, list):
        return {"type": next(t for t in value if t != "null"), "nullable": True}
    if key == "properties":
        return {key: {name: structural(sub, definitions) for name, sub in value.items()}}
    if key == "items":
        return {key: structural(value, definitions)}
    return {key: copy.deepcopy(value)}


def _typed(out: Schema) -> Schema:
    """What a structural schema needs of a node beside its keywords."""
    if out.get("nullable") and "enum" in out:
        # The apiserver checks a null against the enum, null listed or not, and refuses it:
        # such a field (only in the runner's Result) keeps its enum in the Result's schema.
        del out["enum"]
    if "enum" in out and "type" not in out:  # structural schemas type every field
        kinds = {type(v) for v in out["enum"]}
        out["type"] = "string" if kinds == {str} else "integer" if kinds == {int} else "number"
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def spec_schema() -> Schema:
    source = ExperimentSpec.model_json_schema(by_alias=True)
    return structural(source, source.get("$defs", {}))


def schedule_spec_schema() -> Schema:
    """The schedule's template carries every rule of an experiment's spec: it is one."""
    source = ScheduleSpec.model_json_schema(by_alias=True)
    return structural(source, source.get("$defs", {}))


def schedule_status_schema() -> Schema:
    source = ScheduleStatus.model_json_schema(by_alias=True)
    return structural(source, source.get("$defs", {}))


def result_schema() -> Schema:
    source = cxlab_contract.result_schema()
    schema = structural(source, source.get("$defs", {}))
    schema["description"] = source["description"]
    return schema


def status_schema() -> Schema:
    """Generated from the typed status (cxlab.experiments.status.ExperimentStatus); the
    runner's Result inside each trial entry from its own JSON Schema."""
    source = ExperimentStatus.model_json_schema(by_alias=True)
    schema = structural(source, source.get("$defs", {}))
    schema["properties"]["trials"]["items"]["properties"]["result"] = result_schema()
    return schema


def _root_rules(resource: type[ConcurrencyExperiment] | type[ExperimentSchedule]) -> list[Schema]:
    """The rules a resource model declares on itself (its name)."""
    return [rule.schema() for rule in resource.rules]


def _definition(
    *,
    kind: str,
    plural: str,
    short: str,
    columns: list[Schema],
    description: str,
    spec: Schema,
    status: Schema,
    name_rules: list[Schema],
) -> Schema:
    """A namespaced CRD of the cxlab.dev group, one served and stored version, with a status
    subresource: what both kinds share."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": ["cxlab"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                # Declared only so the name rules can point at metadata.name
                                # (fieldPath must exist in the schema).
                                "metadata": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}},
                                },
                                "spec": spec,
                                "status": status,
                            },
                            "x-kubernetes-validations": name_rules,
                        }
                    },
                }
            ],
        },
    }


def _column(name: str, kind: str, path: str, priority: int = 0) -> Schema:
    column: Schema = {"name": name, "type": kind, "jsonPath": path}
    return column | {"priority": priority} if priority else column


AGE = _column("Age", "date", ".metadata.creationTimestamp")


def schedule_resource_definition() -> Schema:
    return _definition(
        kind=SCHEDULE_KIND,
        plural=SCHEDULE_PLURAL,
        short="cxs",
        columns=[
            _column("Schedule", "string", ".spec.schedule"),
            _column("Suspend", "boolean", ".spec.suspend"),
            _column("Last Schedule", "date", ".status.lastScheduleTime"),
            _column("Regressed", "boolean", ".status.regressed"),
            _column("Plan", "string", ".status.capacityPlan.display"),
            AGE,
        ],
        description="A ConcurrencyExperiment re-run on a schedule: its runs' history, "
        "regressions across them, a capacity plan.",
        spec=schedule_spec_schema(),
        status=schedule_status_schema(),
        name_rules=_root_rules(ExperimentSchedule),
    )


def custom_resource_definition() -> Schema:
    return _definition(
        kind=KIND,
        plural=PLURAL,
        short="cx",
        columns=[
            _column("Phase", "string", ".status.phase"),
            _column("Progress", "string", ".status.progress.display"),
            _column("Best", "string", ".status.best"),
            # True, False or Unknown (inconclusive) once finished: the verdict pipelines gate on
            _column(
                "Objectives", "string", '.status.conditions[?(@.type=="ObjectivesMet")].status'
            ),
            # kubectl get -o wide: set only with spec.capacity
            _column("Plan", "string", ".status.capacityPlan.display", priority=1),
            AGE,
        ],
        description="A concurrency experiment: models x workers x RTTs, measured on pinned cores.",
        spec=spec_schema(),
        status=status_schema(),
        name_rules=_root_rules(ConcurrencyExperiment),
    )


# YAML 1.1 booleans that PyYAML writes bare but Go's YAML readers (kubectl, Helm) read as
# true/false: `required: [n]` became `[false]` and the apiserver refused the whole CRD.
YAML11_BOOLEANS = frozenset(
    v for word in ("y", "n", "yes", "no", "on", "off", "true", "false")
    for v in (word, word.upper(), word.capitalize())
)  # fmt: skip


class _Dumper(yaml.SafeDumper):
    def represent_str(self, data: str) -> yaml.ScalarNode:
        if data in YAML11_BOOLEANS:
            return self.represent_scalar("tag:yaml.org,2002:str", data, style="'")
        return super().represent_str(data)


_Dumper.add_representer(str, _Dumper.represent_str)


def render(definition: Schema | None = None) -> str:
    """A CRD as its file holds it (the experiment's by default)."""
    header = (
        "# Generated by `make crd` from operator/cxlab/crd.py and the typed specs: do not edit.\n"
    )
    return header + yaml.dump(
        definition or custom_resource_definition(),
        Dumper=_Dumper,
        sort_keys=False,
        width=100,
        allow_unicode=True,
    )


# Every CRD file and what generates it.
GENERATED = {CRD_PATH: custom_resource_definition, SCHEDULE_CRD_PATH: schedule_resource_definition}

if __name__ == "__main__":
    CRDS.mkdir(parents=True, exist_ok=True)
    for path, definition in GENERATED.items():
        path.write_text(render(definition()))
        print(path)
