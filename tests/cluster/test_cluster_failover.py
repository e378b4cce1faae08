"""Two operator replicas, one active through a Lease (`--leader-elect`): the standby takes
over when the active one is killed, and every trial is still recorded exactly once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from helpers.cluster import SHARED_POOL, Lab, Operator, experiment_spec

pytestmark = pytest.mark.cluster

LEASE_SECONDS = 6  # short for the test; the chart's default is 15


@pytest.fixture
def replicas(lab: Lab, operator: Operator) -> Iterator[list[Operator]]:
    """The session's operator stands aside (it takes no Lease); two replicas take turns."""
    operator.stop()
    args = ("--leader-elect", "--lease-namespace", lab.namespace,
            "--lease-duration", str(LEASE_SECONDS))  # fmt: skip
    pair = [Operator(args, log=f"operator-replica-{i}", metrics_port=18090 + i) for i in (0, 1)]
    try:
        for replica in pair:
            replica.start()
        yield pair
    finally:
        for replica in pair:
            replica.stop()
        operator.start()


def eventually(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def holder(lab: Lab) -> str | None:
    api = kubernetes.client.CoordinationV1Api()
    try:
        lease = api.read_namespaced_lease("cxlab-operator", lab.namespace)
    except kubernetes.client.exceptions.ApiException:
        return None
    return str(lease.spec.holder_identity or "") or None


@pytest.mark.long
def test_the_standby_takes_over_from_a_killed_leader_and_no_trial_runs_twice(
    lab: Lab, replicas: list[Operator]
) -> None:
    eventually(lambda: holder(lab) is not None, 30, "a replica takes the Lease")
    leading = holder(lab)
    assert leading is not None
    active = next(r for r in replicas if r.process and leading.endswith(f"-{r.process.pid}"))
    standby = next(r for r in replicas if r is not active)
    workload = {"type": "sleep", "tasks": 4, "rtt": "1s"}
    lab.apply("failover", experiment_spec([{"model": "asyncio", "workers": [1, 2, 4]}], workload,
                                          repetitions=2, **SHARED_POOL))  # fmt: skip

    def done(experiment: dict[str, Any]) -> int:
        return int((experiment.get("status") or {}).get("progress", {}).get("trialsDone", 0))

    lab.wait("failover", lambda e: done(e) >= 2, timeout=120)
    before = done(lab.get("failover"))
    killed = time.monotonic()
    active.kill()
    eventually(lambda: holder(lab) not in (None, leading), LEASE_SECONDS * 4, "the standby leads")
    took_lease = time.monotonic() - killed
    lab.wait("failover", lambda e: done(e) > before, timeout=120)
    resumed = time.monotonic() - killed
    assert standby.process is not None and standby.process.poll() is None
    status = lab.wait_finished("failover", timeout=240)["status"]
    assert status["phase"] == "Succeeded"
    names = [e["name"] for e in status["trials"]]
    assert len(names) == len(set(names)) == 6
    assert all(e["attempts"] == 1 for e in status["trials"]), status["trials"]
    print(f"\nfailover: Lease taken {took_lease:.1f} s after kill -9 (lease {LEASE_SECONDS} s), "
          f"next trial recorded {resumed:.1f} s after")  # fmt: skip
