"""Kubernetes' own schemas of a Pod's tolerations and affinity, for spec.placement.

placement-schema.json holds core/v1 Toleration and Affinity, taken from the OpenAPI document
of the Kubernetes this project runs (k8s.io/kubernetes's api/openapi-spec, the same document
its apiserver serves at /openapi/v3/api/v1) with every reference inlined. The CRD embeds
them, so `kubectl apply` checks placement the way it checks a Pod's, and the spec model
validates the same schemas locally. `make placement-schema` regenerates the file from the
document of the Kubernetes module the local cluster is built from (hack/k8s).

On top of the types, the operators and effects the API reference lists as the only valid
ones become enums, and a required node affinity's terms may not be empty: the OpenAPI
document leaves them free, and the Pod's own validation would refuse anything else only
when the trial Pod is created.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_FILE = "placement-schema.json"
CORE = "io.k8s.api.core.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
ROOTS = {"toleration": CORE + "Toleration", "affinity": CORE + "Affinity"}

# (definition, property): the values the Kubernetes API reference allows.
ENUMS = {
    (CORE + "Toleration", "operator"): ["Equal", "Exists"],
    (CORE + "Toleration", "effect"): ["", "NoSchedule", "PreferNoSchedule", "NoExecute"],
    (CORE + "NodeSelectorRequirement", "operator"): [
        "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt",
    ],
    (META + "LabelSelectorRequirement", "operator"): ["In", "NotIn", "Exists", "DoesNotExist"],
}  # fmt: skip

# (definition, property): lists the Pod's own validation refuses empty (ValidateNodeSelector:
# "must have at least one node selector term"), which its OpenAPI document leaves unbounded.
MIN_ITEMS = {(CORE + "NodeSelector", "nodeSelectorTerms"): 1}

Schema = dict[str, Any]
_FORMAT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_CRD_EXTENSIONS = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type")


def extract(openapi: Schema) -> Schema:
    """Toleration and Affinity from a core/v1 OpenAPI v3 document, references inlined,
    descriptions kept (kubectl explain shows them), the enums above added."""
    definitions = openapi["components"]["schemas"]

    def inline(schema: Any, owner: str | None) -> Any:
        if isinstance(schema, list):
            return [inline(item, owner) for item in schema]
        if not isinstance(schema, dict):
            return schema
        if "allOf" in schema and len(schema["allOf"]) == 1:  # a $ref with a description
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return inline({**schema["allOf"][0], **rest}, owner)
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return inline({**definitions[name], **rest}, name)
        out: Schema = {}
        for key, value in schema.items():
            if key == "properties":
                out[key] = {
                    field: inline(sub, None) | _enum(owner, field) for field, sub in value.items()
                }
            elif key == "default" and value in ("", {}):
                continue  # Go's zero values: no default at all in a CRD
            elif key.startswith("x-kubernetes-") and key not in _CRD_EXTENSIONS:
                continue  # strategic-merge hints: a CRD schema has no place for them
            else:
                out[key] = inline(value, None)
        if out.get("type") == "integer" and out.get("format") in _FORMAT_RANGE:
            # The format's range, spelled out: the apiserver and jsonschema both enforce it.
            low, high = _FORMAT_RANGE[out["format"]]
            out.setdefault("minimum", low)
            out.setdefault("maximum", high)
        return out

    return {role: inline({"$ref": f"#/{name}"}, None) for role, name in ROOTS.items()}


def _enum(owner: str | None, field: str) -> Schema:
    """The enum and the least items the API reference allows a field of owner's, if any."""
    values = ENUMS.get((owner or "", field))
    least = MIN_ITEMS.get((owner or "", field))
    return ({"enum": values} if values else {}) | ({"minItems": least} if least else {})


@cache
def placement_schemas() -> Schema:
    """{"toleration": ..., "affinity": ...} as the CRD embeds them."""
    document: Schema = json.loads(
        resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    )
    return document


@cache
def _validator(role: str) -> Draft202012Validator:
    schema = copy.deepcopy(placement_schemas()[role])
    return Draft202012Validator(_no_unknown_fields(schema))


def _no_unknown_fields(schema: Any) -> Any:
    """Locally an unknown field is an error, as with `kubectl apply`'s strict field
    validation (the apiserver prunes it otherwise)."""
    if isinstance(schema, dict):
        if "properties" in schema:
            schema.setdefault("additionalProperties", False)
        for value in schema.values():
            _no_unknown_fields(value)
    elif isinstance(schema, list):
        for item in schema:
            _no_unknown_fields(item)
    return schema


def problems(role: str, value: Any) -> list[tuple[str, str]]:
    """(path below the field, message) for every way value breaks the Kubernetes schema."""
    found = []
    for error in sorted(_validator(role).iter_errors(value), key=lambda e: list(e.path)):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        if error.validator == "additionalProperties":
            unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            message = f"{', '.join(unknown)}: not a field Kubernetes knows here"
        else:
            message = error.message
        found.append((where, message))
    return found
