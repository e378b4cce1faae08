"""The Result document (cxlab_contract.result): built once at the end of a trial, written to
the result path and stdout."""

from __future__ import annotations

import os
import platform
from typing import TypedDict

from cxlab_contract import histogram
from cxlab_contract.result import (
    MAX_ERRORS,
    SCHEMA,
    ContextSwitches,
    Result,
    floor_seconds,
    latency_seconds,
)
from cxlab_runner import duration, measure
from cxlab_runner.config import RunnerConfig
from cxlab_runner.host import host
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder


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
) -> Result:
    wall = phase.elapsed()
    ordered = sorted(recorder.latencies)
    simulated = _simulated(config)
    floor = floor_seconds(config.workload, config.tasks, config.workers, config.rtt, config.hold)
    if config.workload == "http" and not simulated:
        floor = None
    ok, waited, sampler = recorder.ok_count(), phase.barrier.waited, phase.sampler
    result: Result = {
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
        "rttSeconds": config.rtt if simulated else None,
        "iterations": config.iterations if config.workload == "cpu" else None,
        "holdSeconds": config.hold if config.workload == "hold" else None,
        "tasksOk": ok,
        "tasksFailed": recorder.failed_count(),
        "wallSeconds": round(wall, 6),
        "startedAtUnixSeconds": round(phase.started_at_unix, 6),
        "barrierWaitSeconds": None if waited is None else round(waited, 6),
        "startSkewSeconds": None,  # a merged Result's (operator/cxlab/analysis/merge.py)
        "locustWorkers": phase.locust_workers,
        "floorSeconds": None if floor is None else round(floor, 6),
        "efficiency": None if floor is None or wall == 0 else round(floor / wall, 4),
        **_process_figures(phase, wall),
        "syscalls": None,  # counted, if asked for, by the strace around this process (syscalls.py)
        "throughputPerSecond": round(ok / wall, 3) if wall else 0.0,
        "latencySeconds": latency_seconds(ordered),
        "latencyHistogram": histogram.build(ordered),
        "rssTimeline": {"intervalSeconds": sampler.interval, "rssBytes": list(sampler.timeline)},
        "cpus": sorted(os.sched_getaffinity(0)),
        "runtime": runtime_version(config.model),
        "host": host().copy(),  # the cached one stays as read
        "failureKinds": recorder.failure_kinds(),  # every kind; they sum to tasksFailed
        "errors": [
            {"message": message, "count": count}
            for message, count in recorder.errors.most_common(MAX_ERRORS)
        ],
        "durationSeconds": None,
        "arrival": None,
        "timeline": None,
        "warmup": None,
    }
    if phase.times is not None:  # a duration run: its own tasks, latencies and figures (the
        # keys keep their places: a duration run's values replace the counted run's)
        result = {**result, **_duration_parts(config, recorder, phase.times, wall)}
    return result


def _simulated(config: RunnerConfig) -> bool:
    """Whether the tasks' time is an RTT cxlab simulates. A direct target's is the user's
    service's: no floor and no efficiency either (0 would read as the worst), as the Go
    runner writes it."""
    return config.workload in ("sleep", "http") and config.target_mode != "direct"


class _ProcessFigures(TypedDict):
    """The Result's figures of the process over the task phase (Result has the same keys)."""

    cpuUserSeconds: float
    cpuSystemSeconds: float
    cpuPercent: float
    peakRssBytes: int
    peakVmBytes: int
    baselineRssBytes: int
    peakThreads: int
    voluntaryContextSwitches: int
    involuntaryContextSwitches: int
    taskContextSwitches: ContextSwitches | None


def _process_figures(phase: TaskPhase, wall: float) -> _ProcessFigures:
    used, sampler, task = phase.used, phase.sampler, phase.task_switches()
    cpu_seconds = used.user_seconds + used.system_seconds
    return {
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
    }


def _duration_parts(
    config: RunnerConfig, recorder: TaskRecorder, times: duration.TaskTimes, wall: float
) -> duration.ResultParts:
    """A duration run's own tasks, latencies and figures (duration.result_parts)."""
    arrival: duration.ArrivalLabels | None = None
    if config.arrival is not None:
        arrival = {
            "process": config.arrival,
            "onBusy": config.on_busy,
            "maxQueue": recorder.max_queue,
            "maxLagSeconds": config.max_lag,
        }
    return duration.result_parts(
        times,
        duration=config.duration,
        warmup=config.warmup,
        wall=round(wall, 6),
        arrival=arrival,
    )


def write(text: str, path: str | None) -> bytes:
    """To the result path, then stdout. Through a rename where the folder allows it, so a
    reader never sees half a Result; in place where it does not — /dev/termination-log is
    a file the kubelet mounts, in a folder the runner cannot write to. Returns the bytes
    written to each (text is ASCII JSON), the line newline included: what GET /result
    answers."""
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
    return (text + "\n").encode()
