"""A copy's figures over a trial's window from two readings of the kubelet's counters: what
is given only where both readings measured the same thing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cxlab.analysis.copy_counters import (
    PERIODS,
    THROTTLED,
    ContainerCount,
    CopyReading,
    PodCount,
    summary_pods,
    window_figures,
    with_statuses,
)

T0 = datetime(2026, 12, 2, 4, 5, 0, tzinfo=UTC)
STARTED = T0 - timedelta(minutes=1)


def _summary_pod(name: str, cpu_ns: int, working_set: int, at: datetime) -> dict[str, Any]:
    """A Pod of a kubelet's /stats/summary?only_cpu_and_memory=true, as this cluster's
    kubelet (v1.32, containerd's CRI stats) writes it: its own cgroup's figures are
    cAdvisor's, read at its housekeeping (here stale), its containers' the runtime's."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "podRef": {"name": name, "namespace": "lab", "uid": "70a6ff91"},
        "startTime": STARTED.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "containers": [{
            "name": "httpbin", "startTime": STARTED.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "cpu": {"time": stamp, "usageNanoCores": 0, "usageCoreNanoSeconds": cpu_ns},
            "memory": {"time": stamp, "workingSetBytes": working_set},
        }],
        "cpu": {"time": "2026-12-02T04:02:49Z", "usageNanoCores": 0, "usageCoreNanoSeconds": 0},
        "memory": {"time": "2026-12-02T04:02:49Z", "usageBytes": 0, "workingSetBytes": 0},
    }  # fmt: skip


def _reading(
    at: datetime, cpu_ns: int, working_set: int = 70 << 20, **container: Any
) -> CopyReading:
    summary = {"pods": [
        _summary_pod("cx-a-v1-7d9f-x2", cpu_ns, working_set, at),
        _summary_pod("someone-else", 10**12, 1 << 30, at),  # another Pod on the node
    ]}  # fmt: skip
    pods = summary_pods(summary, "lab", "cx-a-v1-")
    statuses = {"cx-a-v1-7d9f-x2": [("httpbin", container.pop("restarts", 0),
                                     container.pop("last_reason", None))]}  # fmt: skip
    cfs = container.pop("cfs", {})
    return CopyReading(read_at=at, pods=with_statuses(pods, statuses, cfs))


def test_the_cpu_between_two_readings_of_the_copys_containers_only() -> None:
    start, end = _reading(T0, 1_500_000_000), _reading(T0 + timedelta(seconds=10), 3_750_000_000)
    figures = window_figures(start, end, 80 << 20, 12, requests=450)
    assert figures.cpu_seconds == 2.25
    assert figures.cpu_per_request_seconds == 0.005
    assert figures.peak_memory_bytes == 80 << 20
    assert figures.restarts == 0 and figures.oom_kills == 0
    assert figures.cpu_throttled_ratio is None  # no CFS counters: no CPU limit
    assert figures.started_at == T0 and figures.window_seconds == 10.0


def test_the_peak_is_never_below_what_the_two_readings_saw_and_absent_if_unsampled() -> None:
    start = _reading(T0, 0, working_set=90 << 20)
    end = _reading(T0 + timedelta(seconds=5), 10**9, working_set=60 << 20)
    assert window_figures(start, end, 70 << 20, 6, 10).peak_memory_bytes == 90 << 20
    assert window_figures(start, end, None, 2, 10).peak_memory_bytes is None


def test_a_container_restarted_in_the_window_has_no_cpu_and_its_oom_kill_is_counted() -> None:
    start = _reading(T0, 2 * 10**9)
    end = _reading(T0 + timedelta(seconds=8), 10**8, restarts=1, last_reason="OOMKilled")
    figures = window_figures(start, end, 70 << 20, 9, 100)
    assert figures.cpu_seconds is None and figures.cpu_per_request_seconds is None
    assert figures.restarts == 1 and figures.oom_kills == 1
    twice = _reading(T0 + timedelta(seconds=8), 10**8, restarts=2, last_reason="OOMKilled")
    assert window_figures(start, twice, None, 2, 100).oom_kills is None  # only the last known
    errored = _reading(T0 + timedelta(seconds=8), 10**8, restarts=1, last_reason="Error")
    assert window_figures(start, errored, None, 2, 100).oom_kills == 0


def test_a_restart_before_the_window_is_not_one_of_its() -> None:
    start = _reading(T0, 10**9, restarts=3, last_reason="OOMKilled")
    end = _reading(T0 + timedelta(seconds=8), 2 * 10**9, restarts=3, last_reason="OOMKilled")
    figures = window_figures(start, end, 1, 3, 100)
    assert (figures.cpu_seconds, figures.restarts, figures.oom_kills) == (1.0, 0, 0)


def test_a_pod_gone_in_the_window_is_a_restart_and_leaves_the_cpu_unknown() -> None:
    start = _reading(T0, 10**9)
    end = CopyReading(read_at=T0 + timedelta(seconds=8), pods=[])
    figures = window_figures(start, end, 1, 3, 100)
    assert figures.cpu_seconds is None and figures.restarts == 1


def test_a_pod_made_in_the_window_counts_from_zero() -> None:
    start = CopyReading(read_at=T0, pods=[])
    end = _reading(T0 + timedelta(seconds=8), 4 * 10**8)
    assert window_figures(start, end, 1, 3, 100).cpu_seconds == 0.4


def test_a_counter_the_kubelet_read_before_the_trial_ended_is_not_the_trials() -> None:
    start = _reading(T0, 10**9)
    stale = _reading(T0 + timedelta(seconds=3), 2 * 10**9)  # read at :03, Pods ended at :08
    ended = T0 + timedelta(seconds=8, microseconds=400_000)
    assert window_figures(start, stale, 1, 3, 100, ended_at=ended).cpu_seconds is None
    fresh = _reading(T0 + timedelta(seconds=8), 2 * 10**9)  # to the second, as the kubelet
    assert window_figures(start, fresh, 1, 3, 100, ended_at=ended).cpu_seconds == 1.0


def _cfs(periods: int, throttled: int, at_ms: int) -> dict[tuple[str, str], dict[str, Any]]:
    counters = {PERIODS: (periods, at_ms), THROTTLED: (throttled, at_ms)}
    return {("cx-a-v1-7d9f-x2", "httpbin"): counters}


def test_throttling_is_the_share_of_periods_throttled_when_the_counters_moved() -> None:
    stamp = int(T0.timestamp() * 1000)
    start = _reading(T0, 0, cfs=_cfs(1000, 100, stamp))
    end = _reading(T0 + timedelta(seconds=10), 10**9, cfs=_cfs(1100, 125, stamp + 10_000))
    assert window_figures(start, end, 1, 3, 10).cpu_throttled_ratio == 0.25
    # cAdvisor's counters not updated since the start (this cluster's): not measured
    stale = _reading(T0 + timedelta(seconds=10), 10**9, cfs=_cfs(1000, 100, stamp))
    assert window_figures(start, stale, 1, 3, 10).cpu_throttled_ratio is None


def test_a_container_the_summary_lacks_has_no_counter_but_its_restarts() -> None:
    pods = {"p": PodCount(pod="p", containers=[])}
    (pod,) = with_statuses(pods, {"p": [("sidecar", 2, "Error")]}, {})
    assert pod.containers == [ContainerCount(name="sidecar", restarts=2, last_reason="Error")]


def test_the_copys_cores_are_what_its_pods_cpu_limits_allow_and_absent_without_one() -> None:
    at, later = T0, T0 + timedelta(seconds=10)
    summary = {"pods": [_summary_pod("cx-a-v1-x", 10**9, 1 << 20, at),
                        _summary_pod("cx-a-v1-y", 10**9, 1 << 20, at)]}  # fmt: skip
    pods = summary_pods(summary, "lab", "cx-a-v1-")

    def reading(when: datetime, limits: dict[str, float | None]) -> CopyReading:
        return CopyReading(read_at=when, pods=with_statuses(pods, {}, {}, limits))

    both = {"cx-a-v1-x": 0.5, "cx-a-v1-y": 0.25}
    assert window_figures(reading(at, both), reading(later, both), None, 2, 10).cores == 0.75
    one = {"cx-a-v1-x": 0.5, "cx-a-v1-y": None}  # the other may take the node's spare CPU
    assert window_figures(reading(at, one), reading(later, one), None, 2, 10).cores is None


def test_the_pods_own_cfs_counters_stand_for_its_containers_once() -> None:
    stamp = int(T0.timestamp() * 1000)

    def pod_level(periods: int, throttled: int, at: int) -> dict[Any, Any]:
        return {("cx-a-v1-7d9f-x2", ""): {PERIODS: (periods, at), THROTTLED: (throttled, at)}}

    start = _reading(T0, 0, cfs=pod_level(1000, 100, stamp))
    end = _reading(T0 + timedelta(seconds=10), 10**9, cfs=pod_level(1100, 125, stamp + 10_000))
    assert window_figures(start, end, 1, 3, 10).cpu_throttled_ratio == 0.25
