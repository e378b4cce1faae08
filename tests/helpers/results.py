"""Results as a capacity plan reads them (the plan's, the followups' and calibration's tests)."""

from __future__ import annotations

from typing import Any

from cxlab_contract.histogram import build

MIB = 2**20


def result(
    workers: int, x: float, p99: float, p50: float, cpu_per_task: float, rss: int = 80 * MIB,
    *, p90: float | None = None, tasks: int = 18000, failed: int = 0,
    service: list[float] | None = None, pods: int = 1,
) -> dict[str, Any]:  # fmt: skip
    """The Result fields a plan reads: throughput X, latencies, CPU seconds per task, peak RSS,
    and the latency histogram (service: the latencies in it; by default 98 % at p50 and 2 %
    at p99)."""
    cpu = cpu_per_task * tasks
    return {
        "pods": pods, "workers": workers, "tasks": tasks, "tasksOk": tasks - failed,
        "tasksFailed": failed, "wallSeconds": tasks / x, "throughputPerSecond": x,
        "latencySeconds": {"p50": p50, "p90": p90 or p99, "p99": p99, "max": 2 * p99},
        "latencyHistogram": build(service or [p50] * 98 + [p99] * 2),
        "cpuUserSeconds": 0.75 * cpu, "cpuSystemSeconds": 0.25 * cpu, "peakRssBytes": rss,
        "arrival": None,
    }  # fmt: skip


CONSTANT = [0.1] * 100  # every task 100 ms: a constant service time


def arrival_result(
    rate: float, service: list[float], waits: list[float], dropped: int = 0
) -> dict[str, Any]:
    """An arrival run's Result: its latency is wait plus service, its service apart."""
    measured = result(
        0, x=rate, p99=max(waits) + max(service), p50=service[len(service) // 2],
        cpu_per_task=50e-6, service=[w + s for w, s in zip(waits, service, strict=True)],
    )  # fmt: skip
    measured["arrival"] = {
        "dropped": dropped,
        "generatorSaturated": False,
        "saturation": None,
        "serviceHistogram": build(service),
        "waitHistogram": build(waits),
    }
    return measured
