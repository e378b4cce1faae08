"""The Result of a duration run (CONTRACT.md, Duration runs): from every task's scheduled,
issued, started and ended offsets, its latency figures after the warm-up, the arrival figures
and the generator's verdict, the timeline and the warm-up apart. Computed once, after the task
phase, so a task pays only for four stores."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypedDict

from cxlab_contract import histogram, runner_contract
from cxlab_contract.figures import significant
from cxlab_contract.histogram import Histogram
from cxlab_contract.result import Arrival, Latencies, Warmup, latency_seconds, percentile
from cxlab_contract.timeline import Timeline, interval_for

OK, FAILED = 1, 2  # a task's outcome; 0: dropped, never run
# A closed loop stops starting tasks here (the contract's limits.tasks): each task's times are
# kept, and must fit in memory however fast the tasks are.
MAX_TASKS: int = runner_contract().limits["tasks"].max


@dataclass
class TaskTimes:
    """Offsets in seconds from the task phase's start, one slot per task (per arrival: a
    dropped one keeps outcome 0). A closed loop's tasks are scheduled and issued when they
    start."""

    scheduled: list[float]
    issued: list[float] = field(default_factory=list)
    started: list[float] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)
    outcome: bytearray = field(default_factory=bytearray)

    @classmethod
    def for_schedule(cls, schedule: list[float]) -> TaskTimes:
        n = len(schedule)
        return cls(schedule, [0.0] * n, [0.0] * n, [0.0] * n, bytearray(n))

    @classmethod
    def closed(cls, tasks: list[tuple[float, float, bool]]) -> TaskTimes:
        """A closed loop's (started, ended, ok) tasks, in the order they started."""
        tasks.sort()
        started = [s for s, _, _ in tasks]
        return cls(
            started,
            started,
            started,
            [e for _, e, _ in tasks],
            bytearray(OK if ok else FAILED for _, _, ok in tasks),
        )


def timeline(times: TaskTimes) -> Timeline:
    """Per interval: tasks ended, mean tasks in flight (each task's overlap with the interval,
    summed, over its length), p99 of the successful tasks' latencies that ended in it."""
    ran = [k for k, outcome in enumerate(times.outcome) if outcome]
    span = max((times.ended[k] for k in ran), default=0.0)
    interval = interval_for(span)
    n = math.floor(span / interval) + 1
    completed = [0] * n
    busy = [0.0] * n  # task-seconds in flight within each interval
    full = [0.0] * (n + 1)  # difference array of intervals a task covers whole
    latencies: list[list[float]] = [[] for _ in range(n)]
    for k in ran:
        start, end = times.started[k], times.ended[k]
        first, last = int(start // interval), int(end // interval)
        completed[last] += 1
        if times.outcome[k] == OK:
            latencies[last].append(end - times.scheduled[k])
        if first == last:
            busy[first] += end - start
            continue
        busy[first] += (first + 1) * interval - start
        busy[last] += end - last * interval
        full[first + 1] += interval
        full[last] -= interval
    covered = 0.0
    for i in range(n):
        covered += full[i]
        busy[i] += covered
    return {
        "intervalSeconds": interval,
        "completed": completed,
        "inFlight": [round(b / interval, 3) for b in busy],
        "p99": [significant(percentile(sorted(values), 0.99)) for values in latencies],
    }


def generator_verdict(
    times: TaskTimes, duration: float, max_lag: float, warmup: float
) -> dict[str, Any]:
    """The schedule kept or not: the rate scheduled and achieved within the duration, the lag."""
    scheduled = sum(1 for t in times.scheduled if t < duration)
    issued = sum(1 for t in times.issued if t <= duration)
    lags = sorted(i - s for s, i in zip(times.scheduled, times.issued, strict=True) if s >= warmup)
    rate, achieved = scheduled / duration, issued / duration
    lag = {
        "p50": significant(max(0.0, percentile(lags, 0.50))),
        "p99": significant(max(0.0, percentile(lags, 0.99))),
        "max": significant(max(0.0, lags[-1] if lags else 0.0)),
    }
    reasons = []
    if lag["p99"] > max_lag:
        reasons.append(f"lag p99 {lag['p99'] * 1e3:.3g} ms over the bound {max_lag * 1e3:.3g} ms")
    if achieved < runner_contract().min_issued_share * rate:
        reasons.append(f"issued {achieved:.6g}/s of {rate:.6g}/s by the duration's end")
    return {
        "ratePerSecond": round(rate, 6),
        "achievedRatePerSecond": round(achieved, 6),
        "lagSeconds": lag,
        "maxLagSeconds": max_lag,
        "generatorSaturated": bool(reasons),
        "saturation": "; ".join(reasons)[:200] or None,
    }


class ArrivalLabels(TypedDict):
    """What an arrival run's Result takes from its flags and its queue, not from its times."""

    process: str
    onBusy: str
    maxQueue: int
    maxLagSeconds: float


class ResultParts(TypedDict):
    """The Result's keys a duration run fills (Result has the same keys)."""

    tasks: int
    durationSeconds: float | None
    floorSeconds: float | None  # None: a run for a time has no fastest time
    efficiency: float | None
    throughputPerSecond: float
    latencySeconds: Latencies
    latencyHistogram: Histogram
    timeline: Timeline | None
    warmup: Warmup | None
    arrival: Arrival | None


@dataclass
class _Split:
    """The successful tasks' figures: latencies after the warm-up and within it, and the
    waits and service times after it."""

    after: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    services: list[float] = field(default_factory=list)


def result_parts(
    times: TaskTimes,
    *,
    duration: float,
    warmup: float,
    wall: float,
    arrival: ArrivalLabels | None,
) -> ResultParts:
    """The Result's keys a duration run fills. `arrival`: None for a closed loop."""
    split = _split(times, warmup)
    after = split.after
    parts: ResultParts = {
        "tasks": len(times.scheduled),
        "durationSeconds": duration,
        "floorSeconds": None,
        "efficiency": None,
        "throughputPerSecond": round(len(after) / (wall - warmup), 3) if wall > warmup else 0.0,
        "latencySeconds": latency_seconds(after),
        "latencyHistogram": histogram.build(after),
        "timeline": timeline(times),
        "warmup": None,
        "arrival": None,
    }
    if warmup > 0:
        split.warm.sort()
        parts["warmup"] = {
            "seconds": warmup,
            "tasksOk": len(split.warm),
            "latencySeconds": latency_seconds(split.warm),
        }
    if arrival is not None:
        parts["arrival"] = _arrival(times, duration, warmup, arrival, split)
    return parts


def _split(times: TaskTimes, warmup: float) -> _Split:
    split = _Split()
    for k, outcome in enumerate(times.outcome):
        if outcome != OK:
            continue
        latency = times.ended[k] - times.scheduled[k]
        if times.scheduled[k] < warmup:
            split.warm.append(latency)
            continue
        split.after.append(latency)
        split.waits.append(times.started[k] - times.scheduled[k])
        split.services.append(times.ended[k] - times.started[k])
    split.after.sort()
    return split


def _arrival(
    times: TaskTimes, duration: float, warmup: float, labels: ArrivalLabels, split: _Split
) -> Arrival:
    verdict = generator_verdict(times, duration, labels["maxLagSeconds"], warmup)
    return {
        "process": labels["process"],
        "onBusy": labels["onBusy"],
        "ratePerSecond": verdict["ratePerSecond"],
        "achievedRatePerSecond": verdict["achievedRatePerSecond"],
        "arrivals": len(times.scheduled),
        "dropped": times.outcome.count(0),
        "maxQueue": labels["maxQueue"],
        "lagSeconds": verdict["lagSeconds"],
        "maxLagSeconds": verdict["maxLagSeconds"],
        "generatorSaturated": verdict["generatorSaturated"],
        "saturation": verdict["saturation"],
        "waitHistogram": histogram.build(sorted(max(0.0, w) for w in split.waits)),
        "serviceHistogram": histogram.build(sorted(split.services)),
    }
