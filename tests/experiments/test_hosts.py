"""isolation: process (pure): how many trial hosts an experiment keeps, which host runs which
trial, and what a lost host or an unread one means for its trial."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from helpers.pods import NOW, pod, run, spec

from cxlab.experiments.hosts import plan_hosts
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import PodView


def host(index: int, ready: bool = True, **fields: Any) -> PodView:
    base = PodView(
        name=f"x-host{index}", component="trial-host", trial=None, attempt=0,
        phase="Running" if ready else "Pending", reason=None, deleting=False,
        created=NOW - timedelta(seconds=30), ip=f"10.244.0.{20 + index}" if ready else None,
        node=f"node-{index}", ready=ready, exit_code=None, termination_reason=None,
        termination_message=None, unschedulable=None, container_started=ready,
        trials_listed=ready,
    )  # fmt: skip
    return replace(base, **fields)


def hosted(trial: str, on: int, attempt: int = 1, **fields: Any) -> PodView:
    return pod(trial, attempt, host=f"x-host{on}", **fields)


def test_a_new_experiment_makes_its_hosts_and_starts_nothing_until_one_is_ready() -> None:
    s = spec(isolation="process", parallelism=2)
    decision = run(s, [])
    assert decision.hosts_create == [0, 1] and decision.create == [] and decision.hosted == {}
    # made, not Ready yet: none made again, nothing started
    starting = run(s, [host(0, ready=False), host(1, ready=False)])
    assert starting.hosts_create == [] and starting.create == [] and starting.delete == []


def test_each_ready_idle_host_takes_the_next_trial() -> None:
    s = spec(isolation="process", parallelism=2)
    first, second, _ = plan_trials(s)
    decision = run(s, [host(0), host(1, ready=False)])
    assert decision.create == [(first, 1, 0)] and decision.hosted == {first.name: "x-host0"}
    busy = run(s, [host(0), host(1), hosted(first.name, on=0)], attempts={first.name: 1})
    assert busy.create == [(second, 1, 0)] and busy.hosted == {second.name: "x-host1"}


def test_a_trial_that_ended_is_recorded_let_go_and_its_host_takes_the_next(
    result_text: str,
) -> None:
    s = spec(isolation="process")
    first, second, _ = plan_trials(s)
    done = hosted(first.name, on=0, phase="Succeeded", exit_code=0,
                  termination_message=result_text)  # fmt: skip
    decision = run(s, [host(0), done], attempts={first.name: 1})
    assert [e["name"] for e in decision.finished] == [first.name]
    assert done.name in decision.delete and "x-host0" not in decision.delete
    assert decision.create == [(second, 1, 0)] and decision.hosted == {second.name: "x-host0"}


def test_hosts_go_as_trials_run_out_and_all_go_at_the_end(result_text: str) -> None:
    s = spec(isolation="process", parallelism=3)
    first, second, third = plan_trials(s)

    def entry(t: Any) -> dict[str, Any]:
        return {"name": t.name, "model": t.model, "workers": t.workers, "repetition": 1,
                "phase": "Failed", "attempts": 1, "message": "x"}  # fmt: skip

    # one trial left and running: the two idle hosts go, the busy one stays
    left = run(s, [host(0), host(1), host(2), hosted(third.name, on=1)],
               recorded={first.name: entry(first), second.name: entry(second)},
               attempts={third.name: 1})  # fmt: skip
    assert sorted(left.delete) == ["x-host0", "x-host2"] and left.hosts_create == []
    everything = {t.name: entry(t) for t in (first, second, third)}
    ended = run(s, [host(1)], recorded=everything)
    assert ended.delete == ["x-host1"] and ended.hosts_create == [] and ended.create == []


def test_a_lost_host_is_replaced_and_its_trial_is_a_lost_attempt() -> None:
    s = spec(isolation="process")
    first, _, _ = plan_trials(s)
    # the host failed (its node went, say): its trial's view went with it
    lost = host(0, phase="Failed", reason="Evicted")
    decision = run(s, [lost], attempts={first.name: 1})
    assert "x-host0" in decision.delete and decision.hosts_create == [1]
    assert decision.attempts[first.name] == 1 and decision.create == []  # no host ready yet
    again = run(s, [replace(lost, deleting=True), host(1)], attempts={first.name: 1})
    assert again.create == [(first, 2, 0)] and again.hosted == {first.name: "x-host1"}


def test_a_lost_host_counts_toward_max_attempts() -> None:
    s = spec(isolation="process")
    first, _, _ = plan_trials(s)
    decision = run(s, [host(1)], attempts={first.name: 3})
    [entry] = decision.finished
    assert entry["name"] == first.name and entry["phase"] == "Failed"
    assert "gave up after 3 attempts" in entry["message"]


def test_a_trial_not_seen_waits_while_a_host_has_not_been_read() -> None:
    """After a restart of the operator the hosts' trials come with their first answer: a
    trial counted in status is not started again before that (it may have ended there)."""
    s = spec(isolation="process")
    first, _, _ = plan_trials(s)
    unread = run(s, [host(0, trials_listed=False)], attempts={first.name: 1})
    assert unread.create == [] and unread.attempts[first.name] == 1
    assert unread.hosts_create == []
    read = run(s, [host(0)], attempts={first.name: 1})
    assert read.create == [(first, 2, 0)]


@pytest.mark.parametrize(
    ("pods", "busy", "pending", "wanted", "create", "delete", "assign"),
    [
        # nothing yet: make as many as wanted
        ([], set(), ["a", "b"], 2, [0, 1], [], {}),
        # an index in use (a host still going) is not used again
        ([host(0, deleting=True, phase="Running")], set(), ["a"], 1, [1], [], {}),
        # idle beyond wanted: one not Ready goes before a Ready one
        ([host(0), host(1, ready=False)], set(), [], 1, [], ["x-host1"], {}),
        # busy hosts stay even beyond wanted; a Ready idle one takes the first pending trial
        ([host(0), host(1)], {"x-host0"}, ["a", "b"], 2, [], [], {"a": "x-host1"}),
        # a host that ended goes, and another takes its place
        ([host(0, phase="Succeeded")], set(), ["a"], 1, [1], ["x-host0"], {}),
    ],
)
def test_plan_hosts(
    pods: list[PodView],
    busy: set[str],
    pending: list[str],
    wanted: int,
    create: list[int],
    delete: list[str],
    assign: dict[str, str],
) -> None:
    plan = plan_hosts(pods, busy, pending, wanted)
    assert (plan.create, plan.delete, plan.assign) == (create, delete, assign)


def test_a_host_whose_image_cannot_start_fails_the_experiment() -> None:
    s = spec(isolation="process")
    stuck = host(0, ready=False, waiting_reason="InvalidImageName", waiting_message="bad")
    decision = run(s, [stuck])
    assert decision.failure and "trial host x-host0" in decision.failure
    assert len(decision.finished) == 3


def test_an_unschedulable_host_fails_the_experiment_only_while_no_host_is_placed() -> None:
    s = spec(isolation="process", parallelism=2)
    why = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    waiting = host(1, ready=False, node=None, created=NOW - timedelta(seconds=60),
                   unschedulable=why)  # fmt: skip
    alone = run(s, [waiting], capacity_exists=False)
    assert alone.failure and "trial host x-host1" in alone.failure
    beside = run(s, [host(0), waiting], capacity_exists=False)
    assert beside.failure is None


def test_the_queue_counts_a_hosts_room_once() -> None:
    """A trial host holds its slot's room; the trial it runs is on the same node, in it."""
    from cxlab.controller.handlers import _holds_room

    assert _holds_room(host(0)) and _holds_room(pod("t"))
    assert not _holds_room(hosted("t", on=0))


def test_a_host_takes_its_first_trial_once_it_answers_not_at_its_readiness_probe() -> None:
    """Its readiness probe turns it Ready up to a period late; its first trial goes as soon
    as it answers the operator (the trial waits in it for its fork server, if need be)."""
    s = spec(isolation="process")
    first, _, _ = plan_trials(s)
    answering = host(0, ready=False, ip="10.244.0.20", phase="Running", trials_listed=True)
    assert run(s, [answering]).create == [(first, 1, 0)]
    silent = host(0, trials_listed=False)  # Ready, not read yet
    assert run(s, [silent]).create == []
