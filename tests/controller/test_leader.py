"""Leader election on a Lease (cxlab.controller.leader), against a fake Lease API that keeps
the apiserver's optimistic concurrency; time is a fake clock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from kubernetes.client.exceptions import ApiException

from cxlab.controller.leader import LeaderElection, LeaseTimes

TIMES = LeaseTimes(duration=15, renew_deadline=10, retry=2)


class Leases:
    def __init__(self) -> None:
        self.spec: dict[str, Any] | None = None
        self.version = 0
        self.down = False  # the apiserver unreachable
        self.hung = threading.Event()  # set: a request hangs, as on a dead connection

    def _check(self, timeout: float | None = None) -> None:
        if self.hung.is_set():  # as urllib3 does: without a timeout, it waits for good
            self._unhung.wait(timeout)
            raise TimeoutError("read timed out")
        if self.down:
            raise ConnectionError("apiserver unreachable")

    _unhung = threading.Event()

    def read_namespaced_lease(
        self, name: str, namespace: str, _request_timeout: float | None = None
    ) -> Any:
        self._check(_request_timeout)
        if self.spec is None:
            raise ApiException(status=404)
        s = self.spec
        acquired = datetime.fromisoformat(s["acquireTime"]) if s.get("acquireTime") else None
        return SimpleNamespace(
            metadata=SimpleNamespace(resource_version=str(self.version)),
            spec=SimpleNamespace(
                holder_identity=s.get("holderIdentity"),
                lease_duration_seconds=s.get("leaseDurationSeconds"),
                lease_transitions=s.get("leaseTransitions"),
                acquire_time=acquired.replace(tzinfo=UTC) if acquired else None,
            ),
        )

    def create_namespaced_lease(
        self, namespace: str, body: dict[str, Any], _request_timeout: float | None = None
    ) -> None:
        self._check(_request_timeout)
        if self.spec is not None:
            raise ApiException(status=409)
        self.spec, self.version = body["spec"], self.version + 1

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: dict[str, Any], _request_timeout: float | None = None
    ) -> None:
        self._check(_request_timeout)
        if body["metadata"]["resourceVersion"] != str(self.version):
            raise ApiException(status=409)
        self.spec, self.version = body["spec"], self.version + 1


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def replica(leases: Leases, clock: Clock, name: str) -> LeaderElection:
    return LeaderElection("lab", "cxlab-operator", name, TIMES, api=leases, clock=clock)


def test_one_replica_leads_and_the_other_takes_over_only_after_renewals_stop() -> None:
    leases, clock = Leases(), Clock()
    a, b = replica(leases, clock, "a"), replica(leases, clock, "b")
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    for _ in range(20):  # a renews every 2 s: b never takes over
        clock.now += 2
        assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    clock.now += 14  # a died: no renewal for 14 s, less than the lease
    assert not b.try_acquire_or_renew()
    clock.now += 2  # 16 s since b last saw the Lease change
    assert b.try_acquire_or_renew()
    assert leases.spec is not None and leases.spec["holderIdentity"] == "b"
    assert leases.spec["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()  # a came back: it stands by


def test_a_released_lease_is_taken_at_once() -> None:
    leases, clock = Leases(), Clock()
    a, b = replica(leases, clock, "a"), replica(leases, clock, "b")
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew()  # no wait for the lease duration


def test_of_two_standbys_taking_over_at_once_only_one_wins() -> None:
    leases, clock = Leases(), Clock()
    a, b, c = (replica(leases, clock, n) for n in "abc")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()
    clock.now += 16
    stale = leases.read_namespaced_lease("cxlab-operator", "lab")
    reads = iter([stale, stale])
    b.api = c.api = SimpleNamespace(  # both read the same version before either writes
        read_namespaced_lease=lambda *_, **__: next(reads),
        replace_namespaced_lease=leases.replace_namespaced_lease,
    )
    assert [b.try_acquire_or_renew(), c.try_acquire_or_renew()] == [True, False]


def test_a_leader_that_cannot_renew_for_the_renew_deadline_gives_up() -> None:
    leases, clock = Leases(), Clock()
    fast = LeaseTimes(duration=15, renew_deadline=10, retry=0.01)
    a = LeaderElection("lab", "cxlab-operator", "a", fast, api=leases, clock=clock)
    assert a.try_acquire_or_renew()
    lost, stop = threading.Event(), threading.Event()
    leases.down = True
    a.keep(lost.set, stop)
    assert not lost.wait(0.2)  # failing renewals, but within the deadline
    clock.now += 10
    assert lost.wait(5)
    stop.set()


def test_a_leader_whose_requests_hang_still_gives_up_at_the_deadline() -> None:
    """An apiserver restarting can leave a connection dead, not refused: a request without a
    timeout would hang, and the renewal loop with it, a leader that cannot renew leading on."""
    leases, clock = Leases(), Clock()
    fast = LeaseTimes(duration=15, renew_deadline=10, retry=0.05)
    a = LeaderElection("lab", "cxlab-operator", "a", fast, api=leases, clock=clock)
    assert a.try_acquire_or_renew()
    lost, stop = threading.Event(), threading.Event()
    leases.hung.set()
    a.keep(lost.set, stop)
    clock.now += 10
    try:
        assert lost.wait(5)
    finally:
        stop.set()
        Leases._unhung.set()  # let a hung thread of a failing run go
