"""Every rule the models declare (cxlab.rules), as cases made from its own examples: one
valid and one invalid manifest, and the field that both the apiserver and `cxlab plan` must
name for the invalid one. Nothing here is written per rule: a rule added to a model brings its
cases (and a field's Check, a spec in which the field applies, found among the rules' own
valid examples).

tests/test_crd_rules.py fails when a CRD has a rule no model declares (or a model declares a
CEL rule its CRD lacks) and runs every case through `cxlab plan`;
tests/cluster/test_crd_rules_on_apiserver.py applies every case with
`kubectl apply --dry-run=server`.

A case's valid manifest is the nearest one the rule accepts (a boundary where there is one),
and its invalid manifest breaks that rule and no other: both tests expect exactly one error.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cxlab.experiments.fields import SpecError
from cxlab.experiments.resource import ConcurrencyExperiment, parse_experiment
from cxlab.experiments.spec import API_VERSION, EXAMPLE, KIND
from cxlab.rules import Check, Declared, Rule, declarations
from cxlab.schedules.spec import (
    SCHEDULE_EXAMPLE,
    SCHEDULE_KIND,
    ExperimentSchedule,
    parse_experiment_schedule,
)

BASE_SPEC: dict[str, Any] = EXAMPLE
NAME = "rule-check"
TEMPLATE = "spec.experimentTemplate.spec"
# What each kind's examples are written over.
BASES = {KIND: EXAMPLE, SCHEDULE_KIND: SCHEDULE_EXAMPLE}


def manifest(name: str = NAME, **spec: Any) -> dict[str, Any]:
    """The base manifest with some top-level spec fields replaced."""
    return document({"metadata": {"name": name}, **spec})


def document(example: dict[str, Any], kind: str = KIND) -> dict[str, Any]:
    """A whole resource of a kind from an example: its spec fields over the kind's base, and
    its metadata."""
    fields = {k: v for k, v in example.items() if k != "metadata"}
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": NAME, **example.get("metadata", {})},
        "spec": {**copy.deepcopy(BASES[kind]), **copy.deepcopy(fields)},
    }


def _steps(path: str) -> list[tuple[str, int]]:
    """A schema path (spec.models[].workers) as (field, lists below it): spec 0, models 1..."""
    return [(part.split("[", 1)[0], part.count("[]")) for part in path.split(".") if part]


def concrete(path: str, resource: Any) -> str | None:
    """The field of one resource a schema path names (spec.models[].workers ->
    spec.models[1].workers): in each list its last element; None where it does not reach."""
    node, where = resource, ""
    for name, lists in _steps(path):
        if not isinstance(node, dict) or name not in node:
            return None
        node, where = node[name], f"{where}.{name}" if where else name
        for _ in range(lists):
            if not isinstance(node, list) or not node:
                return None
            where += f"[{len(node) - 1}]"
            node = node[-1]
    return where


def place(resource: dict[str, Any], path: str, value: Any, mode: str = "object") -> bool:
    """Set the field a schema path names, in each list its last element (a path ending in a
    list item replaces the list's last item). What it may make on the way, by mode: object,
    nothing (the field's object is there); create, the objects above it, empty; fresh, also
    a new last element in place of the list's. False where it cannot."""
    steps = _steps(path)
    node: Any = resource
    last_list = max((i for i, (_, n) in enumerate(steps[:-1]) if n), default=-1)
    for index, (step, lists) in enumerate(steps[:-1]):
        if mode != "object" and isinstance(node, dict) and step not in node and not lists:
            node[step] = {}
        if not isinstance(node, dict) or step not in node:
            return False
        if mode == "fresh" and index == last_list:
            node[step] = [{}]
        node = node[step]
        for _ in range(lists):
            if not isinstance(node, list) or not node:
                return False
            node = node[-1]
    name, lists = steps[-1]
    if not isinstance(node, dict):
        return False
    if not lists:
        node[name] = value
        return True
    items = node.get(name)
    if not isinstance(items, list) or not items:
        return False
    items[-1] = value
    return True


def declared(kind: str = KIND) -> list[Declared]:
    """The kind's declarations; a schedule's template is an experiment's spec, whose rules
    are the experiment's (cased once, as an experiment's)."""
    if kind == KIND:
        return declarations(ConcurrencyExperiment, "")
    return [d for d in declarations(ExperimentSchedule, "") if not d.path.startswith(TEMPLATE)]


def contexts(kind: str = KIND) -> list[dict[str, Any]]:
    """Valid resources of the kind, smallest first: the base and every Rule's valid example.
    A field's Check finds here a spec in which the field applies."""
    found = [document({}, kind)]
    found += [
        document(dict(d.rule.valid), kind) for d in declared(kind) if isinstance(d.rule, Rule)
    ]
    return sorted(found, key=lambda resource: len(repr(resource)))


def _reach(resource: Any, path: str) -> int:
    """How many of the objects above a field a resource has, from the top."""
    node, depth = resource, 0
    for name, lists in _steps(path)[:-1]:
        if not isinstance(node, dict) or name not in node:
            break
        node, depth = node[name], depth + 1
        for _ in range(lists):
            node = node[-1] if isinstance(node, list) and node else None
    return depth


def accepted(resource: dict[str, Any]) -> bool:
    """Whether cxlab reads the resource without a complaint."""
    parse = parse_experiment if resource["kind"] == KIND else parse_experiment_schedule
    try:
        parse(resource)
    except SpecError:
        return False
    return True


def in_context(
    path: str, value: Any, kind: str = KIND, valid: bool = True
) -> dict[str, Any] | None:
    """A valid resource in which the field applies, with the field set to value: the smallest
    that has the field, else its object, else the fewest objects made on the way; with
    `valid`, the first of those cxlab accepts with this value (the apiserver's agreement is
    its cases' test). None if there is none: give one of the rules a valid example with the
    field."""
    found = contexts(kind)
    nearest = sorted(found, key=lambda resource: -_reach(resource, path))  # stable: smallest
    for mode in ("exists", "object", "create", "fresh"):
        for resource in found if mode in ("exists", "object") else nearest:
            if mode == "exists" and concrete(path, resource) is None:
                continue
            candidate = copy.deepcopy(resource)
            placed = place(candidate, path, value, "object" if mode == "exists" else mode)
            if placed and (not valid or accepted(candidate)):
                return candidate
    return None


def with_context(path: str, valid: Any, invalid: Any, kind: str = KIND) -> tuple[Any, Any]:
    """The valid and the invalid resource of a field's case: one context, two values."""
    resource = in_context(path, valid, kind)
    assert resource is not None, f"{path}: no valid example takes {valid!r}; give a rule one"
    broken = copy.deepcopy(resource)
    assert place(broken, path, invalid)
    return resource, broken


@dataclass(frozen=True)
class Case:
    path: str
    """Where the rule sits in the CRD's schema: spec.models[] for every model entry, "" for
    the root of the resource."""
    message: str
    """The rule's message, exactly as in the CRD: the apiserver's rejection must carry it."""
    valid: dict[str, Any]
    invalid: dict[str, Any]
    field: str
    """The field `cxlab plan` names for the invalid manifest, as Kubernetes writes it:
    spec.models[1].workers."""
    apiserver_field: str
    """The field the apiserver names (where cxlab can pinpoint more: the field above)."""
    kind: str = KIND
    cluster_only: bool = False
    """A rule of the cluster's alone: `cxlab plan` (and cxlab run) accept the invalid manifest
    (valueFrom.env names a variable of cxlab run's own)."""
    local_only: bool = False
    """A rule cxlab alone checks (no CEL: the apiserver cannot); the CRD accepts both."""

    @property
    def rule(self) -> tuple[str, str]:
        return (self.path, self.message)

    @property
    def id(self) -> str:
        words = re.sub(r"[^a-zA-Z0-9]+", "-", self.message).strip("-")
        kind = "" if self.kind == KIND else "schedule:"
        return f"{kind}{self.path or 'root'}:{words[:36].rstrip('-')}"


def _rule_case(found: Declared, kind: str) -> Case:
    rule = found.rule
    assert isinstance(rule, Rule)
    valid, invalid = document(dict(rule.valid), kind), document(dict(rule.invalid), kind)
    where = concrete(found.path, invalid) if found.path else ""
    assert where is not None, f"{found.path}: the invalid example does not reach it"
    field = ".".join(p for p in (where, rule.field) if p)
    return Case(
        found.path, rule.message, valid, invalid, field, field, kind,
        cluster_only=rule.holds is None, local_only=rule.cel is None,
    )  # fmt: skip


def _check_case(found: Declared, kind: str) -> Case:
    check = found.rule
    assert isinstance(check, Check)
    valid, invalid = with_context(found.path, check.valid, check.invalid, kind)
    where = concrete(found.path, invalid)
    assert where is not None
    return Case(
        found.path, check.message, valid, invalid, where + check.pinpointed, where, kind,
        local_only=check.cel is None,
    )  # fmt: skip


def cases(kind: str = KIND) -> list[Case]:
    return [
        _rule_case(d, kind) if isinstance(d.rule, Rule) else _check_case(d, kind)
        for d in declared(kind)
    ]


CASES = cases(KIND) + cases(SCHEDULE_KIND)


def declared_rules(crd_path: Path) -> Iterator[tuple[str, str]]:
    """(schema path, message) of every x-kubernetes-validations rule of every version."""

    def walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
        for rule in schema.get("x-kubernetes-validations", []):
            yield (path, rule["message"])
        for name, sub in schema.get("properties", {}).items():
            yield from walk(sub, f"{path}.{name}" if path else name)
        if "items" in schema:
            yield from walk(schema["items"], f"{path}[]")
        if isinstance(schema.get("additionalProperties"), dict):
            yield from walk(schema["additionalProperties"], f"{path}{{}}")

    crd = yaml.safe_load(crd_path.read_text())
    for version in crd["spec"]["versions"]:
        yield from walk(version["schema"]["openAPIV3Schema"], "")


def field_path(text: str) -> str:
    """A field as Kubernetes writes it (spec.models[1].workers), from any of the spellings the
    two sides could use: pydantic's dotted location (spec.models.1.workers), a rule's
    fieldPath (.metadata.name). `cxlab plan` and the apiserver both write the Kubernetes form
    today; this keeps the comparison honest if either drifts."""
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", text.strip()).removeprefix(".")


def plan_problems(stderr: str) -> list[tuple[str, str]]:
    """(field, message) per line of `cxlab plan`'s complaints: "cxlab: FILE: FIELD: message"."""
    found = re.findall(r"^cxlab: [^:]+: ([^\s:]+): (.*)$", stderr, flags=re.MULTILINE)
    return [(field_path(field), message) for field, message in found]


# kubectl prints one error as `... is invalid: FIELD: Invalid value: "TYPE": MESSAGE`; several
# as `... is invalid: [FIELD: ..., FIELD: ...]`, which this does not match, on purpose.
_APISERVER_ERROR = re.compile(r'is invalid: ([^\s\[:][^\s:]*): Invalid value: "[^"]*": (.*)$')


def apiserver_problem(stderr: str) -> tuple[str, str] | None:
    """(field, message) of the apiserver's one complaint in kubectl's output, else None."""
    match = _APISERVER_ERROR.search(stderr.strip())
    return (field_path(match.group(1)), match.group(2).strip()) if match else None
