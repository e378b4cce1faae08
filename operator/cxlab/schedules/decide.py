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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from cxlab.conditions import condition_in, set_condition_in
from cxlab.schedules.cron import Schedule
from cxlab.schedules.history import appended, newest_succeeded
from cxlab.schedules.regression import Policy, Regression, regressions, summary_line
from cxlab.schedules.spec import ExperimentSchedule
from cxlab.times import parse_time, timestamp

FINISHED = ("Succeeded", "Failed")
# Regressions listed in status (the condition names the worst; the rest are for `kubectl get
# -o yaml` and the dashboard): bounded like everything in status.
MAX_REGRESSIONS_SHOWN = 20


@dataclass(frozen=True)
class RunView:
    """A run (an experiment the schedule owns) as the operator's index sees it."""

    name: str
    phase: str | None
    scheduled: datetime | None  # its slot (annotation), None if someone removed it
    deleting: bool = False

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    @property
    def active(self) -> bool:
        return not self.finished and not self.deleting


@dataclass
class Pass:
    """What one pass decided: the status to write, then what to do."""

    status: dict[str, Any]
    create: str | None = None  # the run to create (its slot is status.lastScheduleTime)
    stop: list[str] = field(default_factory=list)  # active runs Replace stops
    delete: list[str] = field(default_factory=list)  # finished runs beyond the limits
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    record: list[str] = field(default_factory=list)  # finished runs recorded in this pass

    def event(self, kind: str, reason: str, message: str) -> None:
        self.events.append((kind, reason, message))


def run_name(schedule: str, slot: datetime) -> str:
    return f"{schedule}-{int(slot.timestamp())}"


def _moment(text: str | None) -> datetime | None:
    return parse_time(text) if text else None


def _policy(schedule: ExperimentSchedule) -> Policy:
    regression = schedule.spec.regression
    return Policy(
        min_relative_change=regression.min_relative_change,
        significance=regression.significance,
        baseline_runs=regression.baseline_runs,
    )


def decide(
    schedule: ExperimentSchedule,
    old: Mapping[str, Any],
    runs: Sequence[RunView],
    entry_of: Callable[[str], dict[str, Any] | None],
    plan_of: Callable[[str], dict[str, Any] | None],
    *,
    generation: int,
    now: datetime,
) -> Pass:
    """`entry_of(run)` reads a finished run's history entry (None if the run is gone);
    `plan_of(run)` its status.capacityPlan."""
    spec = schedule.spec
    status: dict[str, Any] = {k: v for k, v in old.items() if k != "observedGeneration"}
    status["observedGeneration"] = generation
    decided = Pass(status)
    timing, zone = spec.timing()
    _record_finished(schedule, status, runs, entry_of, plan_of, decided)
    _fire(schedule, (timing, zone), status, runs, now, decided)
    _check_regressions(schedule, status, decided, generation=generation, now=now)
    recorded = {e["run"] for e in status.get("history") or []}
    decided.delete = _beyond_limits(spec.successful_runs_history_limit,
                                    spec.failed_runs_history_limit, runs, recorded)  # fmt: skip
    gone = set(decided.delete) | set(decided.stop)
    status["active"] = sorted(r.name for r in runs if r.active and r.name not in gone)
    if decided.create:
        status["active"] = sorted({*status["active"], decided.create})
    conditions = set_condition_in(
        status.get("conditions"), "Ready", True, "Scheduling",
        _ready_message(schedule), generation=generation, now=now,
    )  # fmt: skip
    status["conditions"] = conditions
    status["nextScheduleTime"] = timestamp(timing.next_after(now, zone, _anchor(schedule)))
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
    status: dict[str, Any],
    runs: Sequence[RunView],
    entry_of: Callable[[str], dict[str, Any] | None],
    plan_of: Callable[[str], dict[str, Any] | None],
    decided: Pass,
) -> None:
    """A history entry for every finished run not yet in the history; the newest succeeded
    run's capacity plan."""
    history = list(status.get("history") or [])
    recorded = {e["run"] for e in history}
    for run in sorted(runs, key=_slot_order):
        if not run.finished or run.name in recorded:
            continue
        entry = entry_of(run.name)
        if entry is None:
            continue
        history = appended(history, entry, schedule.spec.history_limit)
        decided.record.append(run.name)
        if entry["phase"] == "Succeeded":
            if entry.get("finishedTime"):
                status["lastSuccessfulTime"] = entry["finishedTime"]
            plan = plan_of(run.name)
            if plan:
                status["capacityPlan"] = plan | {"run": run.name}
        kind = "Normal" if entry["phase"] == "Succeeded" else "Warning"
        decided.event(kind, f"Run{entry['phase']}", f"run {run.name} {entry['phase']}")
    if history:
        status["history"] = history


def _fire(
    schedule: ExperimentSchedule,
    when: tuple[Schedule, ZoneInfo],
    status: dict[str, Any],
    runs: Sequence[RunView],
    now: datetime,
    decided: Pass,
) -> None:
    """Start the latest slot that came since the last one (CronJob's rule): earlier slots
    missed while the operator was down are counted, never run; the latest too when it is
    past the starting deadline."""
    spec = schedule.spec
    if spec.suspend:
        return
    timing, zone = when
    anchor = _anchor(schedule)
    since = _moment(status.get("lastScheduleTime")) or anchor
    slots = timing.slots(since, now, zone, anchor)
    if slots.latest is None:
        return
    latest = slots.latest
    status["lastScheduleTime"] = timestamp(latest)
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
        add_count(status, "startedRuns")
    elif deadline is not None and now - latest > timedelta(seconds=deadline):
        missed += 1
        late = (now - latest).total_seconds()
        decided.event("Warning", "MissedRuns", f"slot {timestamp(latest)} is {late:.0f} s old, "
                      f"past startingDeadlineSeconds ({deadline}): not started")  # fmt: skip
    else:
        _start(schedule, status, runs, latest, decided)
    add_count(status, "missedRuns", missed)


def _start(
    schedule: ExperimentSchedule,
    status: dict[str, Any],
    runs: Sequence[RunView],
    slot: datetime,
    decided: Pass,
) -> None:
    """The slot's run, unless another is going: Forbid skips the slot, Replace stops it."""
    active = [r.name for r in runs if r.active]
    if active and schedule.spec.concurrency_policy == "Forbid":
        add_count(status, "skippedRuns")
        decided.event("Normal", "RunSkipped", f"slot {timestamp(slot)} skipped: "
                      f"{', '.join(active)} still runs (concurrencyPolicy Forbid)")  # fmt: skip
        return
    if active:
        decided.stop = active
        add_count(status, "replacedRuns", len(active))
        decided.event("Normal", "RunReplaced", f"stopping {', '.join(active)} for the run of "
                      f"{timestamp(slot)} (concurrencyPolicy Replace)")  # fmt: skip
    decided.create = run_name(schedule.metadata.name, slot)
    add_count(status, "startedRuns")
    decided.event("Normal", "RunStarted", f"run {decided.create} for {timestamp(slot)}")


def add_count(status: dict[str, Any], key: str, more: int = 1) -> None:
    """One of status' run counters (startedRuns, skippedRuns, ...) grown; never written 0."""
    if more:
        status[key] = int(status.get(key, 0)) + more


def _check_regressions(
    schedule: ExperimentSchedule,
    status: dict[str, Any],
    decided: Pass,
    *,
    generation: int,
    now: datetime,
) -> None:
    """Compare the newest succeeded run with its baseline, when either changed (a run was
    recorded, or the acknowledged run or the policy was edited)."""
    history = status.get("history") or []
    policy, acknowledged = _policy(schedule), schedule.spec.regression.acknowledged_run
    newest = (newest_succeeded(history) or {}).get("run")
    key = f"{newest}|{acknowledged}|{policy}"
    previous = status.get("regression") or {}
    if newest is None or previous.get("checked") == key:
        return
    found = regressions(history, policy, acknowledged)
    names = {e["run"] for e in history}
    result: dict[str, Any] = {
        "checked": key,
        "run": newest,
        "found": [_shown(r) for r in found[:MAX_REGRESSIONS_SHOWN]],
    }
    if acknowledged:
        result["acknowledgedRun"] = acknowledged
    status["regression"] = result
    status["regressed"] = bool(found)
    if found:  # out of the next runs' baselines until acknowledged
        status["history"] = [e | {"regressed": True} if e["run"] == newest else e for e in history]
    conditions = list(status.get("conditions") or [])
    if found:
        message = summary_line(found)
        if (
            not (regressed := condition_in(conditions, "Regressed"))
            or not regressed.true
            or previous.get("run") != newest
        ):
            decided.event("Warning", "Regressed", message)
        conditions = set_condition_in(conditions, "Regressed", True, "Regressed", message,
                                   generation=generation, now=now)  # fmt: skip
    else:
        if acknowledged and acknowledged not in names:
            why = (f"spec.regression.acknowledgedRun {acknowledged!r} is not in the history: "
                   f"name a run listed in status.history")  # fmt: skip
            reason = "UnknownAcknowledgedRun"
        else:
            why = f"run {newest}: no metric changed beyond the policy against its baseline"
            reason = "Acknowledged" if acknowledged == newest else "NoRegression"
        conditions = set_condition_in(conditions, "Regressed", False, reason, why,
                                   generation=generation, now=now)  # fmt: skip
    status["conditions"] = conditions


def _shown(found: Regression) -> dict[str, Any]:
    return {
        "point": found.point,
        "metric": found.metric,
        "before": found.before,
        "after": found.after,
        "change": round(found.change, 4),
        "pValue": float(f"{found.p_value:.3g}"),
        "baselineRuns": len(found.baseline),
    }


def _slot_order(run: RunView) -> tuple[float, str]:
    return (run.scheduled.timestamp() if run.scheduled else 0.0, run.name)


def _beyond_limits(
    succeeded: int, failed: int, runs: Sequence[RunView], recorded: set[str]
) -> list[str]:
    """Finished runs past the limits, oldest first; only once their entry is in the history,
    never one still going."""
    done = sorted((r for r in runs if r.finished and not r.deleting), key=_slot_order)
    keep = {"Succeeded": succeeded, "Failed": failed}
    doomed = []
    for phase, limit in keep.items():
        mine = [r for r in done if r.phase == phase]
        doomed += [r.name for r in mine[: max(0, len(mine) - limit)] if r.name in recorded]
    return sorted(doomed)
