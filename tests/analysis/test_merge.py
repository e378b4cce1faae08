"""A trial's merged Result (cxlab.analysis.merge): sums, the wall from first start to last
end, and percentiles from the merged latency histogram, which equals the histogram of all the Pods'
latencies together."""

from __future__ import annotations

import copy
import random
from typing import Any

import jsonschema
import pytest

from cxlab.analysis.merge import merge_results, skew_seconds
from cxlab_contract import histogram, result_schema
from cxlab_contract.figures import significant
from cxlab_contract.result import latency_seconds, percentile

MIB = 2**20
VALIDATOR = jsonschema.Draft202012Validator(result_schema())


def pod_result(
    latencies: list[float],
    *,
    pod: int = 0,
    trial: str = "001-threads-n3-w10-rtt100ms-r1",
    start: float = 1_700_000_000.0,
    wall: float = 1.0,
    user: float = 0.5,
    system: float = 0.1,
    failed: int = 0,
    workers: int = 10,
    floor: float | None = 0.1,
    rss: int = 50 * MIB,
    interval: float = 0.05,
    timeline: list[int] | None = None,
    barrier: float | None = 0.01,
    task_switches: dict[str, int] | None = None,
    syscalls: dict[str, Any] | None = None,
    errors: dict[str, int] | None = None,
    cpus: tuple[int, ...] = (0,),
) -> dict[str, Any]:
    """A valid Result of one Pod, as a runner builds it (cxlab_runner.result.build_result)."""
    ordered = sorted(latencies)
    result = {
        "schema": "cxlab.dev/result/v1",
        "experiment": "merge",
        "trial": trial,
        "pods": 1,
        "podIndex": pod,
        "model": "threads",
        "workload": "sleep",
        "workers": workers,
        "pool": "onDemand",
        "workersStarted": workers,
        "gomaxprocs": None,
        "tasks": len(ordered) + failed,
        "rttSeconds": 0.1,
        "iterations": None,
        "holdSeconds": None,
        "tasksOk": len(ordered),
        "tasksFailed": failed,
        "wallSeconds": wall,
        "startedAtUnixSeconds": start,
        "barrierWaitSeconds": barrier,
        "startSkewSeconds": None,
        "locustWorkers": None,
        "durationSeconds": None,
        "arrival": None,
        "timeline": None,
        "warmup": None,
        "floorSeconds": floor,
        "efficiency": None if floor is None else round(floor / wall, 4),
        "cpuUserSeconds": user,
        "cpuSystemSeconds": system,
        "cpuPercent": round(100 * (user + system) / wall, 2),
        "peakRssBytes": rss,
        "peakVmBytes": 4 * rss,
        "baselineRssBytes": rss // 2,
        "peakThreads": workers + 2,
        "voluntaryContextSwitches": 100 + pod,
        "involuntaryContextSwitches": 10 + pod,
        "taskContextSwitches": task_switches,
        "syscalls": syscalls,
        "throughputPerSecond": round(len(ordered) / wall, 3),
        "latencySeconds": latency_seconds(ordered),
        "latencyHistogram": histogram.build(ordered),
        "rssTimeline": {"intervalSeconds": interval, "rssBytes": timeline or [rss // 2, rss]},
        "cpus": list(cpus),
        "runtime": "CPython 3.11.9",
        "errors": [
            {"message": m, "count": c}
            for m, c in sorted((errors or {}).items(), key=lambda e: (-e[1], e[0]))
        ],
    }
    assert not list(VALIDATOR.iter_errors(result)), "the helper makes invalid Results"
    return result


def merged(results: list[dict[str, Any]]) -> dict[str, Any]:
    """merge_results, its output checked against the schema and its inputs left alone."""
    before = copy.deepcopy(results)
    result = merge_results(results)
    problems = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(result)]
    assert not problems, problems
    assert results == before, "merging changed a Pod's own Result"
    return result


def within_bucket(value: float, exact: float, schema: int) -> bool:
    """Within a bucket's relative error (base - 1) / (base + 1) of the exact value, plus the
    Result's rounding to 6 decimals."""
    base: float = 2.0 ** (2.0**-schema)
    return abs(value - exact) <= (base - 1) / (base + 1) * exact + 1e-6


# Three Pods' latencies (seconds). "wide": Pod 1 spreads over five decades, which lowers its
# schema below the others', so the merge brings them down to it. "apart": each Pod narrow, at
# schema 5, but a decade apart, so only the merged histogram is too wide and lowers its own.
def latency_sets(seed: int, shape: str) -> list[list[float]]:
    rng = random.Random(seed)
    centers = [-2.3, -2.3, -2.3] if shape != "apart" else [-6.0, -3.5, -1.0]
    pods = [[rng.lognormvariate(c, 0.3) for _ in range(rng.randint(50, 400))] for c in centers]
    if shape == "wide":
        pods[1] = [10 ** rng.uniform(-4, 1) for _ in range(300)]
    pods[2] += [0.0] * (seed % 3)  # below the clock's resolution: zeroCount
    return pods


@pytest.mark.parametrize(
    ("seed", "shape"),
    [(1, "alike"), (2, "alike"), (3, "alike"), (4, "wide"), (5, "wide"), (6, "apart")],
)
def test_merging_equals_computing_on_the_union(seed: int, shape: str) -> None:
    pods = latency_sets(seed, shape)
    results = [pod_result(lat, pod=i) for i, lat in enumerate(pods)]
    union = sorted(v for lat in pods for v in lat)
    expected = histogram.build(union)
    schemas = [r["latencyHistogram"]["schema"] for r in results]
    assert (len(set(schemas)) > 1) == (shape == "wide")
    assert (expected["schema"] < min(schemas)) == (shape == "apart")

    got = histogram.merge([r["latencyHistogram"] for r in results])
    for key in ("schema", "offset", "counts", "zeroCount"):
        assert got[key] == expected[key], key
    assert (got["min"], got["max"]) == (expected["min"], expected["max"])
    assert got["sum"] == pytest.approx(expected["sum"], rel=1e-8)

    result = merged(results)
    assert result["latencyHistogram"] == got
    percentiles = [("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p97_5", 0.975), ("p99", 0.99),
                   ("p99_9", 0.999)]  # fmt: skip
    for name, fraction in percentiles:
        value = result["latencySeconds"][name]
        assert value == significant(histogram.quantile(expected, fraction)), name
        exact = percentile(union, fraction)
        assert within_bucket(value, exact, got["schema"]), (name, value, exact)
    assert result["latencySeconds"]["max"] == significant(union[-1])


def test_a_trial_of_microsecond_tasks_keeps_their_digits() -> None:
    # 1.4 µs and 1.5 µs stay themselves in the Pods' and the merged figures, not 1 and 2 µs
    results = [pod_result([1.4e-6] * 50, pod=0), pod_result([1.5e-6] * 50, pod=1)]
    keys = ("p50", "p90", "p95", "p97_5", "p99", "p99_9", "max")
    assert results[0]["latencySeconds"] == dict.fromkeys(keys, 1.4e-6)
    result = merged(results)
    figures, own = result["latencySeconds"], result["latencyHistogram"]
    assert (own["min"], own["max"], figures["max"]) == (1.4e-6, 1.5e-6, 1.5e-6)
    assert figures["p50"] == 1.4e-6  # the bucket's middle, kept within [min, max]
    # 1.5 µs's bucket's middle, within the bound of schema 5 (1.08 %)
    for name in ("p90", "p95", "p97_5", "p99", "p99_9"):
        assert figures[name] == pytest.approx(1.5e-6, rel=histogram.error_bound(5)), name


def test_the_merged_p99_is_not_the_average_of_the_pods() -> None:
    """One slow Pod: averaging the Pods' p99s would put the trial's p99 near 0.34 s; the
    union's is the slow Pod's tail."""
    fast = [0.01] * 90
    slow = [1.0] * 10
    results = [pod_result(fast, pod=0), pod_result(fast, pod=1), pod_result(slow, pod=2)]
    result = merged(results)
    latency, schema = result["latencySeconds"], result["latencyHistogram"]["schema"]
    assert schema == 3  # two decades span more than 100 buckets at schema 5: 4.3 % then
    assert within_bucket(latency["p99"], 1.0, schema)
    assert within_bucket(latency["p90"], 0.01, schema)
    assert latency["max"] == 1.0


def test_wall_skew_sums_and_the_figures_derived_from_them() -> None:
    # Pod 1 starts first and runs longest, Pod 2 starts last, Pod 0 ends last: wall 2.5005.
    start = 1_000_000_000.0
    results = [
        pod_result([0.1] * 30, pod=0, start=start + 0.001, wall=2.4995, user=0.4, system=0.1,
                   rss=40 * MIB, floor=0.4, barrier=0.3, failed=1),
        pod_result([0.1] * 29, pod=1, start=start, wall=2.5, user=0.3, system=0.05,
                   rss=60 * MIB, floor=0.3, barrier=0.01, failed=2),
        pod_result([0.1] * 29, pod=2, start=start + 0.002, wall=1.5, user=0.2, system=0.3,
                   rss=50 * MIB, floor=0.3, barrier=None),
    ]  # fmt: skip
    result = merged(results)
    wall = 2.5005
    assert result["wallSeconds"] == pytest.approx(wall, abs=1e-6)
    assert result["startedAtUnixSeconds"] == start
    assert result["startSkewSeconds"] == skew_seconds(results) == pytest.approx(0.002, abs=1e-6)
    assert result["barrierWaitSeconds"] == 0.3
    assert (result["pods"], result["podIndex"], result["workers"]) == (3, None, 10)
    assert (result["tasks"], result["tasksOk"], result["tasksFailed"]) == (91, 88, 3)
    assert result["workersStarted"] == 30
    assert result["cpuUserSeconds"] == pytest.approx(0.9)
    assert result["cpuSystemSeconds"] == pytest.approx(0.45)
    assert result["voluntaryContextSwitches"] == 303
    assert result["involuntaryContextSwitches"] == 33
    assert result["peakThreads"] == 36
    # Memory: the trial's is the sum; each Pod's own stays in its own Result.
    assert result["peakRssBytes"] == 150 * MIB
    assert result["peakVmBytes"] == 600 * MIB
    assert result["baselineRssBytes"] == 75 * MIB
    assert [r["peakRssBytes"] for r in results] == [40 * MIB, 60 * MIB, 50 * MIB]
    # From the merged values, not the Pods' own figures summed or averaged.
    assert result["throughputPerSecond"] == round(88 / wall, 3)
    assert result["cpuPercent"] == round(100 * 1.35 / wall, 2)
    assert result["floorSeconds"] == 0.4  # the slowest Pod's
    assert result["efficiency"] == round(0.4 / wall, 4)
    assert result["cpus"] == [0]
    for key in ("experiment", "trial", "model", "workload", "rttSeconds", "pool", "runtime"):
        assert result[key] == results[0][key]


def test_no_barrier_no_floor_and_the_union_of_cpus() -> None:
    results = [
        pod_result([0.1], pod=0, barrier=None, floor=None, cpus=(2, 3)),
        pod_result([0.1], pod=1, barrier=None, floor=None, cpus=(0, 3)),
    ]
    result = merged(results)
    assert result["barrierWaitSeconds"] is None
    assert (result["floorSeconds"], result["efficiency"]) == (None, None)
    assert result["cpus"] == [0, 2, 3]


def test_a_pod_without_successful_tasks() -> None:
    results = [pod_result([0.2, 0.3], pod=0), pod_result([], pod=1, failed=2)]
    result = merged(results)
    assert result["latencyHistogram"] == histogram.build([0.2, 0.3])
    assert result["latencySeconds"]["max"] == 0.3
    assert (result["tasksOk"], result["tasksFailed"]) == (2, 2)


def test_failure_kinds_are_summed_or_left_out_with_an_older_runners() -> None:
    kinds = [
        {"connect": 2, "timeout": 0, "tls": 0, "status": 1, "other": 0},
        {"connect": 0, "timeout": 4, "tls": 0, "status": 0, "other": 1},
    ]
    results = [pod_result([0.1], pod=0, failed=3), pod_result([0.1], pod=1, failed=5)]
    for result, counted in zip(results, kinds, strict=True):
        result["failureKinds"] = counted
    result = merged(results)
    assert result["failureKinds"] == {"connect": 2, "timeout": 4, "tls": 0, "status": 1, "other": 1}
    assert sum(result["failureKinds"].values()) == result["tasksFailed"]
    del results[1]["failureKinds"]
    assert "failureKinds" not in merged(results)


def test_errors_are_summed_per_message_and_capped_at_five() -> None:
    results = [
        pod_result([0.1], pod=0, errors={"refused": 5, "reset": 2, "a": 1, "timeout": 3}),
        pod_result([0.1], pod=1, errors={"reset": 4, "b": 1, "c": 1, "d": 1}),
        pod_result([0.1], pod=2, errors={"timeout": 3, "e": 2}),
    ]
    assert merged(results)["errors"] == [
        {"message": "reset", "count": 6},  # a tie: by message
        {"message": "timeout", "count": 6},
        {"message": "refused", "count": 5},
        {"message": "e", "count": 2},
        {"message": "a", "count": 1},  # b, c and d, as frequent, come later by message
    ]


def test_system_calls_are_summed_or_unavailable_or_null() -> None:
    many = {f"call{i:02}": 1000 - i for i in range(12)}
    results = [
        pod_result([0.1], pod=0, syscalls={"total": 20_000, "counts": {**many}}),
        pod_result([0.1], pod=1, syscalls={"total": 9_000, "counts": {"futex": 40, "read": 7}}),
    ]
    counted = merged(results)["syscalls"]
    assert counted["total"] == 29_000
    # At most 12: futex kept though 11 calls are more frequent, read dropped.
    assert list(counted["counts"]) == [*list(many)[:11], "futex"]
    assert counted["counts"]["call00"] == 1000 and counted["counts"]["futex"] == 40

    results[0]["syscalls"] = {"total": 5, "counts": {"read": 3}}
    assert merged(results)["syscalls"] == {"total": 9_005, "counts": {"futex": 40, "read": 10}}

    results[1]["syscalls"] = {"unavailable": "strace is not installed where the runner runs"}
    third = pod_result([0.1], pod=2, syscalls={"unavailable": "ptrace refused"})
    assert merged([*results, third])["syscalls"] == results[1]["syscalls"]

    assert merged([pod_result([0.1], pod=0), pod_result([0.1], pod=1)])["syscalls"] is None


def test_task_context_switches_are_summed_or_null() -> None:
    switches = [{"voluntary": 5, "involuntary": 1}, {"voluntary": 7, "involuntary": 2}]
    results = [pod_result([0.1], pod=i, task_switches=s) for i, s in enumerate(switches)]
    assert merged(results)["taskContextSwitches"] == {"voluntary": 12, "involuntary": 3}
    results.append(pod_result([0.1], pod=2, task_switches=None))  # goroutines cannot tell
    assert merged(results)["taskContextSwitches"] is None


def test_rss_timelines_are_brought_to_the_coarsest_interval_and_summed() -> None:
    results = [
        # 0.05 s: every 8th sample at 0.4 s, slots 0, 8, 16
        pod_result([0.1], pod=0, interval=0.05, timeline=list(range(100, 120))),
        # 0.4 s, the coarsest: as it is
        pod_result([0.1], pod=1, interval=0.4, timeline=[1000, 2000, 3000, 4000]),
        # 0.2 s: slots 0 and 2; it ends first, then counts 0
        pod_result([0.1], pod=2, interval=0.2, timeline=[7, 8, 9]),
    ]
    assert merged(results)["rssTimeline"] == {
        "intervalSeconds": 0.4,
        "rssBytes": [100 + 1000 + 7, 108 + 2000 + 9, 116 + 3000, 4000],
    }


def test_a_full_timeline_at_the_first_interval_beside_a_long_one() -> None:
    """A Pod that ended within 3.2 s (64 samples at 0.05 s) beside one that sampled every
    1.6 s: every 32nd sample."""
    results = [
        pod_result([0.1], pod=0, interval=0.05, timeline=list(range(64))),
        pod_result([0.1], pod=1, interval=1.6, timeline=[1000, 2000, 3000]),
    ]
    assert merged(results)["rssTimeline"] == {
        "intervalSeconds": 1.6,
        "rssBytes": [1000, 2032, 3000],
    }


def test_a_timeline_longer_than_the_schema_allows_is_halved() -> None:
    """Not from valid Results (each has at most 64 samples), but the merge keeps the bound."""
    result = pod_result([0.1])
    result["rssTimeline"] = {"intervalSeconds": 0.05, "rssBytes": list(range(100))}
    assert merge_results([result])["rssTimeline"] == {
        "intervalSeconds": 0.1,
        "rssBytes": list(range(0, 100, 2)),
    }


def test_nothing_to_merge_or_several_trials_is_refused() -> None:
    with pytest.raises(ValueError, match="no Results to merge"):
        merge_results([])
    results = [pod_result([0.1], pod=0, trial="a"), pod_result([0.1], pod=1, trial="b")]
    with pytest.raises(ValueError, match="different trials"):
        merge_results(results)


def test_the_warmups_percentiles_are_the_largest_pods_and_only_those_every_pod_has() -> None:
    fast, slow = [0.01] * 40, [0.02] * 39 + [0.5]
    results = [pod_result([0.1] * 10, pod=0), pod_result([0.1] * 10, pod=1)]
    for result, warm in zip(results, (fast, slow), strict=True):
        result["durationSeconds"], result["floorSeconds"], result["efficiency"] = 10.0, None, None
        result["warmup"] = {"seconds": 1.0, "tasksOk": 40, "latencySeconds": latency_seconds(warm)}
    warmup = merged(results)["warmup"]
    assert warmup["tasksOk"] == 80
    assert warmup["latencySeconds"] == {
        "p50": 0.02, "p90": 0.02, "p95": 0.02, "p97_5": 0.02, "p99": 0.5, "p99_9": 0.5, "max": 0.5
    }  # fmt: skip
    # a Pod of an older runner wrote no p95, p97_5 or p99_9: the merge has none either
    older = results[1]["warmup"]["latencySeconds"]
    for key in ("p95", "p97_5", "p99_9"):
        del older[key]
    assert set(merged(results)["warmup"]["latencySeconds"]) == {"p50", "p90", "p99", "max"}
