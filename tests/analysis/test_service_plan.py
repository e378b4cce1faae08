"""The service's capacity plan (cxlab.analysis.service_plan) from rate searches at several
replica counts: the replicas against the exact M/D/c queue of each replica (tests/helpers/
mdc_exact.py, which shares nothing with the plan's queueing model), the USL's parameters
against the points' closed form, the cost and the choice, and the Deployment patch and the
HorizontalPodAutoscaler it prints."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from helpers.mdc_exact import fewest_replicas
from helpers.results import arrival_result

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.service_figures import ServiceFigures
from cxlab.analysis.service_plan import MEMORY_MARGIN, ServicePlan, service_plan
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec

MIB = 2**20
SERVICE = 0.053  # gunicorn's sync worker on /delay/0.05: the wait and 3 ms of its own
OBJECTIVE = 0.2


def spec_of(variants: list[dict[str, Any]], replicas: list[int], **target: Any) -> ExperimentSpec:
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "plan"},
        "spec": {
            "service": {"deployment": "httpbin", "variants": {
                "named": variants, "replicas": replicas, "resources": [{"cpu": 0.25}]}},
            "workload": {"type": "http", "duration": "4s",
                         "target": {"service": {"name": "httpbin", "port": 80,
                                                "path": "/delay/0.05"}}},
            "models": [{"model": "asyncio", "workers": [64]}],
            "search": {"rate": {"repeats": 1, "latency": {"max": "250ms"}}},
            "capacity": {"target": {"ratePerSecond": 150, "latency": {"max": "200ms"},
                                    "maxWaitProbability": 1, **target}},
        },
    }  # fmt: skip
    return parse_experiment(document).spec


SYNC = [
    {"name": "sync-4", "args": ["--workers", "4"], "env": [{"name": "GUNICORN_CMD", "value": "x"}]},
    {"name": "sync-2", "args": ["--workers", "2"]},
]


def probes(
    variant: int, name: str, rates: list[tuple[float, bool]], first: int
) -> list[TrialOutcome]:
    """A variant's search: each rate held (every request SERVICE, none waits for a worker) or
    broke (a p99 of a second); the service used 2 ms of CPU a request and 70 MiB a replica."""
    replicas = int(name.split("-r")[1].split("-")[0])
    found = []
    for k, (rate, held) in enumerate(rates):
        trial = Trial(first + k, "asyncio", 64, None, None, 1, 1, rate, probe=first + k,
                      service_variant=variant, service=name)  # fmt: skip
        result = arrival_result(rate, [SERVICE] * 100, [0.0] * 100)
        result["arrival"]["achievedRatePerSecond"] = rate
        result["latencySeconds"]["p99"] = SERVICE if held else 1.0
        figures = ServiceFigures(
            cpu_seconds=4 * rate * 0.002, cpu_per_request_seconds=0.002,
            peak_memory_bytes=replicas * 70 * MIB, restarts=0, samples=8, window_seconds=4.0,
        )  # fmt: skip
        found.append(TrialOutcome(trial, result, service=figures))
    return found


def searched(spec: ExperimentSpec, capacities: dict[str, float]) -> list[TrialOutcome]:
    """Each variant's search holding at its capacity and breaking 10 % over it."""
    assert spec.service is not None
    outcomes: list[TrialOutcome] = []
    for variant in spec.service.variant_list():
        rate = capacities[variant.name]
        rates = [(rate / 2, True), (rate, True), (rate * 1.1, False)]
        outcomes += probes(variant.index, variant.name, rates, len(outcomes) + 1)
    return outcomes


def planned(spec: ExperimentSpec, outcomes: list[TrialOutcome]) -> ServicePlan:
    plan = service_plan(spec, outcomes, deployment="httpbin", container="httpbin")
    assert plan is not None
    return plan


def exact_replicas(rate: float, workers: int) -> int:
    """The fewest replicas of `workers` each, a Service spreading arrivals at random over them
    (each an M/D/c at rate / replicas), with p99 of wait + SERVICE within OBJECTIVE."""
    return fewest_replicas(rate, SERVICE, workers, 0.99, OBJECTIVE)


# What a 10 s probe at p99 <= 250 ms holds of W workers of 53 ms: W / 0.053 x 1.0197 (its
# backlog's grace), 77/s for 4; twice that with 2 replicas.
LINEAR = {
    "sync-4-r1-cpu0.25": 77.0, "sync-4-r2-cpu0.25": 154.0,
    "sync-2-r1-cpu0.25": 38.5, "sync-2-r2-cpu0.25": 77.0,
}  # fmt: skip


def test_replicas_agree_with_the_exact_m_d_c_of_each_replica_and_the_cheapest_is_chosen() -> None:
    spec = spec_of(SYNC, [1, 2])
    plan = planned(spec, searched(spec, LINEAR))
    four, two = plan.variants
    assert (four.variant, two.variant) == ("sync-4-cpu0.25", "sync-2-cpu0.25")
    # c by Little's law at one replica's searched rate: 77 x 0.053 / 1.0197 = 4.002, 2.001
    assert (four.concurrency, two.concurrency) == (4, 2)
    # Linear points: the USL through them has sigma = kappa = 0 and gamma one replica's rate.
    assert four.scalability is not None and four.scalability.sigma == pytest.approx(0, abs=1e-9)
    assert four.scalability.gamma == pytest.approx(77)
    # 150/s at p99 <= 200 ms: 3 replicas of 4 sync workers, exactly as the M/D/4 needs; 2
    # (75/s each, rho 0.99) do not hold.
    assert four.replicas == exact_replicas(150, 4) == 3
    # 2 workers a replica: 6 replicas exactly (25/s each); the plan's exponential wait tail
    # is longer than constant service's, and it errs one up, never down.
    assert exact_replicas(150, 2) == 6
    assert two.replicas in (6, 7)
    # The cost: replicas x 0.25 CPU; memory the peak a replica (70 MiB) plus the margin.
    assert four.cores == pytest.approx(0.75) and two.cores == pytest.approx(0.25 * two.replicas)
    per_replica = math.ceil(70 * MIB * (1 + MEMORY_MARGIN))
    assert four.memory_bytes_per_replica == per_replica
    assert four.memory_bytes == 3 * per_replica
    assert four.basis == "measured"  # 3 <= twice the 2 replicas measured
    assert (plan.choice, plan.replicas, plan.cores) == ("sync-4-cpu0.25", 3, 0.75)
    assert plan.display == "3 replicas \u00d7 0.25 CPU, sync-4-cpu0.25"


def test_the_patch_and_the_autoscaler_apply_the_choice() -> None:
    spec = spec_of(SYNC, [1, 2], peakRatePerSecond=300)
    plan = planned(spec, searched(spec, LINEAR))
    assert plan.deployment_patch is not None and plan.autoscaler is not None
    memory = f"{math.ceil(70 * (1 + MEMORY_MARGIN))}Mi"
    assert yaml.safe_load(plan.deployment_patch) == {"spec": {"replicas": 3, "template": {"spec": {
        "containers": [{
            "name": "httpbin",
            "resources": {"requests": {"cpu": "250m", "memory": memory},
                          "limits": {"cpu": "250m", "memory": memory}},
            "args": ["--workers", "4"],
            "env": [{"name": "GUNICORN_CMD", "value": "x"}],
        }]}}}}  # fmt: skip
    hpa = yaml.safe_load(plan.autoscaler)
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["kind"] == "HorizontalPodAutoscaler"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "httpbin",
    }
    # minReplicas for 150/s, maxReplicas for the peak's 300/s: the exact M/D/4 again
    assert hpa["spec"]["minReplicas"] == 3
    assert hpa["spec"]["maxReplicas"] == exact_replicas(300, 4)
    # 50/s a replica x 2 ms of CPU a request over its 0.25 CPU: 40 %
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"] == {
        "name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 40},
    }


def test_contention_measured_at_three_counts_costs_replicas_and_extrapolation_is_marked() -> None:
    # X(N) = 75 N / (1 + 0.1 (N - 1)): contention, no coherency cost
    spec = spec_of(SYNC[:1], [1, 2, 4], ratePerSecond=400)
    usl = {f"sync-4-r{n}-cpu0.25": 75 * n / (1 + 0.1 * (n - 1)) for n in (1, 2, 4)}
    plan = planned(spec, searched(spec, usl))
    (four,) = plan.variants
    assert four.scalability is not None
    assert four.scalability.sigma == pytest.approx(0.1, rel=1e-3)
    assert four.scalability.kappa == pytest.approx(0, abs=1e-5)
    # Linear replicas of 4 workers would carry 400/s with exact_replicas(400, 4) = 7; the
    # fleet carries X(N) >= 400 only from 75 N = 400 (1 + 0.1 (N - 1)), N = 10.3: 11.
    assert exact_replicas(400, 4) == 7
    assert four.replicas == 11
    assert four.basis == "extrapolated"  # more than twice the 4 measured
    assert "past twice the 4 measured" in (four.note or "")


def test_one_replica_count_is_planned_linearly_and_says_so() -> None:
    spec = spec_of(SYNC[:1], [1])
    plan = planned(spec, searched(spec, {"sync-4-r1-cpu0.25": 75.0}))
    (four,) = plan.variants
    assert four.scalability is None and four.replicas == 3
    assert "one replica count" in (four.note or "") and four.basis == "extrapolated"


def test_a_variant_whose_service_alone_breaks_the_objective_does_not_meet_it() -> None:
    spec = spec_of(SYNC[:1], [1], latency={"max": "50ms"})
    plan = planned(spec, searched(spec, {"sync-4-r1-cpu0.25": 75.0}))
    assert plan.choice is None and not plan.variants[0].meets
    assert "no replica count keeps p99 ≤ 50ms" in plan.message


def test_a_replicas_concurrency_is_littles_law_less_what_a_probe_holds_over_it() -> None:
    # 4 workers of 53 ms serve 75.5/s; a 10 s probe at p99 <= 250 ms holds up to 1.0197 x that
    # while its backlog grows (76.5/s: 4.05 requests at once by Little's law), and is 4.
    spec = spec_of(SYNC[:1], [1])
    plan = planned(spec, searched(spec, {"sync-4-r1-cpu0.25": 76.5}))
    assert plan.variants[0].concurrency == 4
    # 92/s, 4.78 requests at once: 5, whose M/G/5 at 53 ms would carry 94/s; its service is
    # stretched until 5 at once carry what one replica held (5 x 1.0197 / 92 = 55.4 ms)
    plan = planned(spec, searched(spec, {"sync-4-r1-cpu0.25": 92.0}))
    assert plan.variants[0].concurrency == 5
    assert plan.variants[0].holding_time_seconds == pytest.approx(SERVICE)
    # at 45/s on one replica the model's 5 workers are busy 45 x 55.4 ms / 5, not 45 x 53 / 5
    half = spec_of(SYNC[:1], [1], ratePerSecond=45)
    [one] = planned(half, searched(half, {"sync-4-r1-cpu0.25": 92.0})).variants
    assert one.replicas == 1
    assert one.expected_occupancy == pytest.approx(45 * (5 * 1.0197 / 92) / 5, abs=1e-3)
