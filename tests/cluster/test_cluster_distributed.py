"""Trials of several Pods on the real local cluster: started together at the barrier, their
Results merged exactly, a Pod lost or never ready handled with a reason."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.cluster import Lab, experiment_spec, why

from cxlab_contract import histogram
from cxlab_contract.figures import significant

# One node with 1 allocatable CPU (the static CPU manager keeps core 0): three Pods fit in
# it only as fractions of a CPU, in the node's shared pool.
SHARED = {"resources": {"cpu": 0.3, "memory": "128Mi"}, "pinning": "preferred"}
# The start skew measured on this machine (5 runs each, Pods of 0.1 CPU): 3 Pods median
# 1.1 ms, at most 4.2 ms; 8 Pods median 9 ms, at most 17 ms. The bound: a runner holding a
# fraction of a CPU may have used its CFS quota and wait for the next 100 ms period before
# it runs again, so one period, plus the release's round trips on a busy machine.
SKEW_BOUND_SECONDS = 0.15
# A trial that succeeds needs room for all its Pods on the node at once. Side by side, the
# other workers' operators (each with a queue of its own) keep its one CPU busy with their
# trials, and a Pod held Pending past the start barrier failed the trial: these run alone.
ALONE = pytest.mark.solo


def three_pod_sleep(lab: Lab, name: str) -> dict[str, Any]:
    spec = experiment_spec(
        [{"model": "asyncio", "workers": [10], "pods": [3]}],
        {"type": "sleep", "tasks": 300, "rtt": "50ms"},
        **SHARED,
    )
    lab.apply(name, spec)
    experiment = lab.wait_finished(name, timeout=180)
    assert experiment["status"]["phase"] == "Succeeded", why(experiment)
    [entry] = experiment["status"]["trials"]
    return dict(entry)


@ALONE
def test_a_three_pod_trial_starts_together_and_merges_exactly(lab: Lab) -> None:
    entry = three_pod_sleep(lab, "three")
    assert entry["name"] == "000-asyncio-n3-w10-rtt50ms-r1" and entry["pods"] == 3
    pods, merged = entry["podResults"], entry["result"]
    assert [p["podIndex"] for p in pods] == [0, 1, 2]
    assert [p["tasks"] for p in pods] == [100, 100, 100] and merged["tasksOk"] == 300
    assert all(p["barrierWaitSeconds"] is not None for p in pods)
    starts = [p["startedAtUnixSeconds"] for p in pods]
    skew = merged["startSkewSeconds"]
    assert abs(skew - (max(starts) - min(starts))) < 1e-5
    assert skew < SKEW_BOUND_SECONDS, skew
    # the merged p99 is the p99 of the three Pods' histograms together, exactly
    together = histogram.merge([p["latencyHistogram"] for p in pods])
    assert merged["latencySeconds"]["p99"] == significant(histogram.quantile(together, 0.99))
    assert merged["latencyHistogram"]["counts"] == together["counts"]
    ends = [p["startedAtUnixSeconds"] + p["wallSeconds"] for p in pods]
    assert abs(merged["wallSeconds"] - (max(ends) - min(starts))) < 1e-5
    assert merged["peakRssBytes"] == sum(p["peakRssBytes"] for p in pods)
    # a fraction of a CPU is never pinned, and says so
    assert entry["pinned"] is False and "fraction of a CPU" in entry["message"]


@ALONE
def test_arrival_and_closed_loop_trials_of_two_pods_merge_rates_and_histograms(lab: Lab) -> None:
    # Open-loop and closed-loop load (docs/open-loop.md), two experiments of one workload
    # each, every trial of 2 Pods: the trial's rate is its Pods' sum, its histograms their merge.
    models = [{"model": "goroutines", "pods": [2]}]
    rate = {"ratePerSecond": 200, "duration": "1s", "process": "uniform", "maxLag": "1s"}
    arrival = {"type": "sleep", "rtt": "20ms", "warmup": "200ms", "arrival": rate}
    lab.apply("arrive", experiment_spec(models, arrival, **SHARED))
    closed = {"type": "sleep", "rtt": "20ms", "duration": "1s"}
    lab.apply("loop", experiment_spec([{"model": "asyncio", "workers": [4], "pods": [2]}],
                                      closed, **SHARED))  # fmt: skip
    experiment = lab.wait_finished("arrive", timeout=180)
    assert experiment["status"]["phase"] == "Succeeded", why(experiment)
    [entry] = experiment["status"]["trials"]
    assert entry["name"] == "000-goroutines-n2-w0-p0-rtt20ms-a200-r1"
    assert entry["ratePerSecond"] == 200
    pods, merged = entry["podResults"], entry["result"]
    assert [p["arrival"]["ratePerSecond"] for p in pods] == [100, 100]
    assert merged["arrival"]["ratePerSecond"] == 200 and merged["tasks"] == 200
    for key in ("waitHistogram", "serviceHistogram"):
        assert merged["arrival"][key] == histogram.merge([p["arrival"][key] for p in pods])
    assert merged["latencyHistogram"] == histogram.merge([p["latencyHistogram"] for p in pods])
    [knee] = experiment["status"]["summary"]["knees"]
    assert knee["ratePerSecond"] in (200, None)  # one rate: it held, or the node was slow

    loop = lab.wait_finished("loop", timeout=180)
    assert loop["status"]["phase"] == "Succeeded", why(loop)
    [entry] = loop["status"]["trials"]
    pods, merged = entry["podResults"], entry["result"]
    assert merged["durationSeconds"] == 1 and merged["tasks"] == sum(p["tasks"] for p in pods)
    assert merged["throughputPerSecond"] == pytest.approx(
        sum(p["throughputPerSecond"] for p in pods), abs=0.01
    )


@pytest.mark.long
def test_a_pod_deleted_before_the_barrier_retries_the_trial_then_fails_with_the_reason(
    lab: Lab,
) -> None:
    # exclusive on one node: Pod 0 runs and waits at the barrier, Pod 1 can never be placed
    spec = experiment_spec([{"model": "asyncio", "pods": [2]}], exclusive=True, **SHARED)
    lab.apply("apart", spec)

    def waiting(_: dict[str, Any]) -> bool:
        return any(
            p.status.phase == "Running" and p.metadata.labels.get("cxlab.dev/attempt") == "1"
            for p in lab.pods("apart")
        )

    lab.wait("apart", waiting, timeout=60)
    [first] = [p for p in lab.pods("apart") if p.status.phase == "Running"]
    lab.core.delete_namespaced_pod(first.metadata.name, lab.namespace)
    experiment = lab.wait_finished("apart", timeout=150)
    [entry] = experiment["status"]["trials"]
    assert entry["phase"] == "Failed" and entry["attempts"] == 2, entry  # retried, once
    assert "not every Pod was ready at the start barrier within 40s" in entry["message"]
    assert "Pod 1 Pending" in entry["message"] and "anti-affinity" in entry["message"], entry


@ALONE
def test_a_distributed_locust_trial_has_two_workers_counted_by_its_master(lab: Lab) -> None:
    spec = experiment_spec(
        [{"model": "locust", "workers": [5], "pods": [2]}],
        {"type": "http", "tasks": 200, "rtt": "20ms"},
        **SHARED,
    )
    lab.apply("swarm", spec)
    experiment = lab.wait_finished("swarm", timeout=180)
    assert experiment["status"]["phase"] == "Succeeded", why(experiment)
    [entry] = experiment["status"]["trials"]
    assert entry["name"] == "000-locust-n2-w5-rtt20ms-r1" and entry["pods"] == 2
    result, pods = entry["result"], entry["podResults"]
    assert result["locustWorkers"] == 2  # as the master counted them
    assert [p["podIndex"] for p in pods] == [0, 1, 2]  # two workers, then the master
    master, workers = pods[2], pods[:2]
    assert master["locustWorkers"] == 2 and master["tasks"] == 200
    # the master's aggregated statistics count what the workers did, task for task
    assert result["tasksOk"] == master["tasksOk"] == sum(w["tasksOk"] for w in workers) == 200
    assert [w["tasks"] for w in workers] == [100, 100]
    assert result["cpuUserSeconds"] == round(sum(p["cpuUserSeconds"] for p in pods), 4)
