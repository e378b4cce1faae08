"""The queue for capacity on the real local cluster (one node, one exclusive core for trials):
experiments applied together wait their turn instead of failing, in creation order, with no
Pods while they wait; the wait is recorded; queueTimeout bounds it; a kill -9 of the operator
while they wait loses nobody's place and runs no trial twice."""

from __future__ import annotations

import time

import pytest
from helpers.cluster import Lab, Operator
from helpers.queue import (
    assert_ran_one_after_another,
    condition,
    short,
    status,
)


def queued(lab: Lab, name: str) -> bool:
    return bool(status(lab.get(name)).get("queue"))


def test_experiments_applied_together_run_one_after_another_in_creation_order(lab: Lab) -> None:
    names = ["qa", "qb", "qc"]  # same second: creation order, then the name, decides
    for name in names:
        lab.apply(name, short())
    lab.wait("qc", lambda e: bool(status(e).get("queue")), timeout=30)
    lab.wait("qa", lambda _: lab.running_pod("qa"), timeout=60)
    # qa is admitted; the next pass of each of the others sees it, and so moves it up
    lab.wait("qb", lambda e: status(e).get("queue", {}).get("position") == 1, timeout=10)
    lab.wait("qc", lambda e: status(e).get("queue", {}).get("position") == 2, timeout=10)
    waiting_b, waiting_c = status(lab.get("qb")), status(lab.get("qc"))
    assert waiting_b["phase"] == waiting_c["phase"] == "Pending"
    assert (waiting_b["queue"]["position"], waiting_c["queue"]["position"]) == (1, 2)
    assert waiting_c["queue"]["behind"] == f"{lab.namespace}/qb"
    assert waiting_b["progress"]["display"] == "queued 1/2"  # kubectl get cx: PROGRESS
    assert "startTime" not in waiting_b
    assert not lab.pods("qb") and not lab.pods("qc")  # no Pods while waiting
    assert condition(lab.get("qb"), "Queued")["status"] == "True"
    done = assert_ran_one_after_another(lab, names)
    waits = [status(e)["queuedSeconds"] for e in done]
    print(f"\nqueuedSeconds of {names}: {waits}")  # the figures for a closing note
    assert waits[0] < waits[1] < waits[2], waits
    for experiment in done[1:]:
        admitted = condition(experiment, "Queued")
        assert admitted["status"] == "False" and admitted["reason"] == "Admitted", admitted
        reasons = [
            e.reason for e in lab.events(experiment["metadata"]["name"], "Queued", "Started")
        ]
        assert "Queued" in reasons and "Started" in reasons


def test_queue_timeout_fails_a_waiting_experiment_with_that_reason(lab: Lab) -> None:
    lab.apply("holder", short(30))
    lab.wait("holder", lambda _: lab.running_pod("holder"), timeout=60)
    lab.apply("impatient", {**short(), "queueTimeout": "4s"})
    failed = lab.wait_finished("impatient", timeout=60)
    reason = condition(failed, "Failed")
    assert reason["reason"] == "QueueTimeout" and "spec.queueTimeout (4s)" in reason["message"]
    assert "in use by" in reason["message"] and not lab.pods("impatient")
    assert status(lab.get("holder"))["phase"] == "Running"  # the one holding the core goes on
    lab.delete("holder")


@pytest.mark.long
def test_a_kill_9_while_experiments_wait_loses_no_place_and_runs_nothing_twice(
    lab: Lab, operator: Operator
) -> None:
    names = ["ka", "kb", "kc"]
    for name in names:
        lab.apply(name, short(4))
    lab.wait("kc", lambda e: bool(status(e).get("queue")), timeout=30)
    lab.wait("ka", lambda _: lab.running_pod("ka"), timeout=60)
    operator.kill()
    time.sleep(2)
    operator.start()
    assert_ran_one_after_another(lab, names)
