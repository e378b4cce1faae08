"""The CRD's OpenAPI schema as JSON Schema, and its fields walked with their paths."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from cxlab.crd import CRD_PATH


def openapi_to_jsonschema(schema: Any) -> Any:
    """Enough of OpenAPI v3 → JSON Schema to check documents against the CRD's types."""
    if isinstance(schema, dict):
        out = {
            k: openapi_to_jsonschema(v)
            for k, v in schema.items()
            if not k.startswith("x-kubernetes")
        }
        if out.pop("nullable", False):
            out["type"] = [out["type"], "null"]
        if out.pop("exclusiveMinimum", None) is True:
            out["exclusiveMinimum"] = out.pop("minimum")
        if out.pop("exclusiveMaximum", None) is True:
            out["exclusiveMaximum"] = out.pop("maximum")
        return out
    if isinstance(schema, list):
        return [openapi_to_jsonschema(v) for v in schema]
    return schema


# Kubernetes' own schemas of Pod fields, embedded as they are (cxlab.placement): their
# integers carry their format's range, their strings and lists Kubernetes' own limits.
KUBERNETES_OWN = ("spec.placement.tolerations[]", "spec.placement.affinity")


def fields(schema: dict[str, Any], path: str = "spec") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from fields(sub, f"{path}.{name}")
    if "items" in schema:
        yield from fields(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from fields(schema["additionalProperties"], f"{path}{{}}")


def spec_fields() -> list[tuple[str, dict[str, Any]]]:
    crd = yaml.safe_load(CRD_PATH.read_text())
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return list(fields(root["properties"]["spec"]))


def own(path: str) -> bool:
    return not path.startswith(KUBERNETES_OWN)
