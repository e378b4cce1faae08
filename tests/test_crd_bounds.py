"""Every number, duration, string, list and map a user can write in a ConcurrencyExperiment
has a bound in the CRD (and so, generated from the same models, in the spec): a walk over the
generated schema fails on the first field without one. The corpus (tests/helpers/bad_input.py) then
tries every bound from both sides."""

from __future__ import annotations

from helpers.schema import KUBERNETES_OWN, own, spec_fields

from cxlab_contract.durations import DURATION_PATTERN


def test_the_walk_sees_every_kind_of_field() -> None:
    kinds = {node.get("type") for _, node in spec_fields()}
    assert {"integer", "number", "string", "array", "object", "boolean"} <= kinds
    assert any(path.startswith(KUBERNETES_OWN[1]) for path, _ in spec_fields())


def test_every_number_has_a_lower_and_an_upper_bound() -> None:
    unbounded = [
        path
        for path, node in spec_fields()
        if node.get("type") in ("integer", "number")
        and not ("minimum" in node and "maximum" in node)
    ]
    assert not unbounded, f"numbers without minimum and maximum: {unbounded}"


def test_every_duration_has_a_lower_and_an_upper_bound() -> None:
    durations = [(p, n) for p, n in spec_fields() if n.get("pattern") == DURATION_PATTERN]
    assert len(durations) >= 4  # rtt, rtts[], hold, trialTimeout
    unbounded = [
        path
        for path, node in durations
        if "maxLength" not in node
        or not any(
            "duration(self) >=" in rule["rule"] and "duration(self) <=" in rule["rule"]
            for rule in node.get("x-kubernetes-validations", [])
        )
    ]
    assert not unbounded, f"durations without a CEL bound and a length: {unbounded}"


def test_every_string_list_and_map_of_cxlab_has_a_size_bound() -> None:
    unbounded = []
    for path, node in spec_fields():
        kind = node.get("type")
        if not own(path):
            continue
        if kind == "string" and "maxLength" not in node and "enum" not in node:
            unbounded.append(path)
        if kind == "array" and "maxItems" not in node:
            unbounded.append(path)
        if kind == "object" and "additionalProperties" in node and "maxProperties" not in node:
            unbounded.append(path)
    assert not unbounded, f"no maxLength / maxItems / maxProperties: {unbounded}"
