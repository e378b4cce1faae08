"""The base of every typed status part (experiment and schedule): camelCase names, no key a
model does not declare, field docstrings as the CRD's descriptions.

A status is worked on as these models and becomes JSON only at the edges: `read()` a
document (from the apiserver, a ConfigMap, a file), `document()` to write one. Two kinds of
absent value, as the apiserver has them: an optional field (`Maybe[...]`) is None in a model
and left out of its document, and a document that says null there is refused (the apiserver
refuses a null where the schema does not say nullable); a `nullable()` field is written as
null when it does not apply.

A part that comes in kinds (a point with or without measurements, a knee in the workers or in
the rate) is a union of shapes, `Annotated[A | B, ONE_OBJECT]`: read as whichever kind the
document's keys make it (every shape refuses a key it does not declare), and in the CRD one
object with every kind's fields, required only where every kind requires them."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Self, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    model_serializer,
)
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema

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


class OneObject:
    """The JSON schema of a union of shapes as one object (Kubernetes' structural schemas
    have no anyOf of objects): every kind's properties in the kinds' order, nullable where
    one kind has it nullable or null, required where every kind requires it, and no
    defaults (the apiserver would fill one kind's default into another kind's document,
    which that kind then refuses). Two kinds that type one field differently are a mistake,
    refused when the schema is made."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        union = handler(core_schema)
        kinds = [handler.resolve_ref_schema(option) for option in union["anyOf"]]
        properties: dict[str, dict[str, Any]] = {}
        for kind in kinds:
            for name, field in kind["properties"].items():
                without_default = {k: v for k, v in field.items() if k != "default"}
                properties[name] = _either(properties.get(name), without_default, name)
        required = [
            name for name in properties if all(name in kind.get("required", ()) for kind in kinds)
        ]
        merged: dict[str, Any] = {"type": "object", "properties": properties}
        if description := kinds[0].get("description"):
            merged["description"] = description
        return merged | ({"required": required} if required else {})


ONE_OBJECT = OneObject()


def _either(known: dict[str, Any] | None, field: dict[str, Any], name: str) -> dict[str, Any]:
    """One property of two kinds: the same type (or null in one of them), written as null
    (nullable) if either writes it so."""
    if known is None:
        return field
    mine, theirs = _core(known), _core(field)
    if mine is not None and theirs is not None and mine != theirs:
        raise TypeError(f"{name}: two kinds of one union type it differently: {known} vs {field}")
    either = known if mine is not None else field
    if known.get("nullable") or field.get("nullable"):
        either = either | {"nullable": True}
    return either


def _core(field: dict[str, Any]) -> dict[str, Any] | None:
    """What a property is, without its null, description or default (None: only null)."""
    options = [o for o in field.get("anyOf", [field]) if o.get("type") != "null"]
    if not options:
        return None
    ignored = ("title", "description", "default", "nullable")
    return {k: v for k, v in options[0].items() if k not in ignored}
