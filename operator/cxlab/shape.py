"""The base of every typed status part (experiment and schedule): camelCase names, no key a
model does not declare, field docstrings as the CRD's descriptions.

A status is worked on as these models and becomes JSON only at the edges: `read()` a
document (from the apiserver, a ConfigMap, a file), `document()` to write one. Two kinds of
absent value, as the apiserver has them: an optional field (`Maybe[...]`) is None in a model
and left out of its document, and a document that says null there is refused (the apiserver
refuses a null where the schema does not say nullable); a `nullable()` field is written as
null when it does not apply."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Self, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    model_serializer,
)
from pydantic.alias_generators import to_camel

T = TypeVar("T")


# The validation context of a document read (`Shape.read`), as opposed to a model built in code.
DOCUMENT = {"document": True}


def _not_null(value: Any, info: ValidationInfo) -> Any:
    if value is None and info.context == DOCUMENT:
        raise ValueError("null is not allowed here: leave the field out")
    return value


# An optional field: None in a model means left out; a null in a document is refused.
Maybe = Annotated[T | None, BeforeValidator(_not_null)]


class Shape(BaseModel):
    model_config = ConfigDict(
        extra="forbid",  # a key no model declares is a builder drifting from the schema
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,  # docstrings become the CRD's descriptions
    )

    @classmethod
    def read(cls, document: Any) -> Self:
        """A part as a document has it (camelCase JSON): checked as the CRD's schema would."""
        return cls.model_validate(document, context=DOCUMENT)

    def document(self) -> dict[str, Any]:
        """As written to the apiserver or result.json: camelCase, absent fields left out."""
        written: dict[str, Any] = self.model_dump(by_alias=True, mode="json")
        return written

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: SerializerFunctionWrapHandler) -> Any:
        dumped = handler(self)
        if not isinstance(dumped, dict):
            return dumped
        keep = _nullable_keys(type(self))
        return {k: v for k, v in dumped.items() if v is not None or k in keep}


@cache
def _nullable(model: type[Shape]) -> frozenset[str]:
    """The field names of a model whose None is written as null."""
    return frozenset(
        name
        for name, field in model.model_fields.items()
        if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("nullable")
    )


@cache
def _nullable_keys(model: type[Shape]) -> frozenset[str]:
    """Those fields under both their names: a dump by alias or by name keeps their null."""
    names = _nullable(model)
    return names | {model.model_fields[n].alias or n for n in names}


def optional(schema: dict[str, Any] | None = None) -> Any:
    """The default of a `Maybe` field that carries more schema (a list-type, say)."""
    return Field(default=None, json_schema_extra=schema)


def nullable() -> Any:
    """A field written as JSON null when it does not apply (not merely left out)."""
    return Field(default=None, json_schema_extra={"nullable": True})
