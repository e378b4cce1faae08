"""The reconciler's decisions from status + Pods (pure): start, record, retry, give up."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import run_runner
from test_spec import document

from cxlab.controller.config import OperatorConfig
from cxlab.controller.decide import decide
from cxlab.controller.observe import PodView
from cxlab.plan import plan_trials
from cxlab.spec import ExperimentSpec, parse_experiment

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CONFIG = OperatorConfig(max_attempts=3, unschedulable_grace_seconds=15)


@pytest.fixture(scope="module")
def result_text() -> str:
    """A real Result, as a trial Pod's termination message carries it."""
    return json.dumps(run_runner("asyncio", "--workload", "sleep", "--tasks", "5", "--rtt", "1ms"))


def spec(**change: Any) -> ExperimentSpec:
    base = {"models": [{"model": "threads", "workers": [1, 2, 4]}]}
    return parse_experiment(document(**(base | change))).spec


def pod(trial: str, attempt: int = 1, phase: str = "Running", **fields: Any) -> PodView:
    base = PodView(
        name=f"x-{trial}-a{attempt}", component="trial", trial=trial, attempt=attempt,
        phase=phase, reason=None, deleting=False, created=NOW - timedelta(seconds=30),
        ip="10.244.0.9", node="node-1", ready=phase == "Running", exit_code=None,
        termination_reason=None, termination_message=None, unschedulable=None,
    )  # fmt: skip
    return replace(base, **fields)


def run(s: ExperimentSpec, pods: list[PodView], recorded: dict[str, Any] | None = None,
        attempts: dict[str, int] | None = None, target_ready: bool = True,
        capacity_exists: bool = True) -> Any:  # fmt: skip
    return decide(
        spec=s, trials=plan_trials(s), recorded=recorded or {}, attempts=attempts or {},
        pods=pods, target_ready=target_ready, now=NOW, config=CONFIG,
        capacity_exists=capacity_exists,
    )  # fmt: skip


def test_a_new_experiment_starts_parallelism_trials() -> None:
    s = spec(parallelism=2)
    decision = run(s, [])
    trials = plan_trials(s)
    assert decision.create == [(trials[0], 1), (trials[1], 1)]
    assert decision.attempts == {trials[0].name: 1, trials[1].name: 1, trials[2].name: 0}


def test_the_next_trial_starts_when_one_ends(result_text: str) -> None:
    s = spec()
    first, second, _ = plan_trials(s)
    running = run(s, [pod(first.name)], attempts={first.name: 1})
    assert running.create == [] and [t for t, _ in running.running] == [first]
    done = pod(first.name, phase="Succeeded", exit_code=0, termination_message=result_text)
    decision = run(s, [done], attempts={first.name: 1})
    [entry] = decision.finished
    assert entry["name"] == first.name and entry["phase"] == "Succeeded"
    assert entry["result"]["tasksOk"] == 5 and entry["attempts"] == 1 and entry["node"] == "node-1"
    assert decision.create == [(second, 1)]
    assert first.name not in decision.attempts
    assert decision.delete == []  # the Pod goes only once its Result is in status: next pass
    recorded = {first.name: entry}
    assert run(s, [done], recorded=recorded).delete == [done.name]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"exit_code": 1, "termination_message": "Traceback\nValueError: boom\n"},
         "runner exited 1: ValueError: boom"),
        ({"exit_code": 137, "termination_reason": "OOMKilled"},
         "OOMKilled: the trial needed more memory than resources.memory (512Mi); raise it"),
        ({"reason": "DeadlineExceeded"}, "timed out after trialTimeout 15m and was stopped"),
    ],
)  # fmt: skip
def test_a_failed_trial_says_why(fields: dict[str, Any], message: str) -> None:
    s = spec()
    first = plan_trials(s)[0]
    [entry] = run(s, [pod(first.name, phase="Failed", **fields)], attempts={first.name: 1}).finished
    assert entry["phase"] == "Failed" and entry["message"] == message


def test_garbage_in_the_termination_message_fails_the_trial() -> None:
    s = spec()
    first = plan_trials(s)[0]
    done = pod(first.name, phase="Succeeded", exit_code=0, termination_message="{not json")
    [entry] = run(s, [done], attempts={first.name: 1}).finished
    assert entry["message"].startswith("no valid Result in the termination message")


def test_a_lost_pod_is_retried_with_the_next_attempt() -> None:
    s = spec()
    first = plan_trials(s)[0]
    evicted = pod(first.name, phase="Failed", reason="Evicted")
    decision = run(s, [evicted], attempts={first.name: 1})
    assert decision.finished == [] and decision.delete == [evicted.name]
    assert decision.create == [(first, 2)]
    deleted = pod(first.name, deleting=True)
    assert run(s, [deleted], attempts={first.name: 1}).create == []  # one at a time: wait
    killed = pod(first.name, phase="Failed", exit_code=143, deleting=True)  # SIGTERM on delete
    decision = run(s, [killed], attempts={first.name: 1})
    assert decision.finished == [] and decision.create == [(first, 2)]
    assert run(s, [], attempts={first.name: 1}).create == [(first, 2)]  # vanished: retry


def test_a_trial_lost_too_often_fails() -> None:
    s = spec()
    first = plan_trials(s)[0]
    evicted = pod(first.name, attempt=3, phase="Failed", reason="Evicted")
    [entry] = run(s, [evicted], attempts={first.name: 3}).finished
    assert entry["message"] == "lost 3 times (Evicted); gave up after 3 attempts"


BUSY = (
    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
    "1 No preemption victims found for incoming pod."
)
ELSEWHERE = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def test_unschedulable_with_nothing_running_fails_the_experiment() -> None:
    s = spec()
    first = plan_trials(s)[0]
    stuck = pod(first.name, phase="Pending", ip=None, unschedulable=ELSEWHERE)
    decision = run(s, [stuck], attempts={first.name: 1})
    assert decision.failure and "didn't match" in decision.failure
    assert decision.failure_reason == "Unschedulable"
    assert [e["phase"] for e in decision.finished] == ["Failed"] * 3
    assert decision.delete == [stuck.name] and decision.create == []
    young = replace(stuck, created=NOW - timedelta(seconds=2))
    assert run(s, [young], attempts={first.name: 1}).failure is None  # still within grace


def test_no_room_where_a_trial_could_fit_is_busy_not_impossible() -> None:
    # Another experiment (or any Pod) holds the node: the trial waits for the scheduler.
    s = spec()
    first = plan_trials(s)[0]
    stuck = pod(first.name, phase="Pending", ip=None, unschedulable=BUSY)
    assert run(s, [stuck], attempts={first.name: 1}).failure is None
    # ... unless no node could hold it even empty (the queue fails that before any Pod).
    assert run(s, [stuck], attempts={first.name: 1}, capacity_exists=False).failure


def test_unschedulable_while_a_sibling_runs_just_waits() -> None:
    s = spec(parallelism=2)
    first, second, _ = plan_trials(s)
    pods = [pod(first.name), pod(second.name, phase="Pending", unschedulable="Insufficient cpu")]
    decision = run(s, pods, attempts={first.name: 1, second.name: 1})
    assert decision.failure is None and decision.create == []


def test_http_trials_wait_for_the_delay_target() -> None:
    s = spec(workload={"type": "http", "tasks": 5, "rtt": "10ms"})
    decision = run(s, [], target_ready=False)
    assert decision.waiting_for_target and decision.create == []
    assert run(s, [], target_ready=True).create


def test_failed_pods_are_kept_when_asked() -> None:
    s = spec(keepPodsOnFailure=True)
    first = plan_trials(s)[0]
    failed = pod(first.name, phase="Failed", exit_code=1)
    recorded = {first.name: {"name": first.name, "phase": "Failed"}}
    assert run(s, [failed], recorded=recorded).delete == []
