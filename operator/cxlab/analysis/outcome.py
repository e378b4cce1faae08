"""How a trial ended (TrialOutcome): its Result read from a runner's output, validated against
the versioned schema, its pinning checked, its Pods' Results merged; or why it has none."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import cast

import jsonschema

from cxlab.analysis.merge import merge_locust, merge_results
from cxlab.analysis.service_figures import ServiceFigures
from cxlab.experiments.plan import Trial, locust_master
from cxlab.experiments.spec import ExperimentSpec
from cxlab_contract import result_schema
from cxlab_contract.result import Result


@dataclass(frozen=True)
class TrialOutcome:
    """A finished trial: its Result, or why it has none."""

    trial: Trial
    result: Result | None
    error: str | None = None
    unpinned: str | None = None  # why the trial did not run on exactly its own cores
    pod_results: list[Result] | None = None  # each Pod's own Result when it had several
    skipped: str | None = None  # not run: why (abortOnFail, cxlab.analysis.objectives)
    service: ServiceFigures | None = None  # spec.service's own figures over the trial

    @property
    def succeeded(self) -> bool:
        return self.result is not None and self.error is None

    @property
    def saturated(self) -> str | None:
        """Why an arrival run's generator could not keep its rate (CONTRACT.md), if it could not:
        the trial measured the runner, not the model."""
        # .get: a Result recorded before duration runs existed has no such key
        arrival = self.result.get("arrival") if self.result is not None else None
        if arrival is None or not arrival["generatorSaturated"]:
            return None
        return arrival["saturation"] or "the generator could not keep the rate"

    def counts(self, pinning: str) -> bool:
        """Whether the trial's Result enters the summary under the experiment's pinning: not
        unpinned (under "required"), nor measured by a saturated generator."""
        pinned = self.unpinned is None or pinning == "preferred"
        return self.succeeded and pinned and self.saturated is None


class ResultError(Exception):
    """A runner's output that is not a valid Result."""


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(result_schema())


def parse_result(text: str) -> Result:
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
    return cast(Result, result)


def pinning_problem(result: Result, requested: set[int] | int) -> str | None:
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


def classify(
    trial: Trial,
    results: list[Result],
    requested: list[set[int]] | int | None,
    shared: str | None = None,
    max_failure_ratio: float | None = None,
) -> TrialOutcome:
    """A trial whose every Pod produced a valid Result (in Pod order), the same way on both
    backends: succeeded, or succeeded unpinned (its Result is kept; the summary decides by
    the experiment's pinning whether it counts). `requested`: each Pod's cores (locally),
    how many (a cluster's kubelet picks them), or None for a fraction of a CPU; `shared`:
    why the Pods shared cores, if they did. A trial of several Pods gets the merged Result
    and keeps each Pod's. A trial without a Result is a TrialOutcome with its error."""
    if requested is None:
        problems = ["a fraction of a CPU runs in the shared pool, on no core of its own"]
    else:
        problems = [
            f"Pod {index}: {problem}" if len(results) > 1 else problem
            for index, result in enumerate(results)
            if (problem := pinning_problem(result, _own(requested, index))) is not None
        ]
    unpinned = shared or next(iter(problems), None)
    if len(results) == 1:
        merged, pod_results = results[0], None
    elif locust_master(trial) is not None:  # the master's Result comes after its workers'
        merged, pod_results = merge_locust(results[-1], results[:-1]), results
    else:
        merged, pod_results = merge_results(results), results
    failing = too_many_failures(merged, max_failure_ratio)
    return TrialOutcome(trial, merged, failing, unpinned=unpinned, pod_results=pod_results)


def failure_bound(spec: ExperimentSpec) -> float | None:
    """The share of failed requests past which a trial fails: a target's, else none (the
    delay target's failures are the runner's, and stay counted in the point)."""
    return spec.workload.target.max_failure_ratio if spec.workload.target is not None else None


def failure_kinds_text(result: Result) -> str:
    """The kinds its failed tasks had, "connect 3, timeout 1"; empty for none (or an older
    runner's Result, which has no kinds)."""
    kinds = result.get("failureKinds")
    return ", ".join(f"{kind} {n}" for kind, n in (kinds or {}).items() if n)


def too_many_failures(result: Result, bound: float | None) -> str | None:
    """Why a trial against the user's service measured its failures, not the service: more
    of its tasks failed than `bound` (workload.target.maxFailureRatio) allows, by kind."""
    if bound is None:
        return None
    total = result["tasksOk"] + result["tasksFailed"]
    if total == 0 or result["tasksFailed"] / total <= bound:
        return None
    by_kind = failure_kinds_text(result)
    first = result["errors"][0]["message"] if result["errors"] else None
    return (
        f"{result['tasksFailed']} of {total} requests failed "
        f"({result['tasksFailed'] / total:.0%}{': ' + by_kind if by_kind else ''})"
        f"{'; first: ' + first if first else ''}; above workload.target.maxFailureRatio "
        f"{bound:g}: fix the target, or raise the bound to measure it failing"
    )


def _own(requested: list[set[int]] | int, pod: int) -> set[int] | int:
    return requested if isinstance(requested, int) else requested[pod]
