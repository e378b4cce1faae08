"""The reconciler's decisions from status + Pods (pure): start, record, retry, give up."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from helpers.pods import CONFIG, NOW, pod, run, spec

from cxlab.config import OperatorConfig
from cxlab.experiments.deadline import next_deadline
from cxlab.experiments.decide import Observed, Refusal, decide
from cxlab.experiments.plan import calibration_trials, plan_trials
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import Phase, TrialEntry


def test_a_new_experiment_starts_parallelism_trials() -> None:
    s = spec(parallelism=2)
    decision = run(s, [])
    trials = plan_trials(s)
    assert decision.create == [(trials[0], 1, 0), (trials[1], 1, 0)]
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
    assert decision.create == [(second, 1, 0)]
    assert first.name not in decision.attempts
    # its Pod goes in this pass, after the status that records its Result is written
    assert decision.delete == [f"x-{first.name}-a1"]
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
    assert decision.create == [(first, 2, 0)]
    deleted = pod(first.name, deleting=True)
    assert run(s, [deleted], attempts={first.name: 1}).create == []  # one at a time: wait
    killed = pod(first.name, phase="Failed", exit_code=143, deleting=True)  # SIGTERM on delete
    decision = run(s, [killed], attempts={first.name: 1})
    assert decision.finished == [] and decision.create == [(first, 2, 0)]
    assert run(s, [], attempts={first.name: 1}).create == [(first, 2, 0)]  # vanished: retry


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
    recorded = {first.name: {"name": first.name, "model": "threads", "workers": 1,
                             "repetition": 1, "phase": "Failed"}}  # fmt: skip
    assert run(s, [failed], recorded=recorded).delete == []
    assert run(s, [failed], attempts={first.name: 1}).delete == []  # the pass recording it
    assert run(spec(), [failed], attempts={first.name: 1}).delete == [failed.name]


# A trial of several Pods: one attempt of all of them, released together at the barrier.


def three_pods() -> ExperimentSpec:
    return spec(models=[{"model": "asyncio", "workers": [2], "pods": [3]}])


def member(trial: str, index: int, attempt: int = 1, **fields: Any) -> PodView:
    return pod(trial, attempt, name=f"x-{trial}-a{attempt}-p{index}", pod=index, **fields)


def test_a_trial_of_three_pods_creates_all_three_in_one_attempt() -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    decision = run(s, [])
    assert decision.create == [(trial, 1, 0), (trial, 1, 1), (trial, 1, 2)]
    assert decision.attempts == {trial.name: 1}


def test_the_barrier_releases_only_once_every_pod_is_ready() -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    # At the barrier a runner's container has started (its startup probe, /ready); the Pods
    # are not Ready (their readiness probe, /done, says the tasks have not ended).
    at_barrier = [member(trial.name, i, ready=False) for i in range(3)]
    waiting = [*at_barrier[:2], replace(at_barrier[2], container_started=False)]
    decision = run(s, waiting, attempts={trial.name: 1})
    assert decision.release == [] and decision.finished == [] and decision.create == []
    decision = run(s, at_barrier, attempts={trial.name: 1})
    assert decision.release == [(trial, at_barrier)]
    assert len({t.name for t, _ in decision.running}) == 1  # one trial, three Pods


def test_a_pod_never_ready_fails_the_trial_after_the_barrier_timeout() -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    late = NOW - timedelta(seconds=121)
    stuck = member(
        trial.name, 2, container_started=False, phase="Pending", created=late,
        unschedulable="0/1 nodes are available: 1 Insufficient cpu.",
    )  # fmt: skip
    pods = [member(trial.name, 0, created=late), member(trial.name, 1, created=late), stuck]
    decision = run(s, pods, attempts={trial.name: 1})
    [entry] = decision.finished
    assert entry["phase"] == "Failed" and decision.release == []
    assert "start barrier within 120s" in entry["message"]
    assert "Pod 2 Pending (0/1 nodes are available: 1 Insufficient cpu.)" in entry["message"]
    assert sorted(decision.delete) == sorted(p.name for p in pods)
    in_time = [replace(p, created=NOW - timedelta(seconds=60)) for p in pods]
    assert run(s, in_time, attempts={trial.name: 1}).finished == []


def test_a_released_trial_running_past_the_barrier_timeout_goes_on() -> None:
    """Its Pods are not Ready while their tasks run (the readiness probe is /done): the
    barrier looks at the containers' start (the startup probe), which stays."""
    s = three_pods()
    [trial] = plan_trials(s)
    long_ago = NOW - timedelta(seconds=600)
    running = [member(trial.name, i, ready=False, created=long_ago) for i in range(3)]
    decision = run(s, running, attempts={trial.name: 1})
    assert decision.finished == [] and decision.delete == []


def test_a_pod_deleted_before_the_barrier_loses_the_attempt_and_it_is_retried() -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    deleted = member(trial.name, 1, deleting=True, container_started=False)
    pods = [member(trial.name, 0), deleted, member(trial.name, 2)]
    decision = run(s, pods, attempts={trial.name: 1})
    assert decision.finished == [] and decision.release == [] and decision.create == []
    assert sorted(decision.delete) == sorted([pods[0].name, pods[2].name])  # its siblings go
    gone = run(s, [], attempts={trial.name: 1})  # once they are all gone: all three again
    assert gone.create == [(trial, 2, 0), (trial, 2, 1), (trial, 2, 2)]


def test_a_pod_created_before_a_crash_gets_its_siblings_in_the_same_attempt() -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    decision = run(s, [member(trial.name, 0)], attempts={trial.name: 1})
    assert decision.create == [(trial, 1, 1), (trial, 1, 2)]


def test_a_failed_pod_fails_the_trial_naming_it() -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    failed = member(
        trial.name, 1, phase="Failed", exit_code=3, container_started=False,
        termination_message="cxlab-runner: not released from the start barrier within 120s",
    )  # fmt: skip
    decision = run(s, [member(trial.name, 0), failed, member(trial.name, 2)])
    [entry] = decision.finished
    assert entry["message"] == (
        "Pod 1: runner exited 3: cxlab-runner: not released from the start barrier within 120s"
    )


def test_three_succeeded_pods_are_one_merged_result(result_text: str) -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    results = [json.loads(result_text) | {"podIndex": i} for i in range(3)]
    done = [
        member(trial.name, i, phase="Succeeded", exit_code=0, node=f"node-{i}",
               termination_message=json.dumps(results[i]))
        for i in range(3)
    ]  # fmt: skip
    [entry] = run(s, done, attempts={trial.name: 1}).finished
    assert entry["phase"] == "Succeeded" and entry["pods"] == 3
    assert entry["result"]["pods"] == 3 and entry["result"]["tasksOk"] == 15
    assert entry["podResults"] == results
    assert entry["nodes"] == ["node-0", "node-1", "node-2"]


def test_a_distributed_locust_trial_starts_its_master_then_its_workers() -> None:
    s = spec(
        workload={"type": "http", "tasks": 20, "rtt": "10ms"},
        models=[{"model": "locust", "workers": [5], "pods": [2]}],
    )
    [trial] = plan_trials(s)
    assert run(s, []).create == [(trial, 1, 2)]  # the master (after workers 0 and 1) alone
    starting = member(trial.name, 2, ip=None, phase="Pending", container_started=False)
    waiting = run(s, [starting], attempts={trial.name: 1})
    assert waiting.create == [] and waiting.locust_masters == {}
    master = member(trial.name, 2, ip="10.244.0.7", container_started=False)
    decision = run(s, [master], attempts={trial.name: 1})
    assert decision.create == [(trial, 1, 0), (trial, 1, 1)]
    assert decision.locust_masters == {trial.name: "10.244.0.7:5557"}
    running = [master, member(trial.name, 0), member(trial.name, 1)]
    assert run(s, running, attempts={trial.name: 1}).release == []  # its master starts them


# When the clock alone would change a decision: the reconcile loop sleeps until then.


def test_the_next_deadline_is_the_earliest_grace_or_barrier_of_a_starting_pod() -> None:
    s = three_pods()
    [trial] = plan_trials(s)
    created = NOW - timedelta(seconds=10)
    pulling = member(trial.name, 0, phase="Pending", ready=False, created=created,
                     waiting_reason="ImagePullBackOff")  # fmt: skip
    unplaced = member(trial.name, 1, phase="Pending", ready=False, created=created,
                      unschedulable="0/1 nodes are available: 1 Insufficient cpu.")  # fmt: skip
    ready = member(trial.name, 2, created=created)
    config = OperatorConfig(unschedulable_grace_seconds=15, image_pull_grace_seconds=90,
                            barrier_timeout="60s")  # fmt: skip
    decision = run(s, [pulling, unplaced, ready], attempts={trial.name: 1})
    deadline = next_deadline(decision, [pulling, unplaced, ready], config)
    assert deadline == created + timedelta(seconds=15)  # the unschedulable grace comes first
    pull_first = replace(config, image_pull_grace_seconds=5)
    assert next_deadline(decision, [pulling, unplaced, ready], pull_first) == created + timedelta(
        seconds=5
    )
    placed = [replace(unplaced, unschedulable=None), pulling, ready]
    decision = run(s, placed, attempts={trial.name: 1})
    assert next_deadline(decision, placed, config) == created + timedelta(seconds=60)  # barrier


def test_running_or_waiting_for_nothing_has_no_deadline() -> None:
    s = spec()
    trials = plan_trials(s)
    running = [pod(trials[0].name)]
    assert next_deadline(run(s, running, attempts={trials[0].name: 1}), running, CONFIG) is None
    assert next_deadline(run(s, []), [], CONFIG) is None  # creates a Pod: its events follow


def test_a_trial_abort_on_fail_skips_is_recorded_skipped_not_started() -> None:
    s = spec(parallelism=2)
    first, second, third = plan_trials(s)
    observed = Observed(
        spec=s, trials=plan_trials(s), recorded={}, attempts={first.name: 1},
        pods=[pod(first.name)], now=NOW,
        skipped={first.name: "objective x broken at ...", third.name: "objective x broken at y"},
    )  # fmt: skip
    decision = decide(observed, CONFIG)
    # the running trial runs on; the one not started is recorded skipped, its slot to the next
    [entry] = [e.document() for e in decision.finished]
    assert (entry["name"], entry["phase"], entry["message"]) == (
        third.name, "Skipped", "objective x broken at y",
    )  # fmt: skip
    assert [t for t, _ in decision.running] == [first]
    assert decision.create == [(second, 1, 0)]


def test_with_abort_on_fail_no_trial_starts_in_the_pass_that_records_one(result_text: str) -> None:
    # the outcome recorded now may make the next trial pointless: it starts in the next pass,
    # which decides from the status that records it
    s = spec(objectives=[{"latency": {"max": "1s"}, "abortOnFail": True}])
    first, second, _ = plan_trials(s)
    done = pod(first.name, phase="Succeeded", exit_code=0, termination_message=result_text)
    decision = run(s, [done], attempts={first.name: 1})
    assert [e["name"] for e in decision.finished] == [first.name] and decision.create == []
    recorded = {first.name: decision.finished[0]}
    assert run(s, [], recorded=recorded).create == [(second, 1, 0)]


# --- what follows a decision: planned once, by decide, from the full entries ---------------


def observed_ending(s: ExperimentSpec, result_text: str, **fields: Any) -> Observed:
    """The first trials recorded as a cluster's status keeps them (compact: their Results in
    a ConfigMap), the last one's Pod just succeeded."""
    *before, last = plan_trials(s)
    compact = {t.name: TrialEntry(name=t.name, model=t.model, workers=t.workers, repetition=1,
                                  phase=Phase.SUCCEEDED, pinned=True, results_in="x-results-0")
               for t in before}  # fmt: skip
    done = pod(last.name, phase="Succeeded", exit_code=0, termination_message=result_text)
    return Observed(spec=s, trials=plan_trials(s), recorded=compact,
                    attempts={last.name: 1}, pods=[done], now=NOW, **fields)  # fmt: skip


def test_while_trials_are_left_the_decision_hands_on_the_trials_observed() -> None:
    s = spec(calibration=True)
    decision = decide(Observed(s, plan_trials(s), {}, {}, [], NOW), CONFIG)
    assert not decision.needs_full and decision.planned is not None
    assert decision.planned.trials == plan_trials(s) and not decision.planned.followed


def test_the_decision_that_ends_the_sweep_asks_for_the_results_then_plans_what_follows(
    result_text: str,
) -> None:
    """What follows the sweep (here the calibration) is planned from the Results, which a
    cluster keeps out of status: without them decide asks for them instead of planning
    from compact entries, and with them plans it once, for the record step to write."""
    s = spec(calibration=True)
    observed = observed_ending(s, result_text)
    asked = decide(observed, CONFIG)
    assert asked.needs_full and asked.planned is None
    assert [e.name for e in asked.finished] == [plan_trials(s)[-1].name]  # decided all the same
    full = {n: e.model_copy(update={"results_in": None, "result": json.loads(result_text)})
            for n, e in observed.recorded.items()}  # fmt: skip
    decision = decide(replace(observed, full=full), CONFIG)
    assert not decision.needs_full and decision.planned is not None
    planned = decision.planned
    [cpu, _] = calibration_trials(len(plan_trials(s)))
    assert planned.followed and planned.trials == [*plan_trials(s), cpu]
    assert [e.name for e in planned.entries] == [t.name for t in plan_trials(s)]
    assert all(e.result is not None for e in planned.entries)  # the summary's: full entries


def test_a_refused_pod_is_a_fact_the_next_decision_ends_the_experiment_on(
    result_text: str,
) -> None:
    """The pass after a refused create decides on it: a trial whose Pod ended meanwhile is
    recorded as it ended, every other fails with the apiserver's words, and the Pods created
    with the refused one go."""
    s = spec(parallelism=3)
    first, second, third = plan_trials(s)
    done = pod(first.name, phase="Succeeded", exit_code=0, termination_message=result_text)
    refusal = Refusal(f"x-{third.name}-a1", 422, "Invalid", "spec.nodeSelector: Invalid value",
                      created=(f"x-{second.name}-a1",))  # fmt: skip
    observed = Observed(s, plan_trials(s), {}, dict.fromkeys([first.name, second.name,
                        third.name], 1), [done], NOW, refused=refusal)  # fmt: skip
    decision = decide(observed, CONFIG)
    phases = {e.name: e.phase for e in decision.finished}
    assert phases == {first.name: "Succeeded", second.name: "Failed", third.name: "Failed"}
    assert decision.failure_reason == "PodRejected"
    assert decision.failure and "spec.placement.nodeSelector" in decision.failure
    assert decision.create == [] and decision.attempts == {}
    assert decision.delete == [done.name, f"x-{second.name}-a1"]
    assert decide(replace(observed, refused=None), CONFIG).failure is None  # the fact decides
