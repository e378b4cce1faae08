"""The capacity plan (cxlab.analysis.capacity_plan): measured points → Pods and cores for a
target load, per model, and the cheapest model that meets the latency objective."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from helpers.results import CONSTANT, MIB, arrival_result, result

from cxlab.analysis.capacity_plan import CapacityPlan, ModelPlan
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.planning import capacity_plan
from cxlab.analysis.queueing import Service, queue
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab_contract.histogram import build

TARGET = {"ratePerSecond": 20000, "latency": {"percentile": "p99", "max": "250ms"}}


def experiment(
    models: list[dict[str, Any]],
    target: dict[str, Any] | None = TARGET,
    *,
    rtts: tuple[str, ...] = ("100ms",),
    cpu: int = 1,
    pinning: str = "required",
    workload: dict[str, Any] | None = None,
) -> ExperimentSpec:
    spec: dict[str, Any] = {
        "workload": workload or {"type": "sleep", "tasks": 18000, "rtts": list(rtts)},
        "models": models,
        "resources": {"cpu": cpu},
        "pinning": pinning,
    }
    if target is not None:
        spec["capacity"] = {"target": target}
    document = {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "capacity"},
        "spec": spec,
    }
    return parse_experiment(document).spec


def assert_fewest(
    model_plan: dict[str, Any], rate: float, service: Service, objective: float,
    q: float = 0.99, wait: float = 0.2,
) -> None:  # fmt: skip
    """The planned workers are the fewest whose queue keeps the wait bound and the objective
    (checked through the queueing model, which tests/analysis/test_queueing.py holds to published
    and exact values)."""
    per_pod, workers = rate / model_plan["pods"], model_plan["workersPerPod"]
    held = queue(per_pod, service, workers, q)
    assert held is not None and held.wait_probability <= wait and held.latency <= objective
    fewer = queue(per_pod, service, workers - 1, q) if workers > 1 else None
    assert fewer is None or fewer.wait_probability > wait or fewer.latency > objective


def point(
    model: str, workers: int, *results: dict[str, Any], rtt: float | None = 0.1,
    gomaxprocs: int | None = None,
) -> list[TrialOutcome]:  # fmt: skip
    """One point's repetitions."""
    return [
        TrialOutcome(Trial(0, model, workers, gomaxprocs, rtt, repetition), r)
        for repetition, r in enumerate(results, start=1)
    ]


def by_variant(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["variant"]: m for m in plan["models"]}


def plan_of(spec: ExperimentSpec, outcomes: list[TrialOutcome]) -> dict[str, Any]:
    plan = capacity_plan(spec, outcomes)
    assert plan is not None
    return plan.document()


# asyncio at RTT 100 ms, one Pod of 1 CPU each point, one repetition each.
ASYNCIO = [
    *point("asyncio", 100, result(100, x=980, p99=0.103, p50=0.101, cpu_per_task=40e-6)),
    *point("asyncio", 1000, result(1000, x=9000, p99=0.104, p50=0.1, cpu_per_task=50e-6)),
    # the fastest, but past the objective: it must not be planned with
    *point("asyncio", 10000, result(10000, x=30000, p99=0.4, p50=0.3, cpu_per_task=30e-6)),
]


def test_a_hand_calculated_plan() -> None:
    # Target 60 tasks/s at p99 <= 250ms, U = 0.7, 1 CPU per Pod, RTT 100ms, at most 20 % wait.
    # W=4:  p99 0.1 <= 0.25 meets; r = min(40, 0.7 * 1 / 50e-6 = 14,000) = 40
    # W=10: p99 0.4 > 0.25: left out although X = 100
    # pods = ceil(60 / 40) = 2; each Pod λ = 30/s; T = 0.1 s (constant, cv² = 0); a = λT = 3.
    # Erlang C, C(c, a) = [a^c/c! · c/(c-a)] / [Σ_{k<c} a^k/k! + a^c/c! · c/(c-a)]:
    #   c=4: 13.5 / (13 + 13.5) = 0.5094;  c=5: 5.0625 / (16.375 + 5.0625) = 0.2362
    #   c=6: 2.025 / (18.4 + 2.025) = 0.099143 <= 0.2: 6 workers per Pod (Little's law alone,
    #   L = 60 * 0.1 = 6 over 2 Pods, gave 3: every worker busy, every task waiting)
    # occupancy 3 / 6 = 0.5; mean wait C · T / (c - a) · v, cv² = 0: Cosmetatos' M/D/c
    #   v = (1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)) / 2
    #     = (1 + 0.5 · 5 · (sqrt(34) - 2) / 48) / 2 = 0.599764372
    #   = 0.099143 * 0.1 / 3 * 0.599764 = 0.00198208544 s; a waiting task waits
    #   Exp(mean T / (c - a) · v = 0.0199921457 s), so p99: C · exp(-(t - 0.1) / 0.0199921) =
    #   0.01 → t = 0.1 + 0.0199921 · ln(9.9143) = 0.145861587 s
    #   (latencies to 9 significant digits, never fixed decimals)
    # cores 2, memory 2 * 80 MiB, CPU at the target: 30 * 50e-6 / 1 = 0.0015 → 0.002
    target = {"ratePerSecond": 60, "latency": {"percentile": "p99", "max": "250ms"}}
    spec = experiment([{"model": "asyncio", "workers": [4, 10]}], target)
    outcomes = [
        *point(
            "asyncio", 4, result(4, x=40, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
        ),
        *point("asyncio", 10, result(10, x=100, p99=0.4, p50=0.1, cpu_per_task=50e-6)),
    ]
    note = "2 Pods from measurements of one Pod, assuming Pods add linearly (one trial is one Pod)"
    plan = plan_of(spec, outcomes)
    # The choice as a Deployment fragment: 2 replicas of the measured Pod, 6 workers each.
    assert yaml.safe_load(plan.pop("manifest")) == {
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{
            "name": "app",
            "resources": {
                "requests": {"cpu": "1", "memory": "512Mi"},
                "limits": {"cpu": "1", "memory": "512Mi"},
            },
            "env": [{"name": "CONCURRENCY", "value": "6"}],
        }]}}},
    }  # fmt: skip
    assert plan == {
        "target": {
            "ratePerSecond": 60.0, "percentile": "p99", "latencySeconds": 0.25,
            "cpuUtilization": 0.7, "maxWaitProbability": 0.2,
        },
        "rttSeconds": 0.1,
        "models": [
            {
                "variant": "asyncio", "model": "asyncio", "meets": True, "workers": 4,
                "workersPerPod": 6, "pods": 2, "coresPerPod": 1, "cores": 2,
                "memoryBytes": 2 * 80 * MIB, "ratePerPod": 40.0, "holdingTimeSeconds": 0.1,
                "expectedLatencySeconds": 0.145861587, "expectedOccupancy": 0.5,
                "expectedWaitProbability": 0.0991, "expectedMeanWaitSeconds": 0.00198208544,
                "expectedCpuUtilization": 0.002, "basis": "extrapolated", "note": note,
            },
        ],
        "choice": "asyncio", "pods": 2, "cores": 2, "memoryBytes": 2 * 80 * MIB,
        "basis": "extrapolated",
        "display": "2 Pods \u00d7 1 CPU, asyncio",
        "message": "asyncio: 2 Pods \u00d7 1 CPU (6 workers per Pod) for 60 tasks/s at "
        "p99 ≤ 250ms (RTT 100ms), expected p99 145.862ms with 10% of tasks waiting "
        f"1.982ms on average at 50% occupancy; extrapolated: {note}",
    }  # fmt: skip


@pytest.mark.parametrize(("bound", "workers"), [(0.45, 3), (0.44, 4)])
def test_the_wait_bound_sizes_the_workers_by_erlang_c(bound: float, workers: int) -> None:
    # 20 tasks/s of 100 ms on one Pod: a = 2. Wolfram's ErlangC[3, 2] = 4/9 = 0.444, and
    # C(4, 2) = (4/3) / (19/3 + 4/3) = 4/23 = 0.174: a bound of 0.45 takes 3 workers, 0.44 four.
    target = {"ratePerSecond": 20, "latency": {"max": "1s"}, "maxWaitProbability": bound}
    spec = experiment([{"model": "asyncio", "workers": [10]}], target)
    measured = result(10, x=100, p99=0.1, p50=0.1, cpu_per_task=1e-5, service=CONSTANT)
    [asyncio] = plan_of(spec, point("asyncio", 10, measured))["models"]
    assert (asyncio["pods"], asyncio["workersPerPod"]) == (1, workers)
    assert asyncio["expectedWaitProbability"] == {3: 0.4444, 4: 0.1739}[workers]
    assert asyncio["expectedOccupancy"] == round(2 / workers, 3)


def test_skewed_service_times_hold_workers_for_their_mean_not_their_median() -> None:
    # 90 % of tasks take 0.1 s and 10 % 2.0 s: p50 0.1 s, but the mean is 0.29 s. At 20
    # tasks/s the workers are busy a = 20 * 0.29 = 5.8 on average; sized by p50 (a = 2) the
    # plan would carry about a third of the rate. P(wait) <= 0.2 then needs the fewest c with
    # C(c, 5.8) <= 0.2, and p99 <= 5s holds with room (the service's own p99 is 2 s).
    skewed = [0.1] * 90 + [2.0] * 10
    target = {"ratePerSecond": 20, "latency": {"max": "5s"}}
    spec = experiment([{"model": "asyncio", "workers": [10]}], target)
    measured = result(10, x=34, p99=2.0, p50=0.1, cpu_per_task=1e-5, service=skewed)
    [asyncio] = plan_of(spec, point("asyncio", 10, measured))["models"]
    assert asyncio["holdingTimeSeconds"] == 0.29 and asyncio["pods"] == 1
    assert asyncio["workersPerPod"] > 5.8 and asyncio["expectedOccupancy"] < 1
    assert_fewest(asyncio, 20, Service.of_histogram(build(skewed)), objective=5.0)


def test_a_closed_loops_holding_time_is_its_tasks_mean_not_workers_over_throughput() -> None:
    # 10 workers loop over 18,000 tasks of 100 ms at 80 tasks/s: W / X = 0.125 s counts the
    # loop's own time between tasks and a burst's ramp; a worker holds a task 0.1 s (the
    # histogram's mean), and the plan is the same as for a point with a worker per task.
    target = {"ratePerSecond": 60, "latency": {"max": "250ms"}}
    spec = experiment([{"model": "asyncio", "workers": [10]}], target)
    measured = result(10, x=80, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
    [asyncio] = plan_of(spec, point("asyncio", 10, measured))["models"]
    assert asyncio["holdingTimeSeconds"] == 0.1 and asyncio["pods"] == 1  # ceil(60 / 80)
    # a = 6: C(c, 6) <= 0.2 first at c = 9 (Erlang C: 0.357 at 8, 0.196 at 9), p99 well in
    assert asyncio["workersPerPod"] == 9 and asyncio["expectedOccupancy"] == round(6 / 9, 3)
    assert_fewest(asyncio, 60, Service.of_histogram(build(CONSTANT)), objective=0.25)


def test_a_trial_of_several_pods_plans_per_pod() -> None:
    # Two Pods of one trial, merged: 160 tasks/s and 160 MiB between them, the merged
    # histogram of both: one Pod's share is the one-Pod point above.
    target = {"ratePerSecond": 60, "latency": {"max": "250ms"}}
    spec = experiment([{"model": "asyncio", "workers": [10]}], target)
    one = result(10, x=80, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
    two = result(
        10, x=160, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT * 2, rss=160 * MIB,
        tasks=36000, pods=2,
    )  # fmt: skip
    trial = Trial(0, "asyncio", 10, None, 0.1, 1, pods=2)
    [merged] = plan_of(spec, [TrialOutcome(trial, two)])["models"]
    [alone] = plan_of(spec, point("asyncio", 10, one))["models"]
    assert merged == alone
    assert (merged["ratePerPod"], merged["memoryBytes"]) == (80.0, 80 * MIB)


def test_an_arrival_runs_holding_time_is_its_service_without_the_wait() -> None:
    # 40 arrivals/s, each served 100 ms, some waiting 50 ms for a worker: the worker is held
    # 100 ms, not the 125 ms of the latency.
    target = {"ratePerSecond": 30, "latency": {"max": "250ms"}}
    spec = experiment([{"model": "asyncio", "workers": [0]}], target)
    waits = [0.0] * 50 + [0.05] * 50
    trial = Trial(0, "asyncio", 0, None, 0.1, 1, rate_per_second=40.0)
    [asyncio] = plan_of(spec, [TrialOutcome(trial, arrival_result(40, CONSTANT, waits))])["models"]
    assert asyncio["holdingTimeSeconds"] == 0.1 and asyncio["ratePerPod"] == 40.0
    # A run that dropped arrivals did not carry its rate: nothing to plan from.
    dropped = arrival_result(40, CONSTANT, waits, dropped=3)
    [none] = plan_of(spec, [TrialOutcome(trial, dropped)])["models"]
    assert not none["meets"] and "dropped arrivals" in none["reason"]


@pytest.mark.parametrize(("utilization", "pods", "capped"), [(0.7, 3, True), (1.0, 2, False)])
def test_the_cpu_cap_keeps_each_pod_at_the_target_utilization(
    utilization: float, pods: int, capped: bool
) -> None:
    # threads, W=200, 2 CPUs per Pod: X = 5000/s but c = 400 µs of CPU per task.
    # U 0.7: r = min(5000, 0.7 * 2 / 400e-6 = 3500) = 3500 → pods = ceil(10000 / 3500) = 3,
    #   cores 6; at the target each Pod carries 10000 / 3: utilisation 3333 * 400e-6 / 2
    #   = 0.667, under the cap's 0.7; its workers are sized for that rate
    # U 1.0: r = min(5000, 1.0 * 2 / 400e-6 = 5000) = 5000 → pods 2, cores 4, utilisation 1.0
    target = {"ratePerSecond": 10000, "latency": {"max": "250ms"}, "cpuUtilization": utilization}
    spec = experiment([{"model": "threads", "workers": [200]}], target, cpu=2)
    outcomes = point("threads", 200, result(200, x=5000, p99=0.12, p50=0.1, cpu_per_task=400e-6))
    [threads] = plan_of(spec, outcomes)["models"]
    assert threads["pods"] == pods and threads["cores"] == 2 * pods
    assert threads["ratePerPod"] == (3500.0 if capped else 5000.0)
    assert threads["expectedCpuUtilization"] == (0.667 if capped else 1.0)
    service = Service.of_histogram(outcomes[0].result["latencyHistogram"])
    assert_fewest(threads, 10000, service, objective=0.25)
    cap = "; 3,500 tasks/s per Pod keeps its CPUs at 70% (measured 5,000 tasks/s)"
    assert threads["note"].endswith(cap) == capped


def test_the_cpu_cap_can_make_a_slower_point_the_better_one() -> None:
    # W=200: r = min(5000, 0.7 / 400e-6 = 1750) = 1750; W=100: r = min(4000, 0.7 / 100e-6
    # = 7000) = 4000: the slower point carries more within the CPU target.
    spec = experiment([{"model": "threads", "workers": [100, 200]}])
    outcomes = [
        *point("threads", 100, result(100, x=4000, p99=0.11, p50=0.1, cpu_per_task=100e-6)),
        *point("threads", 200, result(200, x=5000, p99=0.12, p50=0.1, cpu_per_task=400e-6)),
    ]
    [threads] = plan_of(spec, outcomes)["models"]
    assert threads["workers"] == 100 and threads["ratePerPod"] == 4000.0
    assert threads["pods"] == 5  # ceil(20000 / 4000)


def test_the_objectives_percentile_is_the_one_compared() -> None:
    # p90 0.105 <= 110ms though p99 0.3 is not: planned with p90, and it predicts p90
    target = {"ratePerSecond": 20000, "latency": {"percentile": "p90", "max": "110ms"}}
    spec = experiment([{"model": "asyncio", "workers": [1000]}], target)
    outcomes = point(
        "asyncio", 1000, result(1000, x=9000, p99=0.3, p50=0.1, cpu_per_task=50e-6, p90=0.105)
    )
    plan = plan_of(spec, outcomes)
    [asyncio] = plan["models"]
    assert asyncio["meets"] and asyncio["expectedLatencySeconds"] <= 0.11
    assert plan["target"]["percentile"] == "p90" and plan["target"]["latencySeconds"] == 0.11
    assert "expected p90 " in plan["message"]
    service = Service.of_histogram(outcomes[0].result["latencyHistogram"])
    assert_fewest(asyncio, 20000, service, objective=0.11, q=0.9)


THREADS_TOO_SLOW = [
    *point("threads", 100, result(100, x=900, p99=0.4, p50=0.2, cpu_per_task=80e-6)),
    *point("threads", 1000, result(1000, x=3000, p99=0.312, p50=0.25, cpu_per_task=80e-6)),
    *point("threads", 5000, result(5000, x=2500, p99=0.5, p50=0.3, cpu_per_task=90e-6)),
]


def test_a_model_that_cannot_meet_the_objective_names_its_best_latency() -> None:
    threads = {"model": "threads", "workers": [100, 1000, 5000]}
    spec = experiment([threads, {"model": "asyncio", "workers": [1000]}])
    plan = plan_of(spec, THREADS_TOO_SLOW + ASYNCIO[1:2])  # asyncio W=1000 meets it
    threads = by_variant(plan)["threads"]
    assert threads == {
        "variant": "threads", "model": "threads", "meets": False,
        "reason": "best p99 312ms at 1000 workers > 250ms",
    }  # fmt: skip
    assert plan["choice"] == "asyncio"


def test_when_no_model_meets_the_objective_there_is_no_choice() -> None:
    spec = experiment([{"model": "threads", "workers": [100, 1000, 5000]}])
    plan = plan_of(spec, THREADS_TOO_SLOW)
    assert plan["display"] == "no model meets p99 ≤ 250ms"
    assert plan["message"] == (
        "no model meets p99 ≤ 250ms for 20,000 tasks/s at RTT 100ms: "
        "threads: best p99 312ms at 1000 workers > 250ms"
    )
    assert not {"choice", "pods", "cores", "memoryBytes", "basis"} & plan.keys()
    CapacityPlan.model_validate(plan)


def _fast(model: str, x: float, rss_mib: int, gomaxprocs: int | None = None) -> list[TrialOutcome]:
    measured = result(1000, x=x, p99=0.104, p50=0.1, cpu_per_task=10e-6, rss=rss_mib * MIB)
    return point(model, 1000, measured, gomaxprocs=gomaxprocs)


# pods = ceil(20000 / r): asyncio and gevent 3 (r = 9000), goroutines 2 (r = 10000)
ASYNCIO_3_PODS = _fast("asyncio", 9000, 80)  # 3 Pods, 240 MiB
GEVENT_3_PODS = _fast("gevent", 9000, 60)  # 3 Pods, 180 MiB
GOROUTINES_2_PODS = _fast("goroutines", 10000, 300, gomaxprocs=0)  # 2 Pods, 600 MiB


def test_the_choice_is_the_fewest_cores_then_the_least_memory() -> None:
    models = [{"model": m, "workers": [1000]} for m in ("asyncio", "gevent", "goroutines")]
    plan = plan_of(experiment(models[:2]), ASYNCIO_3_PODS + GEVENT_3_PODS)
    assert plan["choice"] == "gevent" and plan["memoryBytes"] == 3 * 60 * MIB  # 3 cores each
    plan = plan_of(experiment(models), ASYNCIO_3_PODS + GEVENT_3_PODS + GOROUTINES_2_PODS)
    assert plan["choice"] == "goroutines (GOMAXPROCS default)"  # 2 cores beat less memory
    assert (plan["pods"], plan["cores"], plan["memoryBytes"]) == (2, 2, 600 * MIB)
    assert plan["display"] == "2 Pods \u00d7 1 CPU, goroutines (GOMAXPROCS default)"
    assert [m["variant"] for m in plan["models"]] == [
        "asyncio", "gevent", "goroutines (GOMAXPROCS default)"
    ]  # fmt: skip


@pytest.mark.parametrize("order", [("asyncio", "gevent"), ("gevent", "asyncio")])
def test_a_tie_in_cores_and_memory_goes_to_the_spec_order(order: tuple[str, str]) -> None:
    spec = experiment([{"model": m, "workers": [1000]} for m in order])
    outcomes = _fast("asyncio", 9000, 80) + _fast("gevent", 9000, 80)
    assert plan_of(spec, outcomes)["choice"] == order[0]


def _two_rtts() -> list[TrialOutcome]:
    return [
        *point("asyncio", 1000, result(1000, 9000, p99=0.104, p50=0.1, cpu_per_task=50e-6)),
        *point("asyncio", 1000, result(1000, 990, p99=1.01, p50=1.0, cpu_per_task=50e-6), rtt=1.0),
    ]


def test_target_rtt_selects_the_points() -> None:
    target = TARGET | {"latency": {"max": "2s"}, "rtt": "100ms"}
    spec = experiment([{"model": "asyncio", "workers": [1000]}], target, rtts=("100ms", "1s"))
    plan = plan_of(spec, _two_rtts())
    assert plan["rttSeconds"] == 0.1 and plan["pods"] == 3  # ceil(20000 / 9000)


@pytest.mark.parametrize("rtts", [("100ms", "1s"), ("1s", "100ms")])
def test_the_default_rtt_is_the_largest(rtts: tuple[str, str]) -> None:
    target = TARGET | {"latency": {"max": "2s"}}
    spec = experiment([{"model": "asyncio", "workers": [1000]}], target, rtts=rtts)
    plan = plan_of(spec, _two_rtts())
    assert plan["rttSeconds"] == 1.0 and plan["pods"] == 21  # ceil(20000 / 990)
    assert plan["models"][0]["holdingTimeSeconds"] == 1.0002  # 98 % at 1.0 s, 2 % at 1.01


def test_a_point_with_failed_tasks_is_left_out() -> None:
    # W=1000 would give 3 Pods, but one repetition lost 3 tasks: W=500 plans, ceil(20000 / 4800)
    spec = experiment([{"model": "asyncio", "workers": [500, 1000]}])
    outcomes = [
        *point("asyncio", 500, result(500, x=4800, p99=0.103, p50=0.1, cpu_per_task=50e-6)),
        *point(
            "asyncio", 1000,
            result(1000, x=9000, p99=0.104, p50=0.1, cpu_per_task=50e-6),
            result(1000, x=9000, p99=0.104, p50=0.1, cpu_per_task=50e-6, failed=3),
        ),
    ]  # fmt: skip
    [asyncio] = plan_of(spec, outcomes)["models"]
    assert (asyncio["workers"], asyncio["pods"]) == (500, 5)
    [asyncio] = plan_of(spec, outcomes[1:])["models"]
    assert asyncio == {
        "variant": "asyncio", "model": "asyncio", "meets": False,
        "reason": "every point measured at RTT 100ms had failed tasks or dropped arrivals",
    }  # fmt: skip


def test_models_without_results_say_why() -> None:
    spec = experiment([{"model": "asyncio", "workers": [1000]}, {"model": "threads"}])
    broken = point("asyncio", 1000, result(1000, 9000, 0.104, 0.1, 50e-6))
    lost = [TrialOutcome(o.trial, None, "OOMKilled") for o in broken * 2]
    unpinned = [TrialOutcome(o.trial, o.result, None, "shared cores") for o in broken]
    plan = plan_of(spec, lost + unpinned)
    assert by_variant(plan)["asyncio"]["reason"] == (
        "no trial at RTT 100ms has a Result "
        "(2 trial(s) failed, 1 not pinned (left out under pinning: required))"
    )
    assert by_variant(plan)["threads"]["reason"] == "no trial at RTT 100ms has a Result"
    assert plan["display"] == "no model meets p99 ≤ 250ms"
    # pinning: preferred counts the unpinned Result
    preferred = experiment([{"model": "asyncio", "workers": [1000]}], pinning="preferred")
    assert plan_of(preferred, lost + unpinned)["choice"] == "asyncio"


def test_medians_over_repetitions_so_one_outlier_does_not_move_the_plan() -> None:
    # Medians: X 9000, p99 0.104, c 50 µs, 80 MiB, and the service times of the repetition
    # with the median mean: the plan of the first repetition alone.
    # By the mean: p99 (0.104 + 0.103 + 0.9) / 3 = 0.369 > 0.25, and the model would fail.
    spec = experiment([{"model": "asyncio", "workers": [1000]}])
    outcomes = point(
        "asyncio", 1000,
        result(1000, x=9000, p99=0.104, p50=0.1, cpu_per_task=50e-6),
        result(1000, x=9100, p99=0.103, p50=0.1, cpu_per_task=50e-6),
        result(1000, x=2000, p99=0.9, p50=0.5, cpu_per_task=500e-6, rss=400 * MIB),
    )  # fmt: skip
    [asyncio] = plan_of(spec, outcomes)["models"]
    [alone] = plan_of(spec, outcomes[:1])["models"]
    assert asyncio["meets"] and asyncio == alone
    assert (asyncio["pods"], asyncio["memoryBytes"]) == (3, 3 * 80 * MIB)
    assert asyncio["ratePerPod"] == 9000.0 and asyncio["expectedCpuUtilization"] == 0.333


@pytest.mark.parametrize(
    ("rate", "pods", "basis"),
    [(5000, 1, "measured"), (9000, 1, "measured"), (9001, 2, "extrapolated")],
)
def test_one_pod_is_measured_more_are_extrapolated(rate: int, pods: int, basis: str) -> None:
    spec = experiment([{"model": "asyncio", "workers": [1000]}], TARGET | {"ratePerSecond": rate})
    outcomes = point("asyncio", 1000, result(1000, 9000, p99=0.104, p50=0.1, cpu_per_task=50e-6))
    plan = plan_of(spec, outcomes)
    [asyncio] = plan["models"]
    assert (asyncio["pods"], asyncio["basis"], plan["basis"]) == (pods, basis, basis)
    if basis == "measured":
        assert asyncio["note"] == "one Pod at or below the load measured at 1000 workers"
        assert plan["display"] == "1 Pod \u00d7 1 CPU, asyncio"
    else:
        assert asyncio["note"] == (
            "2 Pods from measurements of one Pod, assuming Pods add linearly (one trial is one Pod)"
        )
    assert plan["message"].endswith(f"; {basis}: {asyncio['note']}")


def test_sequential_runs_one_worker_per_pod_and_adds_pods_for_the_queue() -> None:
    # 10 tasks/s of a constant 100 ms, p99 <= 250ms: one sequential Pod measured X = 10/s,
    # so ceil(10 / 10) = 1 Pod would be busy all the time. One worker: C(1, a) = rho = 1 / pods,
    # mean wait rho·T / (1 - rho) / 2 (Pollaczek-Khinchine, cv² = 0), a waiting task waits
    # Exp(mean θ = T / (1 - rho) / 2), p99 = 0.1 + θ · ln(rho / 0.01):
    #   5 Pods: rho 0.2,  θ 0.0625:   0.1 + 0.0625 * ln(20) = 0.2872 > 0.25
    #   7 Pods: rho 1/7,  θ 0.05833:  0.1 + 0.05833 * ln(14.29) = 0.2551 > 0.25
    #   8 Pods: rho 1/8,  θ 0.05714:  0.1 + 0.05714 * ln(12.5) = 0.244327351 <= 0.25: 8 Pods
    target = {"ratePerSecond": 10, "latency": {"max": "250ms"}}
    spec = experiment([{"model": "sequential"}], target)
    measured = result(1, x=10, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
    plan = plan_of(spec, point("sequential", 0, measured))
    [sequential] = plan["models"]
    assert (sequential["pods"], sequential["workersPerPod"]) == (8, 1)
    assert sequential["expectedLatencySeconds"] == 0.244327351
    assert (sequential["expectedOccupancy"], sequential["expectedWaitProbability"]) == (
        0.125,
        0.125,
    )
    assert "(1 worker per Pod)" in plan["message"]


@pytest.mark.parametrize(("rate", "latency"), [(0.5, 0.1), (20000, 0.0)])
def test_a_pod_runs_at_least_one_worker(rate: float, latency: float) -> None:
    # a = 0.5 * 0.1 = 0.05 busy on average → 1 worker (C(1, 0.05) = 0.05); tasks below the
    # clock's resolution: a = 0 → still 1
    spec = experiment([{"model": "asyncio", "workers": [1000]}], TARGET | {"ratePerSecond": rate})
    measured = result(
        1000, 9000, p99=latency, p50=latency, cpu_per_task=5e-5, tasks=1000, service=[latency] * 100
    )
    outcomes = point("asyncio", 1000, measured)
    [asyncio] = plan_of(spec, outcomes)["models"]
    assert asyncio["workersPerPod"] == 1


def test_a_floats_last_digit_does_not_add_a_pod() -> None:
    # r = 0.7 / 200e-6 = 3499.9999999999995 in floating point; 7000 / r = 2.0000000000000004
    spec = experiment([{"model": "threads", "workers": [100]}], TARGET | {"ratePerSecond": 7000})
    outcomes = point("threads", 100, result(100, x=5000, p99=0.11, p50=0.1, cpu_per_task=200e-6))
    [threads] = plan_of(spec, outcomes)["models"]
    assert (threads["ratePerPod"], threads["pods"]) == (3500.0, 2)


def test_equal_rates_go_to_fewer_workers() -> None:
    spec = experiment([{"model": "asyncio", "workers": [2000, 1000]}])
    outcomes = [
        outcome
        for w in (2000, 1000)
        for outcome in point("asyncio", w, result(w, 9000, p99=0.104, p50=0.1, cpu_per_task=5e-5))
    ]
    assert plan_of(spec, outcomes)["models"][0]["workers"] == 1000


def test_a_plan_past_one_cluster_does_not_meet_the_target() -> None:
    # 1e9 / 1000 = 1,000,000 Pods: more than Kubernetes' 150,000 per cluster
    spec = experiment([{"model": "asyncio", "workers": [10]}], TARGET | {"ratePerSecond": 1e9})
    outcomes = point("asyncio", 10, result(10, 1000, p99=0.104, p50=0.01, cpu_per_task=50e-6))
    [asyncio] = plan_of(spec, outcomes)["models"]
    assert not asyncio["meets"] and asyncio["reason"] == (
        "needs more than 150,000 Pods (1,000 tasks/s each), the most Kubernetes supports in one "
        "cluster"
    )


def test_no_capacity_no_plan() -> None:
    spec = experiment([{"model": "asyncio", "workers": [1000]}], target=None)
    assert capacity_plan(spec, ASYNCIO) is None


def test_a_workload_without_rtt_plans_with_every_point_and_a_null_rtt() -> None:
    # cpu: r = min(2000, 0.7 / 500e-6 = 1400) = 1400 → pods = ceil(3000 / 1400) = 3
    workload = {"type": "cpu", "tasks": 1000, "iterations": 1000}
    target = {"ratePerSecond": 3000, "latency": {"max": "250ms"}}
    spec = experiment([{"model": "threads", "workers": [4]}], target, workload=workload)
    outcomes = point(
        "threads", 4, result(4, x=2000, p99=0.003, p50=0.002, cpu_per_task=500e-6), rtt=None
    )
    plan = plan_of(spec, outcomes)
    assert "rttSeconds" in plan and plan["rttSeconds"] is None  # null, not left out
    assert plan["pods"] == 3 and "(RTT" not in plan["message"]
    assert CapacityPlan.model_validate(plan).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    ) == {k: v for k, v in plan.items() if v is not None}


def test_every_plan_field_is_described_for_kubectl_explain() -> None:
    for shape in (CapacityPlan, ModelPlan):
        schema = shape.model_json_schema(by_alias=True)
        undescribed = [name for name, s in schema["properties"].items() if not s.get("description")]
        assert undescribed == [], shape.__name__


def _probe(index: int, rate: float, p99: float, service_seconds: float) -> TrialOutcome:
    trial = Trial(index, "asyncio", 4, None, 0.1, 1, 1, rate, probe=index)
    measured = arrival_result(rate, [service_seconds] * 100, [0.0] * 100)
    measured["latencySeconds"]["p99"] = p99
    assert measured["arrival"] is not None
    measured["arrival"]["achievedRatePerSecond"] = rate
    return TrialOutcome(trial, measured)


def test_the_plan_rests_on_the_searched_rate_and_quotes_it() -> None:
    """The plan once sized from whichever held probe needed the fewest workers (60/s, 100 ms
    each) and quoted it while searchedRatePerSecond said 70: now both are the search's
    rate, the interval's low end."""
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "searched"},
        "spec": {
            "workload": {"type": "sleep", "tasks": 400, "rtt": "100ms"},
            "models": [{"model": "asyncio", "workers": [4]}],
            "capacity": {"target": {"ratePerSecond": 60, "latency": {"max": "250ms"}}},
            "search": {"rate": {"start": 20, "duration": "5s", "repeats": 1}},
        },
    }  # fmt: skip
    spec = parse_experiment(document).spec
    sweep = [TrialOutcome(Trial(0, "asyncio", 4, None, 0.1, 1), result(
        4, x=40, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT))]  # fmt: skip
    probes = [_probe(1, 20, 0.11, 0.1), _probe(2, 40, 0.12, 0.1), _probe(3, 80, 0.9, 0.1),
              _probe(4, 60, 0.12, 0.1), _probe(5, 70, 0.2, 0.19)]  # fmt: skip
    plan = capacity_plan(spec, [*sweep, *probes])
    assert plan is not None
    [model] = plan.models
    assert model.searched_rate_per_second == 70.0
    assert model.note is not None and "the 70 tasks/s its rate search held" in model.note
    assert "the 70 tasks/s its rate search held" in plan.message
