"""The `status` of an ExperimentSchedule, typed: the CRD's status schema is generated from
`ScheduleStatus`, and every status the operator writes is checked against it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cxlab.conditions import Condition
from cxlab.experiments.capacity_plan import CapacityPlan
from cxlab.schedules.history import HistoryEntry
from cxlab.shape import Shape, optional


class FoundRegression(Shape):
    """One metric of one point that got worse beyond the policy."""

    point: str
    metric: str
    before: float
    """The baseline's median."""
    after: float
    """The newest run's median."""
    change: float
    """(after - before) / before."""
    p_value: float
    """One-sided Welch t-test of the newest run's repetitions against the baseline's."""
    baseline_runs: int


class RegressionCheck(Shape):
    """The newest comparison of a run with its baseline."""

    checked: str
    """What was compared (run, acknowledged run, policy): compared again when it changes."""
    run: str
    """The run compared."""
    acknowledged_run: str = optional()
    found: list[FoundRegression] = optional()


class ScheduledPlan(CapacityPlan):
    """The newest succeeded run's capacity plan (its status.capacityPlan)."""

    run: str = optional()
    """The run it comes from."""


class ScheduleStatus(Shape):
    """Written by the operator: the runs started, skipped and missed, their history, the
    newest comparison and capacity plan."""

    observed_generation: int = optional()
    last_schedule_time: datetime = optional()
    """The most recent slot the operator acted on (started, skipped or missed)."""
    next_schedule_time: datetime = optional()
    last_successful_time: datetime = optional()
    active: list[str] = optional()
    """Runs going on."""
    started_runs: int = optional()
    skipped_runs: int = optional()
    """Slots skipped because a run was still going (concurrencyPolicy Forbid)."""
    missed_runs: int = optional()
    """Slots that passed while the operator was down, or past startingDeadlineSeconds."""
    replaced_runs: int = optional()
    """Runs stopped for a newer slot (concurrencyPolicy Replace)."""
    history: list[HistoryEntry] = optional()
    """One compact entry per finished run, oldest first, at most spec.historyLimit."""
    regression: RegressionCheck = optional()
    regressed: bool = optional()
    """Whether the newest run regressed (the Regressed condition, for a printer column)."""
    capacity_plan: ScheduledPlan = optional()
    conditions: list[Condition] = optional(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )


def checked(status: dict[str, Any]) -> dict[str, Any]:
    """The status, once it is known to have the typed shape (ValueError if not)."""
    ScheduleStatus.read(status)
    return status
