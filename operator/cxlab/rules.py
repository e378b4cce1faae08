"""A spec rule, declared once beside what it constrains: its CEL (the apiserver checks it at
`kubectl apply`), its check here (cxlab plan, cxlab run and the operator), one message for
both, and two examples (a spec it holds for, and one that breaks it and nothing else) from
which the tests make its cases. The CRD generator (cxlab.crd) only collects what the models
declare, as kubebuilder's markers sit on the Go fields they constrain.

- `Rule`, in a model's `rules = (...)`: a rule across the model's fields, or across the spec.
- `Check`, in a field's `Annotated[...]` type: a rule of the field's own value (a duration's
  bounds, a list without repeats).

Where one side cannot check a rule it says so: no `cel` for what the apiserver cannot know
(Go's duration grammar has two spellings of one time; an arrival count per Pod needs the
spec's arithmetic), no `holds` for a rule of the cluster's alone (a variable of cxlab run's
own environment, which only a cluster refuses).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import core_schema

# A spec as a document: the fields an example sets (JSON, as a user writes them).
Example = Mapping[str, Any]


class RuleBroken(ValueError):
    """A broken rule, naming the field below the model's own place where there is one: the
    error's location is the model's, so the field goes with the message (describe())."""

    def __init__(self, message: str, below: str = "") -> None:
        super().__init__(message)
        self.below = below
        self.message = message


def _said(message: str, found: str | None) -> str:
    return f"{message} ({found})" if found else message


# eq=False: a declaration is itself (its examples are lists and dicts, which do not hash).
@dataclass(frozen=True, eq=False)
class Rule:
    """A rule across a model's fields."""

    message: str
    """What is wrong and what to change; the apiserver says it as written, cxlab adds what it
    found (`found`)."""
    holds: Callable[[Any], bool] | None
    """Whether a model instance keeps it (None: the cluster's rule alone)."""
    valid: Example
    """Spec fields over the kind's example spec (ExperimentSpec's EXAMPLE) that keep it: the
    nearest spec it accepts, at the boundary where there is one."""
    invalid: Example
    """Spec fields that break it and no other rule. In a list (spec.models[]), the element
    that breaks it is the last one."""
    cel: str | None = None
    """The CEL the apiserver evaluates (`self` is the model's object)."""
    found: Callable[[Any], str] | None = None
    """What cxlab found, said after the message: 'it has 1050'."""
    field: str | None = None
    """A field below the model that both name (CEL's fieldPath), e.g. capacity.target.rtt."""

    def schema(self) -> dict[str, str]:
        assert self.cel is not None
        rule = {"rule": self.cel, "message": self.message}
        return rule | {"fieldPath": f".{self.field}"} if self.field else rule

    def check(self, model: Any) -> None:
        if self.holds is None or self.holds(model):
            return
        found = self.found(model) if self.found else None
        raise RuleBroken(_said(self.message, found), f".{self.field}" if self.field else "")


@dataclass(frozen=True, eq=False)
class Check:
    """A rule of one field's value, in its Annotated type: validated after the field's type
    and bounds, and its CEL on the field's schema."""

    message: str
    holds: Callable[[Any], bool]
    valid: Any
    """A value the field may take, at the boundary where there is one."""
    invalid: Any
    """A value of the field's type and bounds that breaks this rule and nothing else."""
    cel: str | None = None
    found: Callable[[Any], str] | None = None
    pinpoint: Callable[[Any], str] | None = None
    """The part of a broken value cxlab names (a list's repeated element: '[1].name'), where
    the apiserver can only name the field."""
    pinpointed: str = ""
    """What pinpoint names in the invalid example."""

    def schema(self) -> dict[str, str]:
        assert self.cel is not None
        return {"rule": self.cel, "message": self.message}

    def __get_pydantic_core_schema__(
        self, source: Any, handler: Callable[[Any], core_schema.CoreSchema]
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._validate, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Callable[[Any], Any]) -> Any:
        json_schema = handler(schema)
        if self.cel is not None:
            json_schema.setdefault("x-kubernetes-validations", []).append(self.schema())
        return json_schema

    def _validate(self, value: Any) -> Any:
        if self.holds(value):
            return value
        found = self.found(value) if self.found else None
        below = self.pinpoint(value) if self.pinpoint else ""
        raise RuleBroken(_said(self.message, found), below)


def check_rules(model: BaseModel) -> None:
    """Every rule its class declares, in order: the first broken one is raised."""
    for rule in getattr(type(model), "rules", ()):
        rule.check(model)


def schema_rules(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """A model's rules into its JSON Schema, as the CRD carries them (x-kubernetes-validations);
    pydantic calls it for each model's schema (json_schema_extra)."""
    own = [rule.schema() for rule in model.__dict__.get("rules", ()) if rule.cel is not None]
    if own:
        schema.setdefault("x-kubernetes-validations", []).extend(own)


@dataclass(frozen=True)
class Declared:
    """A declaration and where the schema has it: spec.models[] for every model entry."""

    path: str
    rule: Rule | Check
    model: type[BaseModel] | None = None
    """The model a Rule sits on."""


@dataclass
class _Walk:
    found: list[Declared] = field(default_factory=list)
    seen: set[tuple[str, type[BaseModel]]] = field(default_factory=set)


def declarations(root: type[BaseModel], path: str = "spec") -> list[Declared]:
    """Every Rule and Check under a model, with the schema path it sits at, in the order of
    the fields (a rule of a model used in two places is listed at both)."""
    walk = _Walk()
    _model(walk, root, path)
    return walk.found


def _model(walk: _Walk, model: type[BaseModel], path: str) -> None:
    if (path, model) in walk.seen:
        return
    walk.seen.add((path, model))
    walk.found += [Declared(path, rule, model) for rule in model.__dict__.get("rules", ())]
    for name, info in model.model_fields.items():
        below = f"{path}.{info.alias or name}" if path else str(info.alias or name)
        for item in info.metadata:
            if isinstance(item, Check):
                walk.found.append(Declared(below, item))
        _type(walk, info.annotation, below)


def _type(walk: _Walk, annotation: Any, path: str) -> None:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        inner, *metadata = get_args(annotation)
        for item in metadata:
            if isinstance(item, Check):
                walk.found.append(Declared(path, item))
        _type(walk, inner, path)
    elif origin in (typing.Union, types.UnionType):
        for option in get_args(annotation):
            _type(walk, option, path)
    elif origin is list:
        _type(walk, get_args(annotation)[0], f"{path}[]")
    elif origin is dict:
        _type(walk, get_args(annotation)[1], f"{path}{{}}")
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        _model(walk, annotation, path)
