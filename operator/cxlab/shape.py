"""The base of every typed status part (experiment and schedule): camelCase names, no key a
model does not declare, field docstrings as the CRD's descriptions."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Shape(BaseModel):
    model_config = ConfigDict(
        extra="forbid",  # a key no model declares is a builder drifting from the schema
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,  # docstrings become the CRD's descriptions
    )


def optional(schema: dict[str, Any] | None = None) -> Any:
    """A field that may be left out but is never null: the apiserver rejects a null where the
    schema does not say nullable. (Typed without None so that validation refuses one.)"""
    return Field(default=None, json_schema_extra=schema)


def nullable() -> Any:
    """A field written as JSON null when it does not apply (not merely left out)."""
    return Field(default=None, json_schema_extra={"nullable": True})


def shaped(model: type[Shape], /, **fields: Any) -> dict[str, Any]:
    """A part of the status as written, by its typed model's names; None means left out."""
    given = {name: value for name, value in fields.items() if value is not None}
    return model(**given).model_dump(by_alias=True, exclude_none=True, mode="json")
