"""One pass over one ExperimentSchedule, pure: from its spec, its status and its runs as the
operator sees them, decide which run to start (if any), which to stop or delete, and the new
status. The operator (cxlab.controller.schedule_pass) then writes the status, guarded by the
object's resourceVersion, and acts.

Why a run can never start twice: its name comes from its slot (<schedule>-<unix seconds>),
so a second create of the same slot, by a restarted or a second operator, is refused by the
apiserver (409); and the slot is remembered in status.lastScheduleTime, written only by a
status update that fails when another writer got there first. A pass that created a run but
died before writing the status comes back to the same slot, finds its run, and records it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.conditions import Condition, condition_of, set_condition
from cxlab.experiments.status import Phase
from cxlab.schedules.cron import Schedule
from cxlab.schedules.history import HistoryEntry, appended, newest_succeeded
from cxlab.schedules.regression import (
    Policy,
    Regression,
    newest_environment_change,
    regressions,
    summary_line,
)
from cxlab.schedules.spec import ExperimentSchedule
from cxlab.schedules.status import (
    CheckedPolicy,
    FoundRegression,
    RegressionCheck,
    ScheduledPlan,
    ScheduleStatus,
)
from cxlab.times import timestamp

# Regressions listed in status (the condition names the worst; the rest are for `kubectl get
# -o yaml` and the dashboard): bounded like everything in status.
MAX_REGRESSIONS_SHOWN = 20
# A condition message: the API server caps it at 32 KiB; the summary keeps to ~1,000 chars.
MAX_MESSAGE = 2000


@dataclass(frozen=True)
class RunView:
    """A run (an experiment the schedule owns) as the operator's index sees it."""

    name: str
    phase: str | None
    scheduled: datetime | None  # its slot (annotation), None if someone removed it
    deleting: bool = False

    @property
    def finished(self) -> bool:
        return Phase.ended(self.phase)

    @property
    def active(self) -> bool:
        return not self.finished and not self.deleting


@dataclass
class ScheduleDecision:
    """What one pass decided: the status to write, then what to do."""

    status: ScheduleStatus
    create: str | None = None  # the run to create (its slot is status.lastScheduleTime)
    stop: list[str] = field(default_factory=list)  # active runs Replace stops
    delete: list[str] = field(default_factory=list)  # finished runs beyond the limits
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    record: list[str] = field(default_factory=list)  # finished runs recorded in this pass

    def event(self, kind: str, reason: str, message: str) -> None:
        self.events.append((kind, reason, message))


def run_name(schedule: str, slot: datetime) -> str:
    return f"{schedule}-{int(slot.timestamp())}"


def _policy(schedule: ExperimentSchedule) -> Policy:
    regression = schedule.spec.regression
    return Policy(
        min_relative_change=regression.min_relative_change,
        significance=regression.significance,
        baseline_runs=regression.baseline_runs,
    )


def decide(
    schedule: ExperimentSchedule,
    old: ScheduleStatus,
    runs: Sequence[RunView],
    entry_of: Callable[[str], HistoryEntry | None],
    plan_of: Callable[[str], CapacityPlan | None],
    *,
    generation: int,
    now: datetime,
) -> ScheduleDecision:
    """`entry_of(run)` reads a finished run's history entry (None if the run is gone);
    `plan_of(run)` its status.capacityPlan."""
    spec = schedule.spec
    status = old.model_copy(deep=True, update={"observed_generation": generation})
    decided = ScheduleDecision(status)
    timing, zone = spec.timing()
    _record_finished(schedule, status, runs, entry_of, plan_of, decided)
    _fire(schedule, (timing, zone), status, runs, now, decided)
    _check_regressions(schedule, status, decided, generation=generation, now=now)
    recorded = {e.run for e in status.history or []}
    decided.delete = _beyond_limits(spec.successful_runs_history_limit,
                                    spec.failed_runs_history_limit, runs, recorded)  # fmt: skip
    gone = set(decided.delete) | set(decided.stop)
    active = {r.name for r in runs if r.active and r.name not in gone}
    status.active = sorted(active | ({decided.create} if decided.create else set()))
    status.conditions = set_condition(
        status.conditions, "Ready", True, "Scheduling", _ready_message(schedule),
        generation=generation, now=now,
    )  # fmt: skip
    status.next_schedule_time = timing.next_after(now, zone, _anchor(schedule))
    return decided


def _anchor(schedule: ExperimentSchedule) -> datetime:
    created = schedule.metadata.creation_timestamp
    assert created is not None, "a schedule from the apiserver has a creation time"
    return created


def _ready_message(schedule: ExperimentSchedule) -> str:
    spec = schedule.spec
    zone = spec.time_zone or "UTC"
    state = "suspended" if spec.suspend else "scheduling"
    return f"{state}: {spec.schedule} ({zone}), concurrencyPolicy {spec.concurrency_policy}"


def _record_finished(
    schedule: ExperimentSchedule,
    status: ScheduleStatus,
    runs: Sequence[RunView],
    entry_of: Callable[[str], HistoryEntry | None],
    plan_of: Callable[[str], CapacityPlan | None],
    decided: ScheduleDecision,
) -> None:
    """A history entry for every finished run not yet in the history; the newest succeeded
    run's capacity plan."""
    history = list(status.history or [])
    recorded = {e.run for e in history}
    for run in sorted(runs, key=_slot_order):
        if not run.finished or run.name in recorded:
            continue
        entry = entry_of(run.name)
        if entry is None:
            continue
        before = newest_succeeded(history)
        history = appended(history, entry, schedule.spec.history_limit)
        decided.record.append(run.name)
        if entry.phase == Phase.SUCCEEDED:
            if entry.finished_time:
                status.last_successful_time = entry.finished_time
            plan = plan_of(run.name)
            if plan:
                status.capacity_plan = _scheduled(plan, run.name, before, decided)
        kind = "Normal" if entry.phase == Phase.SUCCEEDED else "Warning"
        decided.event(kind, f"Run{entry.phase}", f"run {run.name} {entry.phase}")
        if entry.objectives == "Broken":
            add_count(status, "failed_objective_runs")
            why = entry.objectives_message or "an objective is broken"
            decided.event("Warning", "RunFailedObjectives", f"run {run.name}: {why}")
    if history:
        status.history = history


def _scheduled(
    plan: CapacityPlan, run: str, before: HistoryEntry | None, decided: ScheduleDecision
) -> ScheduledPlan:
    """The run's plan as the schedule's, beside the Pods the succeeded run before it
    planned; a plan needing more is a PlanGrew event (the regression alarm stays about the
    measurements)."""
    earlier = before.plan if before is not None and before.plan is not None else None
    scheduled = ScheduledPlan(
        **dict(plan), run=run,
        previous_pods=earlier.pods if earlier else None,
        previous_run=before.run if earlier and before else None,
    )  # fmt: skip
    if earlier and earlier.pods and plan.pods and plan.pods > earlier.pods and before:
        decided.event(
            "Warning", "PlanGrew",
            f"run {run} plans {plan.pods} Pods where {before.run} planned {earlier.pods} "
            f"({earlier.display} → {plan.display}): {plan.message}"[:1000],
        )  # fmt: skip
    return scheduled


def _fire(
    schedule: ExperimentSchedule,
    when: tuple[Schedule, ZoneInfo],
    status: ScheduleStatus,
    runs: Sequence[RunView],
    now: datetime,
    decided: ScheduleDecision,
) -> None:
    """Start the latest slot that came since the last one (CronJob's rule): earlier slots
    missed while the operator was down are counted, never run; the latest too when it is
    past the starting deadline."""
    spec = schedule.spec
    if spec.suspend:
        return
    timing, zone = when
    anchor = _anchor(schedule)
    since = status.last_schedule_time or anchor
    slots = timing.slots(since, now, zone, anchor)
    if slots.latest is None:
        return
    latest = slots.latest
    status.last_schedule_time = latest
    missed = slots.count - 1
    if missed:
        at_least = "at least " if slots.truncated else ""
        decided.event("Warning", "MissedRuns", f"{at_least}{missed} slot(s) between "
                      f"{timestamp(since)} and {timestamp(latest)} passed while the operator "
                      f"was not running; only the latest may start")  # fmt: skip
    deadline = spec.starting_deadline_seconds
    name = run_name(schedule.metadata.name, latest)
    if any(r.name == name for r in runs):
        # A pass that created it died before writing the status: the run is this slot's.
        add_count(status, "started_runs")
    elif deadline is not None and now - latest > timedelta(seconds=deadline):
        missed += 1
        late = (now - latest).total_seconds()
        decided.event("Warning", "MissedRuns", f"slot {timestamp(latest)} is {late:.0f} s old, "
                      f"past startingDeadlineSeconds ({deadline}): not started")  # fmt: skip
    else:
        _start(schedule, status, runs, latest, decided)
    add_count(status, "missed_runs", missed)


def _start(
    schedule: ExperimentSchedule,
    status: ScheduleStatus,
    runs: Sequence[RunView],
    slot: datetime,
    decided: ScheduleDecision,
) -> None:
    """The slot's run, unless another is going: Forbid skips the slot, Replace stops it."""
    active = [r.name for r in runs if r.active]
    if active and schedule.spec.concurrency_policy == "Forbid":
        add_count(status, "skipped_runs")
        decided.event("Normal", "RunSkipped", f"slot {timestamp(slot)} skipped: "
                      f"{', '.join(active)} still runs (concurrencyPolicy Forbid)")  # fmt: skip
        return
    if active:
        decided.stop = active
        add_count(status, "replaced_runs", len(active))
        decided.event("Normal", "RunReplaced", f"stopping {', '.join(active)} for the run of "
                      f"{timestamp(slot)} (concurrencyPolicy Replace)")  # fmt: skip
    decided.create = run_name(schedule.metadata.name, slot)
    add_count(status, "started_runs")
    decided.event("Normal", "RunStarted", f"run {decided.create} for {timestamp(slot)}")


def add_count(status: ScheduleStatus, counter: str, more: int = 1) -> None:
    """One of status' run counters (started_runs, skipped_runs, ...) grown; never written 0."""
    if more:
        setattr(status, counter, (getattr(status, counter) or 0) + more)


def _check_regressions(
    schedule: ExperimentSchedule,
    status: ScheduleStatus,
    decided: ScheduleDecision,
    *,
    generation: int,
    now: datetime,
) -> None:
    """Compare the newest succeeded run with its baseline, when either changed (a run was
    recorded, or the acknowledged run or the policy was edited)."""
    history = status.history or []
    policy, acknowledged = _policy(schedule), schedule.spec.regression.acknowledged_run
    newest = newest_succeeded(history)
    checked = CheckedPolicy(
        min_relative_change=policy.min_relative_change, significance=policy.significance,
        baseline_runs=policy.baseline_runs,
    )  # fmt: skip
    previous = status.regression
    if newest is None or (
        previous is not None
        and (previous.run, previous.acknowledged_run, previous.policy)
        == (newest.run, acknowledged, checked)
    ):
        return
    found = regressions(history, policy, acknowledged)
    environment = newest_environment_change(history, policy, acknowledged).text()
    status.regression = RegressionCheck(
        run=newest.run, acknowledged_run=acknowledged, policy=checked,
        environment=environment or None, found=[_shown(r) for r in found[:MAX_REGRESSIONS_SHOWN]],
    )  # fmt: skip
    status.regressed = bool(found)
    if found:  # out of the next runs' baselines until acknowledged
        status.history = [
            e.model_copy(update={"regressed": True}) if e.run == newest.run else e for e in history
        ]
    status.conditions = _regressed_condition(
        status, found, newest.run, previous, acknowledged, generation=generation, now=now,
        decided=decided,
    )  # fmt: skip


def _regressed_condition(
    status: ScheduleStatus,
    found: list[Regression],
    newest: str,
    previous: RegressionCheck | None,
    acknowledged: str | None,
    *,
    generation: int,
    now: datetime,
    decided: ScheduleDecision,
) -> list[Condition]:
    """Regressed True naming the worst (an event when it newly regressed), or False saying
    why not."""
    conditions = status.conditions or []
    if found:
        regression = status.regression
        environment = regression.environment if regression else None
        message = f"run {newest}" + (f" [{environment}]" if environment else "")
        message += f": {summary_line(found)}"
        # The code is blamed unless the calibration moved with every finding.
        blamed = "Environment" if all(r.cause == "environment" for r in found) else "Regressed"
        was = condition_of(conditions, "Regressed")
        if not (was and was.true) or (previous is not None and previous.run != newest):
            decided.event("Warning", "Regressed", message)
        return set_condition(conditions, "Regressed", True, blamed, message[:MAX_MESSAGE],
                             generation=generation, now=now)  # fmt: skip
    names = {e.run for e in status.history or []}
    if acknowledged and acknowledged not in names:
        why = (f"spec.regression.acknowledgedRun {acknowledged!r} is not in the history: "
               f"name a run listed in status.history")  # fmt: skip
        reason = "UnknownAcknowledgedRun"
    else:
        why = f"run {newest}: no metric changed beyond the policy against its baseline"
        reason = "Acknowledged" if acknowledged == newest else "NoRegression"
    return set_condition(conditions, "Regressed", False, reason, why,
                         generation=generation, now=now)  # fmt: skip


def _shown(found: Regression) -> FoundRegression:
    return FoundRegression(
        point=found.point, scope=found.scope, cause=found.cause, metric=found.metric,
        before=found.before, after=found.after,
        change=round(found.change, 4), p_value=float(f"{found.p_value:.3g}"),
        baseline_runs=len(found.baseline),
    )  # fmt: skip


def _slot_order(run: RunView) -> tuple[float, str]:
    return (run.scheduled.timestamp() if run.scheduled else 0.0, run.name)


def _beyond_limits(
    succeeded: int, failed: int, runs: Sequence[RunView], recorded: set[str]
) -> list[str]:
    """Finished runs past the limits, oldest first; only once their entry is in the history,
    never one still going."""
    done = sorted((r for r in runs if r.finished and not r.deleting), key=_slot_order)
    keep = {Phase.SUCCEEDED: succeeded, Phase.FAILED: failed}
    doomed = []
    for phase, limit in keep.items():
        mine = [r for r in done if r.phase == phase]
        doomed += [r.name for r in mine[: max(0, len(mine) - limit)] if r.name in recorded]
    return sorted(doomed)
