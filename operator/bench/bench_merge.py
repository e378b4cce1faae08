"""What merging a trial's Pods' Results costs (make bench-merge): the operator merges once per
trial, when its last Pod ends, inside a reconcile pass. Prints figures, asserts nothing."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from cxlab.analysis.merge import merge_results
from cxlab_contract import histogram
from cxlab_contract.result import percentile

TASKS_PER_POD = 10_000


def pod_result(index: int, spread: float) -> dict[str, Any]:
    """A Pod's Result with a realistic histogram: sleep latencies around 100 ms, spread as
    asked (0.01: a quiet run, a few buckets; 1.0: a noisy one, dozens)."""
    latencies = sorted(random.lognormvariate(-2.3, spread) for _ in range(TASKS_PER_POD))
    wall = 2.0 + random.random() / 100
    return {
        "schema": "cxlab.dev/result/v1", "experiment": "bench", "trial": "000-asyncio-n8",
        "pods": 1, "podIndex": index, "model": "asyncio", "workload": "sleep", "workers": 500,
        "pool": None, "workersStarted": 500, "gomaxprocs": None, "tasks": TASKS_PER_POD,
        "rttSeconds": 0.1, "iterations": None, "holdSeconds": None, "tasksOk": TASKS_PER_POD,
        "tasksFailed": 0, "wallSeconds": wall,
        "startedAtUnixSeconds": 1.8e9 + random.random() / 100,
        "barrierWaitSeconds": 1.0, "startSkewSeconds": None, "floorSeconds": 2.0,
        "efficiency": 0.99, "cpuUserSeconds": 0.5, "cpuSystemSeconds": 0.1, "cpuPercent": 30.0,
        "peakRssBytes": 50 << 20, "peakVmBytes": 300 << 20, "baselineRssBytes": 20 << 20,
        "peakThreads": 3, "voluntaryContextSwitches": 100, "involuntaryContextSwitches": 10,
        "taskContextSwitches": {"voluntary": 90, "involuntary": 9}, "syscalls": None,
        "throughputPerSecond": TASKS_PER_POD / wall,
        "latencySeconds": {
            "p50": percentile(latencies, 0.5), "p90": percentile(latencies, 0.9),
            "p99": percentile(latencies, 0.99), "max": latencies[-1],
        },
        "latencyHistogram": histogram.build(latencies),
        "rssTimeline": {"intervalSeconds": 0.05, "rssBytes": [40 << 20] * 40},
        "cpus": [1], "runtime": "CPython 3.11", "errors": [], "locustWorkers": None,
        "durationSeconds": None, "arrival": None, "timeline": None, "warmup": None,
    }  # fmt: skip


def main() -> None:
    random.seed(13)
    print(f"merge_results, {TASKS_PER_POD:,} tasks per Pod: median of 200 merges")
    print(f"{'pods':>5} {'spread':>7} {'buckets':>8} {'merge µs':>9} {'per Pod µs':>11}")
    for spread in (0.01, 1.0):
        for pods in (3, 8, 64):
            results = [pod_result(i, spread) for i in range(pods)]
            times = []
            for _ in range(200):
                began = time.perf_counter()
                merged = merge_results(results)
                times.append(time.perf_counter() - began)
            median = statistics.median(times) * 1e6
            buckets = len(merged["latencyHistogram"]["counts"])
            print(f"{pods:>5} {spread:>7} {buckets:>8} {median:>9.0f} {median / pods:>11.1f}")


if __name__ == "__main__":
    main()
