"""A rate search's probes (cxlab.experiments.rate_search, through followups.trials_of): the
bisection, the boundary's repeats, and what the search reports (cxlab.analysis.rate_search),
checked against exact enumerations — every capacity of a grid for outcomes monotone in the
rate, and every sequence of outcomes a small search can meet — not against a second copy of
the algorithm: the checks are the definitions (a rate holds when every probe of it held; the
interval's top is the lowest rate that broke; noisy when a probe held above a rate that
broke)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from helpers.followups import checked, entries
from helpers.results import CONSTANT, result

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.rate_search import bounds, rate_searches
from cxlab.experiments.followups import trials_of
from cxlab.experiments.plan import Trial, plan_trials
from cxlab.experiments.rate_search import next_rate
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec

OBJECTIVE = 0.25  # p99 at most 250 ms
# Holds: p99 well under the objective; broke: well over it.
HELD, BROKE = 0.12, 0.9


def spec_of(**rate: Any) -> ExperimentSpec:
    search = {"start": 20, "duration": "5s", "latency": {"max": "250ms"}, **rate}
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "search"},
        "spec": {
            "workload": {"type": "sleep", "tasks": 400, "rtt": "100ms"},
            "models": [{"model": "asyncio", "workers": [4]}], "search": {"rate": search},
        },
    }  # fmt: skip
    return parse_experiment(document).spec


def swept(spec: ExperimentSpec) -> list[TrialOutcome]:
    measured = result(4, x=40, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
    return [TrialOutcome(t, measured) for t in plan_trials(spec)]


def run(spec: ExperimentSpec, holds: Callable[[Trial], bool]) -> list[TrialOutcome]:
    """The search to its end, one probe at a time, each planned from those before (as both
    backends do), with `holds` deciding each probe; the probes' outcomes in order."""
    done = swept(spec)
    while True:
        names = {o.trial.name for o in done}
        waiting = [t for t in trials_of(spec, entries(done)).trials if t.name not in names]
        if not waiting:
            return [o for o in done if o.trial.probe]
        [probe] = waiting  # one at a time
        done.append(checked(probe, HELD if holds(probe) else BROKE))


def test_the_next_rate_doubles_halves_then_bisects_to_the_precision() -> None:
    def after(held: list[float], failed: list[float], *args: Any, **kwargs: Any) -> float | None:
        return next_rate(bounds([(r, True) for r in held] + [(r, False) for r in failed]),
                         *args, **kwargs)  # fmt: skip

    assert after([100], [], 0.1) == 200  # held: double
    assert after([], [100], 0.1) == 50  # failed: halve
    assert after([], [100, 50], 0.1) == 25
    assert after([100, 200], [400], 0.1) == 300  # between 200 held and 400 failed
    assert after([100, 200, 300, 350], [400], 0.1) == 375  # (400 - 350) / 350 = 0.14
    assert after([100, 200, 300, 350, 375], [400], 0.1) is None  # 0.067 <= 0.1
    assert after([1000], [1001], 0.0001) is None  # no rate of 3 figures between them
    assert after([100], [], 0.1, most=150) == 150  # doubling would pass it: the most
    assert after([100, 150], [], 0.1, most=150) is None  # held at the most: found
    assert after([100], [150], 0.1, most=150) == 125  # below it a failure bisects as ever
    # a hold above a break is noise: the bisection stays below the break
    assert after([100, 400], [200], 0.1) == 150


# Capacities on a grid from under the first probe to past what 8 doublings reach.
CAPACITIES = [round(1.37**k, 2) for k in range(0, 26)]


@pytest.mark.parametrize("repeats", [1, 3])
def test_with_monotone_outcomes_the_interval_holds_the_capacity(repeats: int) -> None:
    """Outcomes monotone in the rate (a probe holds iff its rate is at most the capacity):
    for every capacity of the grid the interval is exactly the highest rate probed at or
    under it and the lowest probed over it, each probed `repeats` times, never noisy, and
    either within the precision or at maxProbes rates."""
    for capacity in CAPACITIES:
        spec = spec_of(repeats=repeats, precision=0.1, maxProbes=8)
        probes = run(spec, lambda t, c=capacity: (t.rate_per_second or 0) <= c)
        [search] = rate_searches(spec, probes)
        rates = [o.trial.rate_per_second or 0.0 for o in probes]
        under, over = [r for r in rates if r <= capacity], [r for r in rates if r > capacity]
        low, high = max(under, default=None), min(over, default=None)
        assert (search.interval.low, search.interval.high) == (low, high), capacity
        assert search.rate_per_second == low and not search.noisy
        assert len(set(rates)) <= 8 and len(rates) <= 8 * repeats
        for boundary in (low, high):
            if boundary is not None:
                assert rates.count(boundary) == repeats, (capacity, rates)
        if low is not None and high is not None and len(set(rates)) < 8:
            assert (high - low) / low <= 0.1 or f"{(low + high) / 2:.3g}" in (
                f"{low:.3g}",
                f"{high:.3g}",
            )


def _every_outcome_sequence(max_probes: int, repeats: int) -> list[list[TrialOutcome]]:
    """The searches of every sequence of outcomes, each probe's outcome chosen both ways
    (a depth-first walk of all of them: the search decides the next rate from the outcomes
    before it)."""
    spec = spec_of(repeats=repeats, maxProbes=max_probes, precision=0.1)
    sweep = swept(spec)
    found: list[list[TrialOutcome]] = []

    def walk(done: list[TrialOutcome]) -> None:
        names = {o.trial.name for o in done}
        waiting = [t for t in trials_of(spec, entries(done)).trials if t.name not in names]
        if not waiting:
            found.append([o for o in done if o.trial.probe])
            return
        [probe] = waiting
        for p99 in (HELD, BROKE):
            walk([*done, checked(probe, p99)])

    walk(sweep)
    return found


def test_every_outcome_sequence_gives_the_interval_and_noise_by_their_definitions() -> None:
    spec = spec_of(repeats=3, maxProbes=5, precision=0.1)
    searches = _every_outcome_sequence(5, 3)
    assert len(searches) > 500
    noisy = 0
    for probes in searches:
        seen = [(o.trial.rate_per_second or 0.0, o.result is not None and
                 o.result["latencySeconds"]["p99"] <= OBJECTIVE) for o in probes]  # fmt: skip
        [search] = rate_searches(spec, probes)
        broke = [r for r, ok in seen if not ok]
        high = min(broke, default=None)
        always = {r for r, _ in seen if all(ok for s, ok in seen if s == r)}
        low = max((r for r in always if high is None or r < high), default=None)
        assert (search.interval.low, search.interval.high) == (low, high)
        lucky = [r for r, ok in seen if ok and high is not None and r > high]
        assert search.noisy == bool(lucky)
        noisy += bool(lucky)
        if lucky:
            assert search.spread is not None
            assert (search.spread.low, search.spread.high) == (high, max(lucky))
            assert "noisy" in search.message
        rates = [r for r, _ in seen]
        assert len(set(rates)) <= 5 and all(rates.count(r) <= 3 for r in rates)
        for boundary in (low, high):  # the search ended with its boundary sure
            if boundary is not None:
                assert rates.count(boundary) == 3
        # the names are a function of the entries: planned again, the same trials
        again = [t for t in trials_of(spec, entries([*swept(spec), *probes])).trials if t.probe]
        assert again == [o.trial for o in probes]
    assert 0 < noisy < len(searches)


def test_one_lucky_probe_does_not_make_a_capacity() -> None:
    """40/s holds on its first probe and breaks on its repeat: it does not hold, and the
    search goes on below it."""
    spec = spec_of(repeats=2, maxProbes=6, precision=0.1)

    def holds(trial: Trial) -> bool:
        rate = trial.rate_per_second or 0.0
        return rate <= 30 or (rate == 40 and trial.repetition == 1)

    probes = run(spec, holds)
    [search] = rate_searches(spec, probes)
    assert [(o.trial.rate_per_second, o.trial.repetition) for o in probes] == [
        (20.0, 1), (40.0, 1), (80.0, 1), (60.0, 1), (50.0, 1), (45.0, 1),  # 6 rates, 40 held
        (40.0, 2),  # its repeat broke: 40 does not hold, and no new rate is left to probe
        (20.0, 2),  # so 20 is the boundary, and is made sure of
    ]  # fmt: skip
    assert (search.interval.low, search.interval.high, search.rate_per_second) == (20, 40, 20)
    assert not search.noisy  # at one rate, held and broke: not a higher rate holding
    assert search.message.startswith("asyncio: held 20 tasks/s (2 probes), broke at 40")


def test_a_higher_rate_holding_where_a_lower_broke_is_noisy_with_its_spread() -> None:
    """50/s and 55/s hold on their first probes and break on their repeats: 50 is the
    interval's top, and the probe that held at 55 above it makes the search noisy."""
    spec = spec_of(repeats=2, maxProbes=8, precision=0.1)

    def holds(trial: Trial) -> bool:
        rate = trial.rate_per_second or 0.0
        return rate < 60 and not (rate in (50, 55) and trial.repetition > 1)

    probes = run(spec, holds)
    [search] = rate_searches(spec, probes)
    assert [(o.trial.rate_per_second, o.trial.repetition) for o in probes] == [
        (20.0, 1), (40.0, 1), (80.0, 1), (60.0, 1), (50.0, 1), (55.0, 1),
        (55.0, 2),  # broke: 55 does not hold, 50 is the boundary
        (50.0, 2),  # broke too: the bisection goes on below 50
        (45.0, 1), (47.5, 1), (47.5, 2),
    ]  # fmt: skip
    assert (search.interval.low, search.interval.high) == (47.5, 50.0)
    assert search.noisy and search.spread is not None
    assert (search.spread.low, search.spread.high) == (50.0, 55.0)
    assert "noisy: a probe held at 55 above the 50 that broke" in search.message


def test_every_probe_of_a_sequence_is_planned_once() -> None:
    for probes in _every_outcome_sequence(3, 2):
        names = [o.trial.name for o in probes]
        assert len(names) == len(set(names))
        assert [o.trial.index for o in probes] == list(range(1, len(probes) + 1))
        assert all(o.trial.probe == k for k, o in enumerate(probes, 1))


def test_its_bound_is_max_probes_times_repeats() -> None:
    for max_probes, repeats in itertools.product([1, 2, 3], [1, 2, 3]):
        spec = spec_of(repeats=repeats, maxProbes=max_probes, precision=0.01)
        # every repeat at the boundary breaks: the boundary keeps moving down
        probes = run(spec, lambda t: t.repetition == 1)
        assert len(probes) <= max_probes * repeats
