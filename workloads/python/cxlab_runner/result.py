"""The Result document (cxlab_contract/result-v1.schema.json): built once at the end of a
trial, compact enough for a Pod termination message."""

from __future__ import annotations

import json
import math
import os
import platform
from typing import Any

from cxlab_contract import runner_contract

from cxlab_runner import histogram, measure
from cxlab_runner.config import RunnerConfig
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder

SCHEMA = "cxlab.dev/result/v1"
MAX_BYTES = runner_contract().result_max_bytes  # a Pod's termination message holds 4096 bytes
MAX_ERRORS = 5


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted values (0 for none)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def latency_seconds(ordered: list[float]) -> dict[str, float]:
    """The Result's latencySeconds: exact nearest-rank percentiles of sorted latencies."""
    return {
        "p50": round(percentile(ordered, 0.50), 6),
        "p90": round(percentile(ordered, 0.90), 6),
        "p99": round(percentile(ordered, 0.99), 6),
        "max": round(ordered[-1] if ordered else 0.0, 6),
    }


def floor_seconds(workload: str, tasks: int, workers: int, rtt: float, hold: float) -> float | None:
    """ceil(tasks / workers) waves of one RTT (or hold) each; None for cpu, which has no
    physical floor. The planner's estimate uses this too."""
    waves = math.ceil(tasks / workers)
    if workload in ("sleep", "http"):
        return waves * rtt
    if workload == "hold":
        return waves * hold
    return None


def runtime_version(model: str) -> str:
    version = f"{platform.python_implementation()} {platform.python_version()}"
    if model in ("gevent", "locust"):
        import gevent

        version += f" gevent {gevent.__version__}"
    if model == "locust":
        import locust

        version += f" locust {locust.__version__}"
    return version


def build_result(
    config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase, workers: int
) -> dict[str, Any]:
    wall = phase.elapsed()
    ordered = sorted(recorder.latencies)
    floor = floor_seconds(config.workload, config.tasks, config.workers, config.rtt, config.hold)
    used = phase.used
    cpu_seconds = used.user_seconds + used.system_seconds
    sampler = phase.sampler
    ok = recorder.ok_count()
    task = phase.task_switches()
    waited = phase.barrier.waited
    return {
        "schema": SCHEMA,
        "experiment": config.experiment,
        "trial": config.trial,
        "pods": 1,
        "podIndex": config.pod,
        "model": config.model,
        "workload": config.workload,
        "workers": config.workers,
        "pool": config.pool,
        "workersStarted": workers,
        "gomaxprocs": None,
        "tasks": config.tasks,
        "rttSeconds": config.rtt if config.workload in ("sleep", "http") else None,
        "iterations": config.iterations if config.workload == "cpu" else None,
        "holdSeconds": config.hold if config.workload == "hold" else None,
        "tasksOk": ok,
        "tasksFailed": recorder.failed_count(),
        "wallSeconds": round(wall, 6),
        "startedAtUnixSeconds": round(phase.started_at_unix, 6),
        "barrierWaitSeconds": None if waited is None else round(waited, 6),
        "startSkewSeconds": None,  # a merged Result's (operator/cxlab/merge.py)
        "locustWorkers": phase.locust_workers,
        "floorSeconds": None if floor is None else round(floor, 6),
        "efficiency": None if floor is None or wall == 0 else round(floor / wall, 4),
        "cpuUserSeconds": round(used.user_seconds, 4),
        "cpuSystemSeconds": round(used.system_seconds, 4),
        "cpuPercent": round(100 * cpu_seconds / wall, 2) if wall else 0.0,
        "peakRssBytes": max(sampler.peak_rss, measure.peak_rss_bytes_of_self()),
        "peakVmBytes": phase.peak_vm(),
        "baselineRssBytes": phase.baseline_rss,
        "peakThreads": max(1, sampler.peak_threads),
        "voluntaryContextSwitches": used.voluntary_switches,
        "involuntaryContextSwitches": used.involuntary_switches,
        "taskContextSwitches": {"voluntary": task.voluntary, "involuntary": task.involuntary},
        "syscalls": None,  # counted, if asked for, by the strace around this process (syscalls.py)
        "throughputPerSecond": round(ok / wall, 3) if wall else 0.0,
        "latencySeconds": latency_seconds(ordered),
        "latencyHistogram": histogram.build(ordered),
        "rssTimeline": {"intervalSeconds": sampler.interval, "rssBytes": list(sampler.timeline)},
        "cpus": sorted(os.sched_getaffinity(0)),
        "runtime": runtime_version(config.model),
        "errors": [
            {"message": message, "count": count}
            for message, count in recorder.errors.most_common(MAX_ERRORS)
        ],
    }


def encode(result: dict[str, Any]) -> str:
    """Compact JSON whose line, newline included, fits in MAX_BYTES (a termination message).
    The contract's rule, the same in the Go runner: drop errors, least frequent first, then
    the least frequent system calls (futex last), then halve the RSS timeline's resolution;
    only absurd labels can still leave it too long."""
    while True:
        text = json.dumps(result, separators=(",", ":"))
        if len(text.encode()) + 1 <= MAX_BYTES:
            return text
        timeline = result["rssTimeline"]
        counts = (result.get("syscalls") or {}).get("counts", {})
        if result["errors"]:
            result["errors"].pop()
        elif len(counts) > 1:
            del counts[min(counts, key=lambda name: (name == "futex", counts[name]))]
        elif len(timeline["rssBytes"]) > 1:
            result["rssTimeline"] = {
                "intervalSeconds": timeline["intervalSeconds"] * 2,
                "rssBytes": timeline["rssBytes"][::2],
            }
        else:
            return text


def write(text: str, path: str | None) -> None:
    """To the result path, then stdout. Through a rename where the folder allows it, so a
    reader never sees half a Result; in place where it does not — /dev/termination-log is
    a file the kubelet mounts, in a folder the runner cannot write to."""
    if path:
        partial = f"{path}.partial"
        try:
            with open(partial, "w") as file:
                file.write(text + "\n")
            os.replace(partial, path)
        except OSError:
            with open(path, "w") as file:
                file.write(text + "\n")
    print(text, flush=True)
