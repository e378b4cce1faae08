"""Reading a runner's Result: parse, validate against the versioned schema, check pinning."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
from cxlab_contract import result_schema

from cxlab.plan import Trial
from cxlab.summary import TrialOutcome


class ResultError(Exception):
    """A runner's output that is not a valid Result."""


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(result_schema())


def parse_result(text: str) -> dict[str, Any]:
    """The Result in a runner's output: its last non-empty line (anything before it is noise
    a library printed), validated against the schema."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ResultError("the runner printed no Result")
    try:
        result = json.loads(lines[-1])
    except json.JSONDecodeError as error:
        raise ResultError(f"the runner's last line is not JSON: {error}") from None
    errors = sorted(_validator().iter_errors(result), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "document"
        raise ResultError(f"the Result breaks its schema at {where}: {errors[0].message}")
    return dict(result)


def pinning_problem(result: dict[str, Any], requested: set[int] | int) -> str | None:
    """Why the trial did not run on exactly the cores it asked for, or None if it did. The
    local backend knows which cores (a set); on a cluster the kubelet picks them, so only
    how many is known (an int)."""
    got = set(result["cpus"])
    if isinstance(requested, int):
        if len(got) == requested:
            return None
        return f"asked for {requested} exclusive CPU(s) but ran on {sorted(got)}"
    if got == requested:
        return None
    return f"asked for CPUs {sorted(requested)} but ran on {sorted(got)}"


def classify(trial: Trial, result: dict[str, Any], requested: set[int] | int) -> TrialOutcome:
    """A trial that produced a valid Result, the same way on both backends: succeeded, or
    succeeded unpinned (its Result is kept; the summary decides by the experiment's pinning
    whether it counts). A trial without one is a TrialOutcome with its error."""
    return TrialOutcome(trial, result, unpinned=pinning_problem(result, requested))
