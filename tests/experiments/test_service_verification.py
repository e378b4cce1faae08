"""A service plan's verification (followups.trials_of, folded in by cxlab.analysis.service_plan):
a whole experiment driven trial by trial against a simulated gunicorn whose workers serve
each request in SERVICE, its probes holding up to what its workers carry and its
verifications holding exactly when the exact M/D/c of each replica (tests/helpers/mdc_exact.py,
which shares nothing with the plan) keeps the objective at their replicas."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from helpers.followups import entries
from helpers.mdc_exact import fewest_replicas
from helpers.results import arrival_result

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.service_figures import ServiceFigures
from cxlab.analysis.service_plan import ServicePlan, service_plan
from cxlab.experiments.followups import trials_of
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.service_run import copy_indexes, copy_variants
from cxlab.experiments.spec import ExperimentSpec

SERVICE = 0.053  # gunicorn's sync worker on /delay/0.05
RATE, OBJECTIVE = 150.0, 0.2
WORKERS = {"sync-4": 4, "sync-2": 2}


def spec_of(verify: dict[str, Any], rate: float = RATE, workers: int = 64) -> ExperimentSpec:
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "verified"},
        "spec": {
            "service": {"deployment": "httpbin", "variants": {
                "named": [{"name": n, "args": ["--workers", str(w)]} for n, w in WORKERS.items()],
                "replicas": [1, 2], "resources": [{"cpu": 0.25}]}},
            "workload": {"type": "http", "duration": "4s",
                         "target": {"service": {"name": "httpbin", "port": 80,
                                                "path": "/delay/0.05"}}},
            "models": [{"model": "asyncio", "workers": [workers]}],
            "search": {"rate": {"repeats": 1, "duration": "10s", "latency": {"max": "250ms"}}},
            "capacity": {"target": {"ratePerSecond": rate, "latency": {"max": "200ms"},
                                    "maxWaitProbability": 1}, "verify": verify},
        },
    }  # fmt: skip
    return parse_experiment(document).spec


def served(trial: Trial, holds: bool) -> TrialOutcome:
    rate = trial.rate_per_second or 40.0  # a sweep trial's throughput
    result = arrival_result(rate, [SERVICE] * 100, [0.0] * 100)
    result["arrival"]["achievedRatePerSecond"] = rate
    result["latencySeconds"]["p99"] = SERVICE if holds else 1.0
    figures = ServiceFigures(
        cpu_seconds=4 * rate * 0.002, cpu_per_request_seconds=0.002, restarts=0, samples=8,
        window_seconds=4.0, peak_memory_bytes=70 * 2**20,
    )  # fmt: skip
    return TrialOutcome(trial, result, service=figures)


def world(slower: float = 1.0) -> Callable[[ExperimentSpec, Trial], TrialOutcome]:
    """The simulated service: W workers of SERVICE a request per replica; a probe holds to
    the rate they carry (what a 10 s probe at 250 ms holds: the grace of its backlog), a
    verification when the exact M/D/W at its replicas keeps p99 <= OBJECTIVE with each
    request `slower` times SERVICE (the service slower under the whole rate than probed)."""

    def outcome(spec: ExperimentSpec, trial: Trial) -> TrialOutcome:
        variant = copy_variants(spec, [trial])[trial.service_variant]
        workers = WORKERS[variant.base.split("-cpu")[0]]
        replicas = variant.replicas or 1
        rate = trial.rate_per_second or 0.0
        if trial.verify:
            needed = fewest_replicas(RATE, SERVICE * slower, workers, 0.99, OBJECTIVE)
            return served(trial, replicas >= needed)
        if not trial.probe:
            return served(trial, True)
        return served(trial, rate <= replicas * workers / SERVICE * (1 + 0.197 / 10))

    return outcome


def run(spec: ExperimentSpec, outcome: Callable[[ExperimentSpec, Trial], TrialOutcome]) -> tuple[
    list[TrialOutcome], str | None
]:  # fmt: skip
    """The experiment to its end, each trial planned from those before."""
    done: list[TrialOutcome] = []
    while True:
        names = {o.trial.name for o in done}
        followed = trials_of(spec, entries(done))
        waiting = [t for t in followed.trials if t.name not in names]
        if not waiting:
            return done, followed.unverified
        done.append(outcome(spec, waiting[0]))


def plan_of(spec: ExperimentSpec, done: list[TrialOutcome]) -> ServicePlan:
    plan = service_plan(spec, done, deployment="httpbin", container="httpbin")
    assert plan is not None
    return plan


def test_the_plan_runs_as_its_own_copy_and_holds_as_the_exact_m_d_c_says() -> None:
    spec = spec_of({"duration": "20s", "fewer": True})
    done, unverified = run(spec, world())
    checks = [o.trial for o in done if o.trial.verify]
    # the plan's 3 replicas of sync-4 (the exact M/D/4 of 150/s over them holds; 2 do not),
    # then one fewer: its copies are the 5th and the 7th, past the 4 variants
    assert [(t.verify, t.service_replicas) for t in checks] == [(1, 3), (4, 2)]
    assert fewest_replicas(RATE, SERVICE, 4, 0.99, OBJECTIVE) == 3
    assert [t.service_variant for t in checks] == [5, 8]
    assert copy_indexes(spec) == list(range(1, 9))
    copy = copy_variants(spec, checks)[5]
    assert (copy.name, copy.replicas, copy.cpu, copy.args) == (
        "sync-4-cpu0.25-r3", 3, 0.25, ("--workers", "4"),
    )  # fmt: skip
    # at 150/s from probes one asyncio Pod offered up to 170/s: one generator Pod
    assert all(t.pods == 1 and t.rate_per_second == RATE for t in checks)
    assert unverified is None
    plan = plan_of(spec, done)
    assert (plan.choice, plan.replicas, plan.basis) == ("sync-4-cpu0.25", 3, "verified")
    assert plan.verification is not None and plan.verification[0].replicas == 3
    assert plan.fewer is not None and not plan.fewer.holds and plan.fewer.replicas == 2
    assert "2 replicas fell short" in plan.message and "the fewest" in plan.message


def test_refuted_the_next_attempt_has_a_replica_more_and_the_plan_shown_is_it() -> None:
    spec = spec_of({"duration": "20s", "fewer": True})
    slower = 1.3  # 69 ms a request under the whole rate: 3 replicas are too few
    needed = fewest_replicas(RATE, SERVICE * slower, 4, 0.99, OBJECTIVE)
    assert needed == 4
    done, _ = run(spec, world(slower))
    checks = [o.trial for o in done if o.trial.verify]
    assert [(t.verify, t.service_replicas) for t in checks] == [(1, 3), (2, 4)]  # none fewer
    plan = plan_of(spec, done)
    assert (plan.replicas, plan.basis) == (4, "verified")
    assert "verified after 2 attempts" in plan.message
    assert plan.deployment_patch is not None and "replicas: 4" in plan.deployment_patch
    assert plan.autoscaler is not None and "minReplicas: 4" in plan.autoscaler
    [four] = [v for v in plan.variants if v.variant == plan.choice]
    assert four.replicas == 4 and four.basis == "verified"


def test_refuted_at_every_attempt_the_plan_says_so_with_the_last() -> None:
    spec = spec_of({"duration": "20s", "maxAttempts": 2})
    done, _ = run(spec, world(2.0))
    plan = plan_of(spec, done)
    assert plan.basis == "refuted" and plan.replicas == 4
    assert plan.verification is not None and len(plan.verification) == 2
    assert "refuted after 2 attempts: 4 replicas, " in plan.message


def test_the_generator_pods_cover_the_rate_at_what_one_offered() -> None:
    # 600/s: no probe offered more than 1.1 x the 2 replicas' 154/s from one Pod, so the
    # verification runs as many Pods as that rate a Pod takes (search.rate.maxPods at most)
    spec = spec_of({"duration": "5s"}, rate=600)
    done, _ = run(spec, world())
    [first, *_] = [o.trial for o in done if o.trial.verify]
    probes = [o for o in done if o.trial.probe and o.trial.model == "asyncio"]
    fastest = max(o.trial.rate_per_second or 0.0 for o in probes)
    assert first.pods == math.ceil(600 / fastest)
    assert first.pods > 1


def test_the_generator_pods_hold_every_request_in_flight_at_the_objective() -> None:
    # 4 workers a Pod: 150/s answered within 200 ms keeps up to 30 in flight (Little's law),
    # 8 Pods' worth, of which search.rate.maxPods (4) at most
    spec = spec_of({"duration": "5s"}, workers=4)
    done, _ = run(spec, world())
    [first, *_] = [o.trial for o in done if o.trial.verify]
    assert (first.workers, first.pods) == (4, 4)
