"""The `status` of an ExperimentSchedule, typed: the CRD's status schema is generated from
`ScheduleStatus`, and every status the operator writes is checked against it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.conditions import Condition
from cxlab.schedules.history import HistoryEntry
from cxlab.shape import Maybe, Shape, optional


class FoundRegression(Shape):
    """One metric of one point, or of the run as a whole, that got worse beyond the policy."""

    point: str
    """The point's key, or "every point" for a shift of the whole run."""
    scope: Literal["point", "run"] = "point"
    cause: Literal["code", "environment"] = "code"
    """environment when the run's calibration moved with it (RegressionCheck.environment)."""
    metric: str
    before: float
    """The baseline's median."""
    after: float
    """The newest run's median."""
    change: float
    """(after - before) / before."""
    p_value: float
    """The one-sided prediction test's p-value, adjusted (Benjamini-Yekutieli) over every
    point and metric of the run (docs/schedules.md)."""
    baseline_runs: int


class CheckedPolicy(Shape):
    """spec.regression as it was when the run was compared."""

    min_relative_change: float
    significance: float
    baseline_runs: int


class RegressionCheck(Shape):
    """The newest comparison of a run with its baseline: compared again when the run, the
    acknowledged run or the policy changes."""

    run: str
    """The run compared."""
    acknowledged_run: Maybe[str] = None
    policy: CheckedPolicy
    environment: Maybe[str] = None
    """How the run's environment differs from its baseline's: calibration figures that got
    worse beyond the policy, fingerprint fields that changed."""
    found: Maybe[list[FoundRegression]] = None


class ScheduledPlan(CapacityPlan):
    """The newest succeeded run's capacity plan (its status.capacityPlan)."""

    run: Maybe[str] = None
    """The run it comes from."""
    previous_pods: Maybe[int] = None
    """The Pods the succeeded run before it planned (PlanGrew when these are more)."""
    previous_run: Maybe[str] = None
    """That run."""


class ScheduleStatus(Shape):
    """Written by the operator: the runs started, skipped and missed, their history, the
    newest comparison and capacity plan."""

    observed_generation: Maybe[int] = None
    last_schedule_time: Maybe[datetime] = None
    """The most recent slot the operator acted on (started, skipped or missed)."""
    next_schedule_time: Maybe[datetime] = None
    last_successful_time: Maybe[datetime] = None
    active: Maybe[list[str]] = None
    """Runs going on."""
    started_runs: Maybe[int] = None
    skipped_runs: Maybe[int] = None
    """Slots skipped because a run was still going (concurrencyPolicy Forbid)."""
    missed_runs: Maybe[int] = None
    """Slots that passed while the operator was down, or past startingDeadlineSeconds."""
    replaced_runs: Maybe[int] = None
    """Runs stopped for a newer slot (concurrencyPolicy Replace)."""
    failed_objective_runs: Maybe[int] = None
    """Finished runs that broke an objective of the template's spec.objectives."""
    history: Maybe[list[HistoryEntry]] = None
    """One compact entry per finished run, oldest first, at most spec.historyLimit."""
    regression: Maybe[RegressionCheck] = None
    regressed: Maybe[bool] = None
    """Whether the newest run regressed (the Regressed condition, for a printer column)."""
    capacity_plan: Maybe[ScheduledPlan] = None
    conditions: Maybe[list[Condition]] = optional(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )


def checked(status: Mapping[str, Any]) -> Mapping[str, Any]:
    """A status document, once it is known to have the typed shape (ValueError if not)."""
    ScheduleStatus.read(status)
    return status
