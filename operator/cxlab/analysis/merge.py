"""A trial of N Pods: its Pods' own Results merged into the trial's one (workloads/CONTRACT.md).

Counts, CPU and memory add up; the wall time runs from the first Pod's start to the last
Pod's end. Percentiles do not add up: an average of the Pods' p99s is not the trial's p99
(k6-operator declined to merge p95 for that reason). So they come from the merged latency
histogram, which is bucket for bucket the histogram of all the Pods' latencies together:
exact to the bucket: within histogram.error_bound(schema) of the exact value, 1.08 % at
schema 5, more where a wide spread lowered the schema (17 % at schema 1; CONTRACT.md).
Pure: no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from cxlab_contract import histogram
from cxlab_contract.figures import significant
from cxlab_contract.histogram import Histogram
from cxlab_contract.result import (
    FAILURE_KINDS,
    MAX_ERRORS,
    MAX_SYSCALL_COUNTS,
    MAX_TIMELINE_SAMPLES,
    Arrival,
    ContextSwitches,
    Error,
    Latencies,
    Result,
    RssTimeline,
    Syscalls,
    Warmup,
)
from cxlab_contract.timeline import Timeline, halve

# A Result as a plain mapping, where merging goes over its keys by name (SHARED, SUMMED):
# the JSON edge of a merge, the one place its keys are not read one by one.
Json = Mapping[str, Any]
T = TypeVar("T")

# Copied from the first Pod: the trial's labels and settings, the same in every Pod.
SHARED = (
    "schema", "experiment", "trial", "model", "workload", "gomaxprocs", "rttSeconds",
    "iterations", "holdSeconds", "pool", "runtime", "locustWorkers", "durationSeconds",
)  # fmt: skip
# Summed: each Pod's share. Peaks too: the trial's memory is its Pods' together (each Pod's
# own peak stays in its own Result, which the caller keeps).
SUMMED = (
    "tasks", "tasksOk", "tasksFailed", "voluntaryContextSwitches",
    "involuntaryContextSwitches", "peakRssBytes", "peakVmBytes", "baselineRssBytes",
    "peakThreads", "workersStarted",
)  # fmt: skip


def merge_results(pods: Sequence[Result]) -> Result:
    """The trial's Result from its Pods' own, given in Pod order."""
    results = list(pods)
    if not results:
        raise ValueError("no Results to merge: a trial has at least one Pod")
    trials = sorted({r["trial"] for r in results})
    if len(trials) > 1:
        raise ValueError(f"Results of different trials cannot be merged: {trials}")
    # By their keys: the figures copied from the first Pod, and those summed.
    by_key: list[Json] = list(results)
    merged: dict[str, Any] = {key: by_key[0][key] for key in SHARED}
    merged.update({key: sum(r[key] for r in by_key) for key in SUMMED})
    merged.update(_timed(results))
    merged_histogram = histogram.merge([r["latencyHistogram"] for r in results])
    merged.update(
        {
            "taskContextSwitches": _task_switches(results),
            "syscalls": _syscalls(results),
            "latencySeconds": _latencies(results, merged_histogram),
            "latencyHistogram": merged_histogram,
            "rssTimeline": _timeline([r["rssTimeline"] for r in results]),
            "cpus": sorted({cpu for r in results for cpu in r["cpus"]}),
            "errors": _errors(results),
            "arrival": _arrival(results),
            "timeline": _task_timeline(results),
            "warmup": _warmup(results),
        }
    )
    if all("failureKinds" in r for r in by_key):  # an older runner's Results have none
        kinds: list[Json] = [r["failureKinds"] for r in results if "failureKinds" in r]
        merged["failureKinds"] = {kind: sum(k[kind] for k in kinds) for kind in FAILURE_KINDS}
    return cast(Result, merged)


def _timed(results: Sequence[Result]) -> dict[str, Any]:
    """What the Pods' times make: the wall time from the first Pod's start to the last Pod's
    end, the floor, CPU and throughput over it."""
    first = results[0]
    start = min(r["startedAtUnixSeconds"] for r in results)
    wall = max(r["startedAtUnixSeconds"] + r["wallSeconds"] for r in results) - start
    user = sum(r["cpuUserSeconds"] for r in results)
    system = sum(r["cpuSystemSeconds"] for r in results)
    ok = sum(r["tasksOk"] for r in results)
    floors = [r["floorSeconds"] for r in results]
    # The trial is done when its slowest Pod is: Pod 0's, the largest share.
    floor = None if None in floors else max(f for f in floors if f is not None)
    waits = [w for r in results if (w := r["barrierWaitSeconds"]) is not None]
    return {
        "pods": len(results),
        "podIndex": None,
        # Per Pod, as the spec has it (a trial of N Pods runs N x workers). Resolved
        # against each Pod's share, so a later Pod, one task short, can have one fewer:
        # the most, which is Pod 0's.
        "workers": max(r["workers"] for r in results),
        "wallSeconds": round(wall, 6),
        "startedAtUnixSeconds": round(start, 6),
        "startSkewSeconds": skew_seconds(results),
        "barrierWaitSeconds": round(max(waits), 6) if waits else None,
        "floorSeconds": None if floor is None else round(floor, 6),
        "efficiency": None if floor is None or wall == 0 else round(floor / wall, 4),
        "cpuUserSeconds": round(user, 4),
        "cpuSystemSeconds": round(system, 4),
        "cpuPercent": round(100 * (user + system) / wall, 2) if wall else 0.0,
        # A duration run's: the Pods' steady rates (after any warm-up) together.
        "throughputPerSecond": (
            round(sum(r["throughputPerSecond"] for r in results), 3)
            if first["durationSeconds"] is not None
            else round(ok / wall, 3)
            if wall
            else 0.0
        ),
    }


def _latencies(results: Sequence[Result], merged_histogram: Histogram) -> Latencies:
    """The percentiles of the merged latency histogram (bucket for bucket the histogram of
    all the Pods' latencies together); the max the largest Pod's."""
    return {
        "p50": significant(histogram.quantile(merged_histogram, 0.50)),
        "p90": significant(histogram.quantile(merged_histogram, 0.90)),
        "p95": significant(histogram.quantile(merged_histogram, 0.95)),
        "p97_5": significant(histogram.quantile(merged_histogram, 0.975)),
        "p99": significant(histogram.quantile(merged_histogram, 0.99)),
        "p99_9": significant(histogram.quantile(merged_histogram, 0.999)),
        "max": max(r["latencySeconds"]["max"] for r in results),
    }


def _arrival(results: Sequence[Result]) -> Arrival | None:
    """The trial's arrivals: the Pods' rates and counts summed (each ran its share of the
    rate), their waits and service times merged exactly; the queue and the lag are the
    largest Pod's (its own percentiles: no Pod's lag is worse), saturated if any Pod was."""
    if results[0]["arrival"] is None:
        return None
    arrivals = [a for r in results if (a := r["arrival"]) is not None]
    first = arrivals[0]
    saturated = [(i, a) for i, a in enumerate(arrivals) if a["generatorSaturated"]]
    lags = [a["lagSeconds"] for a in arrivals]
    return {
        "process": first["process"],
        "onBusy": first["onBusy"],
        "ratePerSecond": round(sum(a["ratePerSecond"] for a in arrivals), 6),
        "achievedRatePerSecond": round(sum(a["achievedRatePerSecond"] for a in arrivals), 6),
        "arrivals": sum(a["arrivals"] for a in arrivals),
        "dropped": sum(a["dropped"] for a in arrivals),
        "maxQueue": max(a["maxQueue"] for a in arrivals),
        "lagSeconds": {
            "p50": max(lag["p50"] for lag in lags),
            "p99": max(lag["p99"] for lag in lags),
            "max": max(lag["max"] for lag in lags),
        },
        "maxLagSeconds": first["maxLagSeconds"],
        "generatorSaturated": bool(saturated),
        "saturation": (
            f"Pod {saturated[0][0]}: {saturated[0][1]['saturation']}"[:200] if saturated else None
        ),
        "waitHistogram": histogram.merge([a["waitHistogram"] for a in arrivals]),
        "serviceHistogram": histogram.merge([a["serviceHistogram"] for a in arrivals]),
    }


def _task_timeline(results: Sequence[Result]) -> Timeline | None:
    """The Pods' timelines side by side, aligned by index (they start together, within the
    start skew), each first halved to the coarsest interval among them: tasks ended and in
    flight summed, p99 the largest Pod's (an upper bound of the trial's)."""
    if results[0]["timeline"] is None:
        return None
    timelines = [t for r in results if (t := r["timeline"]) is not None]
    interval = max(t["intervalSeconds"] for t in timelines)
    even = []
    for timeline in timelines:
        while timeline["intervalSeconds"] < interval:
            timeline = halve(timeline)
        even.append(timeline)
    length = max(len(t["completed"]) for t in even)

    def column(values: Callable[[Timeline], list[T]], i: int) -> list[T]:
        return [values(t)[i] for t in even if i < len(values(t))]

    return {
        "intervalSeconds": interval,
        "completed": [sum(column(lambda t: t["completed"], i)) for i in range(length)],
        "inFlight": [round(sum(column(lambda t: t["inFlight"], i)), 3) for i in range(length)],
        "p99": [max(column(lambda t: t["p99"], i)) for i in range(length)],
    }


def _warmup(results: Sequence[Result]) -> Warmup | None:
    """The warm-up's tasks summed; its percentiles the largest Pod's (an upper bound: the
    warm-up is reported apart, without a histogram to merge)."""
    if results[0]["warmup"] is None:
        return None
    warmups = [w for r in results if (w := r["warmup"]) is not None]
    latencies = [w["latencySeconds"] for w in warmups]
    return {
        "seconds": warmups[0]["seconds"],
        "tasksOk": sum(w["tasksOk"] for w in warmups),
        "latencySeconds": _largest(latencies),
    }


def _largest(latencies: Sequence[Latencies]) -> Latencies:
    """Each percentile's largest over the Pods; p95, p97_5 and p99_9 only where every Pod's
    runner wrote them (an older runner's Result has none)."""
    largest: Latencies = {
        "p50": max(w["p50"] for w in latencies),
        "p90": max(w["p90"] for w in latencies),
        "p99": max(w["p99"] for w in latencies),
        "max": max(w["max"] for w in latencies),
    }
    for key in ("p95", "p97_5", "p99_9"):
        if all(key in w for w in latencies):
            largest[key] = max(w[key] for w in latencies)
    return largest


def skew_seconds(results: Sequence[Result]) -> float:
    """How far apart the Pods' task phases began (max - min of startedAtUnixSeconds)."""
    starts = [r["startedAtUnixSeconds"] for r in results]
    return float(round(max(starts) - min(starts), 6))


def _task_switches(results: Sequence[Result]) -> ContextSwitches | None:
    """Summed per kind; null if any Pod cannot tell its task threads apart (goroutines)."""
    switches = [s for r in results if (s := r["taskContextSwitches"]) is not None]
    if len(switches) < len(results):
        return None
    return {
        "voluntary": sum(s["voluntary"] for s in switches),
        "involuntary": sum(s["involuntary"] for s in switches),
    }


def _syscalls(results: Sequence[Result]) -> Syscalls | None:
    """Counted in every Pod: totals and counts summed. A count is then a lower bound where a
    Pod had dropped that call from its own most frequent MAX_SYSCALL_COUNTS; the total is exact."""
    counted = [r["syscalls"] for r in results]
    if all(c is None for c in counted):
        return None
    unavailable = next((c for c in counted if c is not None and "unavailable" in c), None)
    if unavailable is not None:
        return {"unavailable": unavailable["unavailable"]}
    present = [c for c in counted if c is not None]
    if len(present) < len(counted):  # the Pods run with the same flags: never, but no partial sum
        return {"unavailable": "not every Pod of the trial counted its system calls"}
    calls: Counter[str] = Counter()
    for c in present:
        calls.update(c["counts"])
    # As a runner keeps them (cxlab_runner.syscalls): the most frequent, futex always.
    top = sorted(calls, key=lambda name: (-calls[name], name))[:MAX_SYSCALL_COUNTS]
    if "futex" in calls and "futex" not in top:
        top[-1] = "futex"
    top.sort(key=lambda name: (-calls[name], name))
    return {"total": sum(c["total"] for c in present), "counts": {n: calls[n] for n in top}}


def _timeline(timelines: list[RssTimeline]) -> RssTimeline:
    """The trial's resident memory over time: the Pods' timelines summed sample by sample,
    aligned by index (the Pods start together, within the start skew). Each is first brought
    to the coarsest interval among them as its runner would have if it had run that long:
    keeping the samples at every (coarsest / own interval)-th slot, a power of two.

    A Pod counts 0 after its timeline ends, not its last value held: its timeline ends with
    its task phase, its share of the trial done; what it holds afterwards (lingering for a
    scrape, exiting) was never sampled, and holding would invent samples. So the sum after a
    Pod's end is the memory of the Pods still running tasks."""
    interval = max(t["intervalSeconds"] for t in timelines)
    total: list[int] = []
    for timeline in timelines:
        # 2^k exactly: both runners start at 0.05 s and double it (and their floats round-trip
        # through JSON). Rounded all the same, so a ratio off in its last bit picks its slot.
        step = interval / timeline["intervalSeconds"]
        samples = timeline["rssBytes"]
        kept = [samples[i] for m in range(len(samples)) if (i := round(m * step)) < len(samples)]
        total += [0] * (len(kept) - len(total))
        for index, value in enumerate(kept):
            total[index] += value
    while len(total) > MAX_TIMELINE_SAMPLES:  # cannot happen from valid Results; cut as runners do
        total, interval = total[::2], interval * 2
    return {"intervalSeconds": interval, "rssBytes": total}


def _errors(results: Sequence[Result]) -> list[Error]:
    """Counts summed per message; the most frequent MAX_ERRORS, as a runner keeps them, ties
    by message. A count is a lower bound where a Pod had dropped that message itself."""
    counts: Counter[str] = Counter()
    for result in results:
        for error in result["errors"]:
            counts[error["message"]] += error["count"]
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:MAX_ERRORS]
    return [{"message": message, "count": count} for message, count in top]


# A distributed Locust trial's load: its master's and its workers' together.
LOCUST_SUMMED = (
    "voluntaryContextSwitches", "involuntaryContextSwitches", "peakRssBytes", "peakVmBytes",
    "baselineRssBytes", "peakThreads",
)  # fmt: skip


def merge_locust(master: Result, workers: Sequence[Result]) -> Result:
    """A distributed Locust trial's Result: its master's (Locust's aggregated statistics:
    tasks, failures, latencies, throughput, the workers it counted), with the CPU, memory
    and switches of the master and its workers together, and the workers' start skew."""
    everyone = [master, *workers]
    user = sum(r["cpuUserSeconds"] for r in everyone)
    system = sum(r["cpuSystemSeconds"] for r in everyone)
    wall = master["wallSeconds"]
    merged: dict[str, Any] = dict(master)
    by_key: list[Json] = list(everyone)
    merged.update({key: sum(r[key] for r in by_key) for key in LOCUST_SUMMED})
    merged.update(
        {
            "pods": len(workers),
            "podIndex": None,
            "startSkewSeconds": skew_seconds(list(workers)),
            "cpuUserSeconds": round(user, 4),
            "cpuSystemSeconds": round(system, 4),
            "cpuPercent": round(100 * (user + system) / wall, 2) if wall else 0.0,
            "taskContextSwitches": _task_switches(everyone),
            "rssTimeline": _timeline([r["rssTimeline"] for r in everyone]),
            "cpus": sorted({cpu for r in everyone for cpu in r["cpus"]}),
        }
    )
    return cast(Result, merged)
