"""docs/spec.md's field tables against the models they describe: every field a user can write
has a line (its own, or its object's where that line spells out the object's fields), every
line names a field there is, and the bounds and defaults a line states are the models'.
Adding a field to a model without its line, or changing a bound or default without the
line, fails here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import ROOT

from cxlab.crd import schedule_spec_schema, spec_schema
from cxlab.experiments.fields import memory_bytes
from cxlab.experiments.spec import ExperimentSpec
from cxlab.rules import Check, declarations
from cxlab.schedules.spec import ScheduleSpec
from cxlab_contract.durations import parse_duration

SPEC_DOC = ROOT / "docs" / "spec.md"
SECTIONS = {kind: f"## {kind}" for kind in ("ConcurrencyExperiment", "ExperimentSchedule")}
# The page writes ranges with an en dash and negatives with a minus sign.
DASH, MINUS = "\u2013", "\u2212"
# Kubernetes' own schemas, embedded whole: their fields are Kubernetes' to document.
EMBEDDED = ("placement.tolerations", "placement.affinity")


@dataclass(frozen=True)
class Line:
    names: tuple[str, ...]
    kind: str
    default: str


def _names(cell: str) -> tuple[str, ...]:
    """`objectives[].cpuPerTask.max`, `.startSkew.max` -> both in full: a name that starts
    with a dot replaces as many parts at the end of the one before it."""
    names: list[str] = []
    for name in re.findall(r"`([^`]+)`", cell):
        if name.startswith(".") and names:
            parts = name.lstrip(".").split(".")
            name = ".".join(names[-1].split(".")[: -len(parts)] + parts)
        names.append(name)
    return tuple(names)


def lines(kind: str) -> list[Line]:
    text = SPEC_DOC.read_text()
    section = text.split(SECTIONS[kind], 1)[1].split("\n## ", 1)[0]
    found = []
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        found.append(Line(_names(cells[0]), cells[1], cells[2]))
    return found


def fields(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field of a spec schema, by the name docs/spec.md gives it (models[].workers)."""
    for name, sub in schema.get("properties", {}).items():
        where = f"{path}.{name}" if path else name
        yield where, sub
        if where.startswith(EMBEDDED):
            continue
        node = sub.get("items", sub) if sub.get("type") == "array" else sub
        below = f"{where}[]" if sub.get("type") == "array" and "properties" in node else where
        yield from fields(node, below)


SCHEMAS = {"ConcurrencyExperiment": spec_schema, "ExperimentSchedule": schedule_spec_schema}


def _schema(kind: str) -> dict[str, dict[str, Any]]:
    found = dict(fields(SCHEMAS[kind]()))
    if kind == "ExperimentSchedule":  # the template is an experiment's spec, documented there
        found = {k: v for k, v in found.items() if not k.startswith("experimentTemplate.spec.")}
    return found


def _documented(name: str, documented: dict[str, Line]) -> bool:
    """A field has its own line, or lines of its own fields (an object), or its object's line
    spells its fields out (not "object")."""
    if name in documented or name.removesuffix("[]") in documented or name + "[]" in documented:
        return True
    if any(other.startswith((name + ".", name + "[]")) for other in documented):
        return True
    parent = name.rsplit(".", 1)[0] if "." in name else ""
    while parent:
        line = documented.get(parent) or documented.get(parent.removesuffix("[]"))
        if line is not None:
            return not line.kind.startswith("object")
        parent = parent.rsplit(".", 1)[0] if "." in parent else ""
    return False


@pytest.mark.parametrize("kind", sorted(SECTIONS))
def test_every_field_has_a_line_and_every_line_a_field(kind: str) -> None:
    documented = {name: line for line in lines(kind) for name in line.names}
    schema = _schema(kind)
    names = set(schema) | {"metadata.name"}
    unknown = sorted(n for n in documented if n not in names and n + "[]" not in names
                     and n.removesuffix("[]") not in names)  # fmt: skip
    assert not unknown, f"docs/spec.md names fields the {kind} has not: {unknown}"
    missing = sorted(n for n in schema if not _documented(n, documented))
    assert not missing, f"fields of {kind} without a line in docs/spec.md: {missing}"


_NUMBER = rf"2\^53{MINUS}1|{MINUS}?[0-9][0-9,.]*(?:e[0-9]+)?"


def _number(text: str) -> float:
    if text == f"2^53{MINUS}1":
        return float(2**53 - 1)
    return float(text.replace(",", "").replace(MINUS, "-"))


def _stated_bounds(kind: str) -> tuple[str, float, float] | None:
    """(unit, low, high) where a line says "integer A - B", "number A - B", "number in
    (A, B]", "Go duration A - B" or "quantity A - B" (the first it says; the dash an en
    dash)."""
    number = re.search(
        rf"(?:integers?|number)(?: in [(\[])? ?({_NUMBER}) ?[{DASH},] ?({_NUMBER})", kind
    )
    if number:
        return "number", _number(number.group(1)), _number(number.group(2))
    duration = re.search(
        rf"Go duration ([0-9][0-9a-z\u00b5.]*) {DASH} ([0-9][0-9a-z\u00b5.]*)", kind
    )
    if duration:
        return "duration", parse_duration(duration.group(1)), parse_duration(duration.group(2))
    memory = re.search(rf"quantity ([0-9]+[KMGT]i) {DASH} ([0-9]+[KMGT]i)", kind)
    if memory:
        return "memory", memory_bytes(memory.group(1)), memory_bytes(memory.group(2))
    return None


def _declared_bounds(kind: str) -> dict[tuple[str, str], tuple[float, float]]:
    """Each duration and memory field's bounds, as its Check declares them: (unit, path)."""
    root = ExperimentSpec if kind == "ConcurrencyExperiment" else ScheduleSpec
    found = {}
    for declared in declarations(root, ""):
        rule, path = declared.rule, declared.path.removesuffix("[]")
        duration = re.fullmatch(r"must be a duration between (\S+) and (\S+)", rule.message)
        memory = re.fullmatch(r"must be between ([0-9]+[KMGT]i) and ([0-9]+[KMGT]i)", rule.message)
        if isinstance(rule, Check) and duration:
            found["duration", path] = tuple(map(parse_duration, duration.groups()))
        elif isinstance(rule, Check) and memory:
            found["memory", path] = tuple(map(float, map(memory_bytes, memory.groups())))
    return found  # type: ignore[return-value]


def _bounded(
    name: str,
    schema: dict[str, dict[str, Any]],
    unit: str,
    declared: dict[tuple[str, str], tuple[float, float]],
) -> tuple[Any, Any] | None:
    """The bounds the model gives a field (for an object, its one bounded field: latency's
    max); a list's are its items'."""
    if unit != "number":
        if (unit, name) in declared:
            return declared[unit, name]
        inner = [v for (u, p), v in declared.items() if u == unit and p.startswith(name + ".")]
        return inner[0] if len(inner) == 1 else None
    node = schema.get(name) or schema.get(name + "[]") or {}
    node = node.get("items", node) if node.get("type") == "array" else node
    return node.get("minimum"), node.get("maximum")  # fmt: skip


# How many bounds and defaults each table states at least: the parse still reads them.
STATED = {"ConcurrencyExperiment": (40, 20), "ExperimentSchedule": (6, 8)}


@pytest.mark.parametrize("kind", sorted(SECTIONS))
def test_the_bounds_a_line_states_are_the_models(kind: str) -> None:
    schema, declared = _schema(kind), _declared_bounds(kind)
    checked, wrong = 0, []
    for line in lines(kind):
        stated = _stated_bounds(line.kind)
        if stated is None:
            continue
        unit, low, high = stated
        # one bound for all the names of a line (rtt / rtts), unless it lists one per name
        for name in line.names[:1] if ", " in line.kind.split(f" {DASH} ", 1)[-1] else line.names:
            actual = _bounded(name, schema, unit, declared)
            checked += 1
            if actual != (low, high):
                wrong.append(f"{name}: the line says {low!r} to {high!r}, the model {actual}")
    assert checked >= STATED[kind][0], checked
    assert not wrong, wrong


def _stated_defaults(line: Line) -> list[str]:
    """The defaults a line gives as literals (`poisson`; `3`, `1`), one per name."""
    literals = re.findall(r"`([^`]+)`", line.default)
    plain = re.sub(r"`[^`]+`", "", line.default).strip(" ,")
    return literals if literals and not plain else []


def _same(stated: str, actual: Any) -> bool:
    if isinstance(actual, bool):
        return stated == str(actual).lower()
    if isinstance(actual, int | float):
        return float(stated) == float(actual)
    if isinstance(actual, list):
        return stated == "[" + ", ".join(map(str, actual)) + "]"
    return stated == str(actual)


@pytest.mark.parametrize("kind", sorted(SECTIONS))
def test_the_defaults_a_line_states_are_the_models(kind: str) -> None:
    schema = _schema(kind)
    checked, wrong = 0, []
    for line in lines(kind):
        stated = _stated_defaults(line)
        if len(stated) != len(line.names):
            continue
        for name, value in zip(line.names, stated, strict=True):
            node = schema.get(name) or schema.get(name + "[]") or {}
            if "default" not in node:  # applied where it is used (the runner, the plan)
                continue
            checked += 1
            if not _same(value, node["default"]):
                wrong.append(f"{name}: the line says `{value}`, the model {node['default']!r}")
    assert checked >= STATED[kind][1], checked
    assert not wrong, wrong
