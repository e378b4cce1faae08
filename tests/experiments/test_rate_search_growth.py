"""A rate search against a service subject whose generator is the bound (cxlab.experiments
.rate_search, through followups.trials_of, read by cxlab.analysis.rate_search): a probe whose
generator could not keep the rate, was on a full core, or had too few workers does not count;
its rate runs again with twice the Pods, up to search.rate.maxPods, and the probes after it
keep them. Checked on a grid of generator and service capacities by the definitions: the
interval the search reports is the one its counted probes give, every counted probe was
offered by Pods that could offer it, and a rate the generators cannot offer at maxPods ends
the search saying so."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from helpers.followups import checked, entries
from helpers.results import CONSTANT, result

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.rate_search import rate_searches
from cxlab.experiments.followups import trials_of
from cxlab.experiments.plan import Trial, plan_trials
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab_contract.histogram import quantile

HELD, BROKE = 0.12, 0.9  # p99 against the 250 ms objective


def spec_of(service: bool = True, **rate: Any) -> ExperimentSpec:
    search = {"start": 20, "duration": "5s", "latency": {"max": "250ms"}, "repeats": 2, **rate}
    subject = {
        "service": {
            "command": ["gunicorn", "httpbin:app"],
            "variants": {"named": [{"name": "sync-2", "args": ["-w", "2"]}]},
        }
    }
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "grown"},
        "spec": {
            **(subject if service else {}),
            "workload": {"type": "http", "target": {"url": "http://127.0.0.1:8000/delay/0.05"},
                         "arrival": {"ratePerSecond": 20, "duration": "5s"}},
            # 1 worker a Pod: fewer than the rate x the objective wherever a Pod is bound
            "models": [{"model": "asyncio", "workers": [1]}], "search": {"rate": search},
        },
    }  # fmt: skip
    return parse_experiment(document).spec


def saturated(trial: Trial) -> TrialOutcome:
    """A probe whose generator fell behind its schedule."""
    outcome = checked(trial, BROKE)
    assert outcome.result is not None and outcome.result["arrival"] is not None
    outcome.result["arrival"] |= {"generatorSaturated": True, "saturation": "lag p99 40ms"}
    return outcome


def queued(trial: Trial) -> TrialOutcome:
    """A probe the service answered in 100 ms whose tasks waited 0.5 s for a worker."""
    outcome = checked(trial, 0.6, waits=0.5)
    return outcome


def run(spec: ExperimentSpec, outcome: Callable[[Trial], TrialOutcome]) -> list[TrialOutcome]:
    """The search to its end, one probe at a time, each planned from those before."""
    measured = result(4, x=40, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
    done = [TrialOutcome(t, measured) for t in plan_trials(spec)]
    while True:
        names = {o.trial.name for o in done}
        waiting = [t for t in trials_of(spec, entries(done)).trials if t.name not in names]
        if not waiting:
            return [o for o in done if o.trial.probe]
        [probe] = waiting
        done.append(outcome(probe))


def test_the_helpers_outcomes_are_what_they_say() -> None:
    trial = Trial(1, "asyncio", 1, None, None, 1, 1, 40.0, probe=1)
    queue = queued(trial).result
    assert queue is not None and queue["arrival"] is not None
    assert quantile(queue["arrival"]["waitHistogram"], 0.99) == pytest.approx(0.5, rel=0.01)
    assert quantile(queue["arrival"]["serviceHistogram"], 0.99) == pytest.approx(0.1, rel=0.01)
    assert saturated(trial).result["arrival"]["generatorSaturated"]  # type: ignore[index]


@pytest.mark.parametrize("bound", [saturated, queued], ids=["saturated", "queued"])
def test_the_generator_grows_until_it_offers_the_rate_and_the_capacity_is_the_services(
    bound: Callable[[Trial], TrialOutcome],
) -> None:
    """Each generator Pod offers at most `offers` tasks/s, the service holds up to
    `capacity`: for every pair on the grid (the capacity within what 4 Pods offer) the
    search's interval is the one the counted probes give and holds the capacity, every
    counted probe's Pods could offer its rate, and each bound probe is followed by its rate
    with twice the Pods."""
    for offers in (7.0, 15.0, 30.0, 100.0):
        for capacity in (10.0, 25.0, 37.0, 55.0, 90.0):
            if capacity > 4 * offers:
                continue
            spec = spec_of(maxPods=4)

            def outcome(t: Trial, o: float = offers, c: float = capacity) -> TrialOutcome:
                rate = t.rate_per_second or 0.0
                if rate / t.pods > o:
                    return bound(t)
                return checked(t, HELD if rate <= c else BROKE)

            probes = run(spec, outcome)
            [search] = rate_searches(spec, probes)
            grid = (offers, capacity)
            counted = [o for o in probes if (o.trial.rate_per_second or 0) / o.trial.pods <= offers]
            rates = [o.trial.rate_per_second or 0.0 for o in counted]
            low = max((r for r in rates if r <= capacity), default=None)
            high = min((r for r in rates if r > capacity), default=None)
            assert (search.interval.low, search.interval.high) == (low, high), grid
            # the service's limit where a rate broke, else the generators'
            assert search.limit == ("service" if high else "generator"), (grid, search.message)
            if high is not None:
                assert low is None or low <= capacity < high, grid
            assert [p.generator_bound is not None for p in search.probes] == [
                o not in counted for o in probes
            ]
            pods = [o.trial.pods for o in probes]
            assert pods == sorted(pods) and set(pods) <= {1, 2, 4}, grid
            for before, after in itertools.pairwise(probes):
                if before not in counted and before.trial.pods < 4:  # again, twice the Pods
                    assert after.trial.rate_per_second == before.trial.rate_per_second
                    assert after.trial.pods == 2 * before.trial.pods, grid
            assert all(p.pods == o.trial.pods for p, o in zip(search.probes, probes, strict=True))


def test_a_rate_the_generators_cannot_offer_at_max_pods_bounds_the_search_saying_so() -> None:
    """A generator Pod offers 15/s, two at the most: the search finds the 30/s they offer
    (the service holds every rate), bisecting below the rates they cannot as below a rate
    that broke, and says whose limit it is."""
    spec = spec_of(maxPods=2)
    probes = run(spec, lambda t: saturated(t) if (t.rate_per_second or 0) / t.pods > 15
                 else checked(t, HELD))  # fmt: skip
    assert [(o.trial.rate_per_second, o.trial.pods) for o in probes] == [
        (20.0, 1),  # bound: again with 2 Pods
        (20.0, 2),  # held
        (40.0, 2),  # bound at maxPods: past what the generators offer
        (30.0, 2), (35.0, 2), (32.5, 2),  # bisected below 40: 30 held, 35 and 32.5 bound
        (30.0, 2),  # the boundary made sure of (32.5 is not the service's: not repeated)
    ]  # fmt: skip
    [search] = rate_searches(spec, probes)
    assert search.limit == "generator"
    assert (search.interval.low, search.interval.high) == (30.0, None)
    assert search.message == (
        "sync-2 / asyncio: held 30 tasks/s (2 probes); the generators cannot offer 32.5 "
        "tasks/s with 2 Pods (search.rate.maxPods): it could not keep the rate (lag p99 40ms); "
        "raise maxPods, or the model's workers or resources"
    )


def test_without_a_service_the_generator_is_the_subject_and_never_grows() -> None:
    spec = spec_of(service=False)
    probes = run(spec, lambda t: saturated(t) if (t.rate_per_second or 0) > 30
                 else checked(t, HELD))  # fmt: skip
    assert {o.trial.pods for o in probes} == {1}
    [search] = rate_searches(spec, probes)
    assert search.interval.high == 32.5 and search.limit is None  # the saturated counted


def test_a_probe_whose_trial_failed_measured_nothing_and_stops_its_line() -> None:
    """A grown probe whose second Pod was never placed (the start barrier timed out) is no
    answer of the service's: the line runs no probe after it, the bounds leave it out, and
    the answer says where it stopped and why."""
    spec = spec_of(maxPods=2)
    why = "not every Pod was ready at the start barrier within 40s: Pod 1 Pending"

    def outcome(trial: Trial) -> TrialOutcome:
        if trial.pods == 2:
            return TrialOutcome(trial, None, error=why)
        return queued(trial) if (trial.rate_per_second or 0) > 10 else checked(trial, HELD)

    probes = run(spec, outcome)
    # 20/s bound (1 worker < 20/s x 250 ms), again with 2 Pods: failed, and nothing after
    assert [(p.trial.rate_per_second, p.trial.pods) for p in probes] == [(20, 1), (20, 2)]
    [search] = rate_searches(spec, probes)
    assert search.probes[1].failed == why and search.probes[1].generator_bound is None
    assert search.interval.low is None and search.interval.high is None
    assert search.message.endswith(f"the search stopped at 20 tasks/s, whose probe measured "
                                   f"nothing: {why}"), search.message  # fmt: skip
