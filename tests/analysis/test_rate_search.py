"""What a rate search reports (cxlab.analysis.rate_search): the bounds of a set of probes,
and against a service subject whose limit the boundary is: the service's (its CPU near its
cores, or its latency while its CPU had room), and which probes the generator bound (it
could not keep the rate, its own CPU was near its cores while the service had room, or its
workers were too few): those do not count, and at maxPods they bound the search, the
generators' limit, saying how much room the service had."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from helpers.followups import checked

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.rate_search import bounds, rate_searches
from cxlab.analysis.service_figures import ServiceFigures
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab_contract.histogram import build


def test_the_bounds_are_the_definitions() -> None:
    found = bounds([(100, True), (400, True), (200, False), (150, True), (150, True)])
    assert found.counts == {100: 1, 400: 1, 200: 1, 150: 2}
    assert (found.held, found.failed) == ((100, 150, 400), (200,))
    # the top is the lowest rate that broke; a hold above it is noise, not capacity
    assert (found.low, found.high, found.disagree) == (150, 200, (200, 400))
    mixed = bounds([(100, True), (100, False), (50, True)])  # 100 broke once: it does not hold
    assert (mixed.low, mixed.high, mixed.disagree) == (50, 100, None)
    assert bounds([(10, False)]).low is None and bounds([(10, True)]).high is None


def spec_of(service: bool = True, cpu: float | None = None) -> ExperimentSpec:
    subject = {
        "service": {
            "command": ["gunicorn", "httpbin:app"],
            "variants": {"named": [{"name": "sync-2", "args": ["-w", "2"]}]},
        }
    }
    document: dict[str, Any] = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "whose"},
        "spec": {
            "workload": {"type": "http", "target": {"url": "http://127.0.0.1:8000/delay/0.05"},
                         "arrival": {"ratePerSecond": 20, "duration": "5s"}},
            "models": [{"model": "asyncio", "workers": [64]}],
            "search": {"rate": {"repeats": 1, "latency": {"max": "250ms"}}},
            **(subject if service else {}),
            **({"resources": {"cpu": cpu}, "pinning": "preferred"} if cpu else {}),
        },
    }  # fmt: skip
    return parse_experiment(document).spec


def probe(index: int, rate: float, p99: float, cpu_share: float | None = None,
          generator_share: float = 0.2, saturated: bool = False,
          pods: int = 1) -> TrialOutcome:  # fmt: skip
    """A probe of sync-2 at `rate` over 5 s by `pods` generator Pods, the generator on one
    core busy `generator_share` of the time and the service's one core `cpu_share`."""
    trial = Trial(index, "asyncio", 64, None, None, 1, pods, rate, probe=index,
                  service_variant=1, service="sync-2")  # fmt: skip
    outcome = checked(trial, p99)
    assert outcome.result is not None and outcome.result["arrival"] is not None
    outcome.result["wallSeconds"] = 5.0
    outcome.result["cpus"] = [1]
    outcome.result["cpuUserSeconds"], outcome.result["cpuSystemSeconds"] = 5.0 * generator_share, 0
    if saturated:
        outcome.result["arrival"]["generatorSaturated"] = True
    figures = None
    if cpu_share is not None:
        figures = ServiceFigures(
            cpu_seconds=5.0 * cpu_share, cpu_per_request_seconds=0.002,
            peak_memory_bytes=70 * 2**20, restarts=0, samples=10, window_seconds=5.0, cores=1,
        )  # fmt: skip
    return replace(outcome, service=figures)


def test_a_latency_bound_service_with_room_on_its_core_is_the_services_limit() -> None:
    probes = [probe(1, 20, 0.06, 0.04), probe(2, 40, 0.9, 0.08), probe(3, 30, 0.07, 0.06)]
    [search] = rate_searches(spec_of(), probes)
    assert (search.rate_per_second, search.interval.low, search.interval.high) == (30, 30, 40)
    assert search.limit == "service" and search.service_cpu_share == 0.06
    assert search.service_cpu_per_request_seconds == 0.002
    assert search.service_peak_memory_bytes == 70 * 2**20
    # beside it the generator's: its CPU over its wall time on its one core, its Pods
    assert (search.generator_cpu_share, search.generator_pods) == (0.2, 1)
    assert search.message == (
        "sync-2 / asyncio: held 30 tasks/s (1 probe), broke at 40: between 30 and 40; the "
        "service's limit at 40 tasks/s: p99 900ms > 250ms (waits: mean 0s, p99 0s), its CPU 8% "
        "of its cores (not CPU-bound)"
    )


def test_a_service_whose_core_is_full_is_bound_by_its_cpu() -> None:
    probes = [probe(1, 400, 0.06, 0.5), probe(2, 800, 0.9, 0.97)]
    [search] = rate_searches(spec_of(), probes)
    assert search.limit == "service"
    assert search.message.endswith("the service's limit at 800 tasks/s: its CPU 97% of its cores")


def test_a_generator_that_cannot_keep_the_rate_does_not_count_and_at_max_pods_bounds_it() -> None:
    probes = [probe(1, 400, 0.06, 0.3), probe(2, 800, 0.06, 0.4, saturated=True)]
    [search] = rate_searches(spec_of(), probes)
    # below maxPods (4) the probe runs again with more Pods: no limit yet
    assert search.limit is None and search.interval.high is None
    assert search.probes[1].generator_bound == "it could not keep the rate (saturated)"
    assert search.probes[1].pods == 1
    grown = [*probes, probe(3, 800, 0.06, 0.4, saturated=True, pods=4)]
    [search] = rate_searches(spec_of(), grown)
    assert search.limit == "generator" and search.interval.high is None
    assert search.message == (
        "sync-2 / asyncio: held 400 tasks/s (1 probe); the generators cannot offer 800 tasks/s "
        "with 4 Pods (search.rate.maxPods): it could not keep the rate (saturated) (the service "
        "used 30% of its cores at 400 tasks/s); raise maxPods, or the model's workers or "
        "resources"
    )


def test_a_generator_on_a_full_core_beside_a_service_with_room_does_not_count() -> None:
    probes = [probe(1, 400, 0.06, 0.3, 0.5), probe(2, 800, 0.9, 0.45, generator_share=0.95)]
    [search] = rate_searches(spec_of(), probes)
    assert search.probes[1].generator_bound == "its CPU 95% of its cores"
    assert search.interval.high is None
    # beside a service whose own core is full, it is the service's
    busy = [probes[0], probe(2, 800, 0.9, 0.95, generator_share=0.95)]
    [search] = rate_searches(spec_of(), busy)
    assert search.limit == "service" and search.interval.high == 800
    assert search.probes[1].generator_bound is None


def test_a_generators_cores_are_no_more_than_its_pods_cpu_limits_allow() -> None:
    """On a cluster a trial Pod of resources.cpu 0.25 sees the node's 2 cores in its
    affinity, but its CFS quota lets it use a quarter of one: 0.24 s a second is 96 %."""
    busy = probe(2, 800, 0.9, 0.45, generator_share=0.24)
    assert busy.result is not None
    busy.result["cpus"] = [0, 1]
    [search] = rate_searches(spec_of(cpu=0.25), [probe(1, 400, 0.06, 0.3), busy])
    assert search.probes[1].generator_bound == "its CPU 96% of its cores"
    [search] = rate_searches(spec_of(), [probe(1, 400, 0.06, 0.3), busy])  # whole cores
    assert search.probes[1].generator_bound is None  # 12 % of 2 cores
    # two such Pods merged: their union is the node's 2 cores, their limits half of one
    grown = probe(3, 800, 0.9, 0.45, generator_share=0.48, pods=2)
    assert grown.result is not None
    grown.result["cpus"] = [0, 1]
    [search] = rate_searches(spec_of(cpu=0.25), [probe(1, 400, 0.06, 0.3), busy, grown])
    assert search.probes[2].generator_bound == "its CPU 96% of its cores"


def test_the_services_share_is_over_the_generators_run_not_its_whole_window() -> None:
    """A cluster's window also holds the trial Pods' start and end (here 5 s more), when the
    service idles: its CPU over the 5 s the generator ran."""
    full = probe(2, 800, 0.9, 0.96)
    assert full.service is not None
    longer = replace(full, service=full.service.model_copy(update={"window_seconds": 10.0}))
    [search] = rate_searches(spec_of(), [probe(1, 400, 0.06, 0.5), longer])
    assert search.limit == "service"
    assert search.message.endswith("its CPU 96% of its cores")


def test_a_generator_whose_workers_are_too_few_does_not_count() -> None:
    """The service answered in 100 ms, the tasks waited 0.5 s for one of 64 workers, fewer
    than the 800/s x 250 ms in flight that would show the service's own latency up to the
    objective."""
    queued = probe(2, 800, 0.6)
    assert queued.result is not None and queued.result["arrival"] is not None
    queued.result["arrival"]["waitHistogram"] = build([0.5] * 100)
    [search] = rate_searches(spec_of(), [probe(1, 400, 0.06), queued])
    assert search.probes[1].generator_bound == (
        "its workers were too few: 64 in all, under the rate x the objective (200); the "
        "service answered within p99 100ms, the wait for a worker (p99 500ms) broke it"
    )
    # as many workers as the rate x the objective: the service's
    many = replace(queued, trial=replace(queued.trial, workers=200))
    [search] = rate_searches(spec_of(), [probe(1, 400, 0.06), many])
    assert search.probes[1].generator_bound is None and search.limit == "service"
    # the same wait where the service's own answers broke the objective: the service's
    slow = probe(2, 800, 0.6)
    assert slow.result is not None and slow.result["arrival"] is not None
    slow.result["arrival"] |= {"waitHistogram": build([0.5] * 100),
                               "serviceHistogram": build([0.3] * 100)}  # fmt: skip
    [search] = rate_searches(spec_of(), [probe(1, 400, 0.06), slow])
    assert search.probes[1].generator_bound is None and search.limit == "service"


def test_without_a_service_subject_no_limit_is_named() -> None:
    probes = [probe(1, 20, 0.06), probe(2, 40, 0.9)]
    probes = [replace(o, trial=replace(o.trial, service_variant=0, service="")) for o in probes]
    [search] = rate_searches(spec_of(service=False), probes)
    assert search.limit is None and search.variant == "asyncio"
    assert search.message == "asyncio: held 20 tasks/s (1 probe), broke at 40: between 20 and 40"
