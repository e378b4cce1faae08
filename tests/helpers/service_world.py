"""A simulated gunicorn behind spec.service, for driving a whole experiment trial by trial
(followups.trials_of): its workers serve each request in SERVICE, its probes hold up to what
they carry, and its verifications hold exactly when the exact M/D/c of each replica
(helpers.mdc_exact, which shares nothing with the plan) keeps the objective at their
replicas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.service_figures import ServiceFigures
from cxlab.analysis.service_plan import ServicePlan, service_plan
from cxlab.experiments.followups import trials_of
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.service_run import copy_variants
from cxlab.experiments.spec import ExperimentSpec
from helpers.followups import entries
from helpers.mdc_exact import fewest_replicas
from helpers.results import arrival_result

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


def world(
    slower: float = 1.0, workers: dict[str, int] | None = None
) -> Callable[[ExperimentSpec, Trial], TrialOutcome]:
    """The simulated service: W workers of SERVICE a request per replica; a probe holds to
    the rate they carry (what a 10 s probe at 250 ms holds: the grace of its backlog), a
    verification when the exact M/D/W at its replicas keeps p99 <= OBJECTIVE with each
    request `slower` times SERVICE (the service slower under the whole rate than probed).
    `workers`: what each variant really runs (a Deployment changed since), by default what
    its name says."""
    running = WORKERS | (workers or {})

    def outcome(spec: ExperimentSpec, trial: Trial) -> TrialOutcome:
        variant = copy_variants(spec, [trial])[trial.service_variant]
        workers = running[variant.base.split("-cpu")[0]]
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
