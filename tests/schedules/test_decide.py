"""One pass over an ExperimentSchedule (cxlab.schedules.decide), pure: which slot starts, what
is counted skipped or missed, what a restart finds, what history keeps and which runs go."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.experiments.fields import SpecError
from cxlab.schedules.decide import RunView, ScheduleDecision, decide, run_name
from cxlab.schedules.history import HistoryEntry
from cxlab.schedules.spec import parse_experiment_schedule
from cxlab.schedules.status import ScheduleStatus

CREATED = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


def schedule(**spec: Any) -> Any:
    return parse_experiment_schedule({
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ExperimentSchedule",
        "metadata": {"name": "tick", "creationTimestamp": CREATED.isoformat()},
        "spec": {
            "schedule": "@every 10s",
            "experimentTemplate": {"spec": {
                "workload": {"type": "sleep", "tasks": 1, "rtt": "50ms"},
                "models": [{"model": "asyncio"}],
            }},
            **spec,
        },
    })  # fmt: skip


def entry(run: str, phase: str = "Succeeded") -> dict[str, Any]:
    slot = datetime.fromtimestamp(int(run.rsplit("-", 1)[1]), UTC)
    return {"run": run, "phase": phase, "scheduledTime": slot.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "points": [{"point": "asyncio w=per-task", "model": "asyncio", "n": 1,
                        "wallSeconds": 0.06}]}  # fmt: skip


def one_pass(
    spec: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    runs: list[RunView] | None = None,
    at: float = 1,
) -> Any:
    """The decision, its status as written (a document)."""
    decided = decide(
        schedule(**(spec or {})), ScheduleStatus.read(old or {}), runs or [],
        lambda name: HistoryEntry.read(entry(name)), lambda name: None, generation=1,
        now=CREATED + timedelta(seconds=at),
    )  # fmt: skip
    return written(decided)


def written(decided: ScheduleDecision) -> Any:
    status = decided.status.document()
    ScheduleStatus.read(status)  # what is written has the typed shape
    return replace(decided, status=status)


def slot(seconds: int) -> datetime:
    return CREATED + timedelta(seconds=seconds)


def run(seconds: int, phase: str | None = None) -> RunView:
    return RunView(run_name("tick", slot(seconds)), phase, slot(seconds))


def test_nothing_before_the_first_slot_then_the_slot_named_after_its_time() -> None:
    assert one_pass(at=9).create is None
    decided = one_pass(at=10.4)
    assert decided.create == f"tick-{int(slot(10).timestamp())}"
    assert decided.status["lastScheduleTime"] == "2026-11-23T12:00:10Z"
    assert decided.status["startedRuns"] == 1
    assert decided.status["nextScheduleTime"] == "2026-11-23T12:00:20Z"


def test_a_pass_after_the_slot_was_recorded_starts_nothing_again() -> None:
    first = one_pass(at=10.4)
    again = one_pass(old=first.status, runs=[run(10)], at=11)
    assert again.create is None and again.status["startedRuns"] == 1


def test_a_restart_that_finds_the_slots_run_records_it_once_and_creates_nothing() -> None:
    # The pass that created tick-…10 died before writing the status: the status has no slot.
    decided = one_pass(runs=[run(10)], at=12)
    assert decided.create is None
    assert decided.status["startedRuns"] == 1 and "skippedRuns" not in decided.status


def test_forbid_skips_a_slot_while_a_run_goes_on_and_counts_it() -> None:
    old = {"lastScheduleTime": "2026-11-23T12:00:10Z", "startedRuns": 1}
    decided = one_pass(old=old, runs=[run(10, "Running")], at=20.5)
    assert decided.create is None and decided.status["skippedRuns"] == 1
    assert decided.status["lastScheduleTime"] == "2026-11-23T12:00:20Z"
    assert [e[1] for e in decided.events] == ["RunSkipped"]


def test_replace_stops_the_run_going_on_and_starts_the_slot() -> None:
    old = {"lastScheduleTime": "2026-11-23T12:00:10Z", "startedRuns": 1}
    decided = one_pass({"concurrencyPolicy": "Replace"}, old, [run(10, "Running")], at=20.5)
    assert decided.stop == [run(10).name] and decided.create == run(20).name
    assert decided.status["replacedRuns"] == 1 and decided.status["startedRuns"] == 2
    assert decided.status["active"] == [run(20).name]


def test_after_downtime_only_the_latest_slot_starts_and_the_rest_are_counted_missed() -> None:
    old = {"lastScheduleTime": "2026-11-23T12:00:10Z", "startedRuns": 1}
    decided = one_pass(old=old, runs=[run(10, "Succeeded")], at=65)
    assert decided.create == run(60).name
    assert decided.status["missedRuns"] == 4  # 20, 30, 40, 50
    assert "MissedRuns" in [e[1] for e in decided.events]


def test_past_the_starting_deadline_the_latest_slot_is_missed_too() -> None:
    old = {"lastScheduleTime": "2026-11-23T12:00:10Z", "startedRuns": 1}
    late = one_pass({"startingDeadlineSeconds": 3}, old, [run(10, "Succeeded")], at=65)
    assert late.create is None and late.status["missedRuns"] == 5
    in_time = one_pass({"startingDeadlineSeconds": 10}, old, [run(10, "Succeeded")], at=65)
    assert in_time.create == run(60).name and in_time.status["missedRuns"] == 4


def test_suspend_starts_nothing() -> None:
    assert one_pass({"suspend": True}, at=35).create is None


def test_a_finished_run_gets_one_history_entry_and_the_oldest_beyond_the_limit_goes() -> None:
    runs = [run(10, "Succeeded"), run(20, "Succeeded"), run(30, "Running")]
    old = {"lastScheduleTime": "2026-11-23T12:00:30Z", "startedRuns": 3,
           "history": [entry(run(10).name)]}  # fmt: skip
    decided = one_pass({"successfulRunsHistoryLimit": 1}, old, runs, at=31)
    assert [e["run"] for e in decided.status["history"]] == [run(10).name, run(20).name]
    assert decided.record == [run(20).name]
    assert decided.delete == [run(10).name]  # the running one never, whatever the limits
    assert decided.status["active"] == [run(30).name]
    again = one_pass({"successfulRunsHistoryLimit": 1}, decided.status, runs, at=32)
    assert again.record == [] and len(again.status["history"]) == 2


def test_a_run_is_deleted_only_once_its_entry_is_in_the_history() -> None:
    runs = [run(10, "Succeeded"), run(20, "Succeeded")]
    decided = decide(
        schedule(successfulRunsHistoryLimit=0),
        ScheduleStatus.read({"lastScheduleTime": "2026-11-23T12:00:20Z"}), runs,
        lambda name: None if name == run(20).name else HistoryEntry.read(entry(name)),
        lambda name: None, generation=1, now=slot(21),
    )  # fmt: skip
    assert decided.delete == [run(10).name]  # tick-…20 could not be read: kept for now


def test_history_keeps_at_most_its_limit_oldest_dropped() -> None:
    history = [entry(run(s).name) for s in (10, 20, 30)]
    old = {"lastScheduleTime": "2026-11-23T12:00:40Z", "history": history}
    decided = one_pass({"historyLimit": 3}, old, [run(40, "Succeeded")], at=41)
    assert [e["run"] for e in decided.status["history"]] == [run(s).name for s in (20, 30, 40)]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"schedule": "61 * * * *"}, "spec.schedule"),
        ({"schedule": "@every 2s"}, "spec.schedule"),
        ({"timeZone": "Mars/Olympus"}, "spec.timeZone"),
        ({"experimentTemplate": {"spec": {"workload": {"type": "sleep", "tasks": 1},
                                          "models": [{"model": "asyncio"}]}}},
         "spec.experimentTemplate.spec.workload"),
    ],
)  # fmt: skip
def test_bad_input_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as raised:
        schedule(**spec)
    assert any(p.startswith(field) for p in raised.value.problems), raised.value.problems


def plan(pods: int) -> CapacityPlan:
    """A schedule's run's plan of this many Pods of 1 CPU."""
    return CapacityPlan.read({
        "target": {"ratePerSecond": 100, "percentile": "p99", "latencySeconds": 0.25,
                   "cpuUtilization": 0.7},
        "rttSeconds": 0.05, "choice": "asyncio", "pods": pods, "cores": pods,
        "models": [{"variant": "asyncio", "model": "asyncio", "meets": True, "pods": pods}],
        "display": f"{pods} Pods x 1 CPU, asyncio", "message": f"asyncio: {pods} Pods",
    })  # fmt: skip


@pytest.mark.parametrize(("before", "after", "grew"), [(2, 3, True), (3, 3, False), (3, 2, False)])
def test_a_plan_needing_more_pods_than_the_run_before_is_a_plan_grew_event(
    before: int, after: int, grew: bool
) -> None:
    older, newer = run(10, "Succeeded"), run(20, "Succeeded")
    old = {"lastScheduleTime": "2026-11-23T12:00:20Z", "startedRuns": 2,
           "history": [entry(older.name) | {"plan": {"display": "x", "pods": before}}]}  # fmt: skip
    decided = written(decide(
        schedule(), ScheduleStatus.read(old), [older, newer],
        lambda name: HistoryEntry.read(entry(name)),
        lambda name: plan(after) if name == newer.name else None, generation=1, now=slot(21),
    ))  # fmt: skip
    scheduled = decided.status["capacityPlan"]
    assert (scheduled["pods"], scheduled["previousPods"]) == (after, before)
    assert scheduled["previousRun"] == older.name
    found = [e for e in decided.events if e[1] == "PlanGrew"]
    assert bool(found) == grew
    if grew:
        [(kind, _, message)] = found
        assert (
            kind == "Warning"
            and f"plans {after} Pods where {older.name} planned {before}" in message
        )


def _regressed_history() -> list[dict[str, Any]]:
    """Five steady runs of six points, then one where two points got slower in two metrics."""
    history = []
    for i in range(6):
        points = []
        for p in range(6):
            wall = 1.0 + 0.01 * ((i + p) % 3)
            if i == 5 and p < 2:
                wall *= 1.5 + p / 10
            points.append({"point": f"asyncio w={10 ** p}", "model": "asyncio", "n": 1,
                           "wallSeconds": wall, "throughputPerSecond": 100 / wall})  # fmt: skip
        slot = (CREATED + timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        history.append({"run": f"tick-{i}", "phase": "Succeeded", "scheduledTime": slot,
                        "points": points})  # fmt: skip
    return history


def test_a_regressed_run_raises_one_event_listing_its_findings_by_point() -> None:
    old = {"history": _regressed_history()}
    decided = decide(
        schedule(), ScheduleStatus.read(old), [], lambda name: None, lambda name: None,
        generation=1, now=CREATED + timedelta(hours=6),
    )  # fmt: skip
    [event] = [e for e in decided.events if e[1] == "Regressed"]
    kind, _, message = event
    assert kind == "Warning" and message.startswith("run tick-5: asyncio w=10: wallSeconds ")
    # grouped by point, the worst point first, each point once
    assert message.index("asyncio w=10: ") < message.index("; asyncio w=1: ")
    assert message.count("asyncio w=10: ") == 1 and message.count("throughputPerSecond") == 2
    assert "w=100:" not in message and message.endswith("(against 5 runs)")
    status = written(decided).status
    regression = status["regression"]
    # plain typed data, no Python repr
    assert regression["policy"] == {"minRelativeChange": 0.1, "significance": 0.01,
                                    "baselineRuns": 5}  # fmt: skip
    assert "checked" not in regression and regression["run"] == "tick-5"
    assert {(f["point"], f["metric"], f["scope"]) for f in regression["found"]} == {
        (p, m, "point") for p in ("asyncio w=1", "asyncio w=10")
        for m in ("wallSeconds", "throughputPerSecond")
    }  # fmt: skip
    again = decide(
        schedule(), ScheduleStatus.read(status), [], lambda name: None, lambda name: None,
        generation=1, now=CREATED + timedelta(hours=6, seconds=10),
    )  # fmt: skip
    assert [e for e in again.events if e[1] == "Regressed"] == [], "one event per run"


def test_a_regression_the_calibration_moved_with_blames_the_environment() -> None:
    history = _regressed_history()
    for i, entry in enumerate(history):
        loop = 0.13 if i == 5 else 0.100 + 0.001 * (i % 2)
        entry["environment"] = {"node": "node-b" if i == 5 else "node-a",
                                "calibration": {"cpuLoopSeconds": loop}}  # fmt: skip
    decided = decide(
        schedule(), ScheduleStatus.read({"history": history}), [], lambda name: None,
        lambda name: None, generation=1, now=CREATED + timedelta(hours=6),
    )  # fmt: skip
    [(_, _, message)] = [e for e in decided.events if e[1] == "Regressed"]
    assert message.startswith(
        "run tick-5 [environment: CPU loop 100 ms → 130 ms (+30.0 %); node node-a → node-b]: "
    ), message
    status = written(decided).status
    [condition] = [c for c in status["conditions"] if c["type"] == "Regressed"]
    assert (condition["status"], condition["reason"]) == ("True", "Environment")
    assert {f["cause"] for f in status["regression"]["found"]} == {"environment"}
    assert status["regression"]["environment"].startswith("environment: CPU loop")


def test_a_run_that_broke_an_objective_is_an_event_and_is_counted() -> None:
    broken = {"objectives": "Broken", "objectivesMessage": "p99: broken at 1 of 1 point(s)"}
    old = {"lastScheduleTime": "2026-11-23T12:00:10Z", "startedRuns": 1}
    decided = decide(
        schedule(), ScheduleStatus.read(old), [run(10, "Succeeded")],
        lambda name: HistoryEntry.read(entry(name) | broken), lambda name: None, generation=1,
        now=CREATED + timedelta(seconds=12),
    )  # fmt: skip
    status = written(decided).status
    assert status["failedObjectiveRuns"] == 1
    assert status["history"][0]["objectives"] == "Broken"
    assert ("Warning", "RunFailedObjectives", f"run {run(10).name}: p99: broken at 1 of 1 "
            "point(s)") in decided.events  # fmt: skip
    # a met run is neither
    met = decide(
        schedule(), ScheduleStatus.read(old), [run(10, "Succeeded")],
        lambda name: HistoryEntry.read(entry(name) | {"objectives": "Met"}), lambda name: None,
        generation=1, now=CREATED + timedelta(seconds=12),
    )  # fmt: skip
    assert "failedObjectiveRuns" not in written(met).status
    assert "RunFailedObjectives" not in [e[1] for e in met.events]
