"""A rate search's probes (spec.search.rate), one line at a time (a model, or a service
variant and a model), each planned from the outcomes of those before it (pure: the same
entries give the same probes).

A probe at `start`; while probes hold, the next doubles the highest that held (up to
`max`), while none has, it halves the lowest that failed; once one held and one above it
failed, it bisects them until they are within `precision` or `maxProbes` rates were probed.
Then the boundary is made sure of: the highest rate that held and the lowest that failed are
probed until each has `repeats` probes, the first first. A rate holds only if every probe of
it held, so a repeat that breaks moves the boundary down, and the bisection goes on below it
(cxlab.analysis.rate_search.bounds: the interval and its noise). Each rate has at most
`repeats` probes: a search runs at most maxProbes x repeats. Against a service subject, a
probe its generator bound (it, not the service, broke the objective) does not count: its
rate runs again with twice the generator Pods, up to maxPods."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cxlab.analysis.rate_search import Bounds, bounds, searched_probe
from cxlab.analysis.sizing import plan_rtt
from cxlab.experiments.plan import Trial, trial_spec
from cxlab.experiments.record import outcomes_of
from cxlab.experiments.spec import ExperimentSpec, RateSearchSpec
from cxlab.experiments.spec.service import Variant
from cxlab.experiments.status import TrialEntry
from cxlab_contract import runner_contract
from cxlab_contract.durations import parse_duration

_LIMITS = runner_contract().limits
# A processes probe's pool when its workers list has only 0 (a fork per arrival is refused).
PROCESS_PROBE_WORKERS = 64


@dataclass(frozen=True)
class ProbedModel:
    """A model as the search probes it: its GOMAXPROCS, and its workers per probe."""

    model: str
    gomaxprocs: int | None
    workers: int


def grown_pods(spec: ExperimentSpec) -> int:
    """The most generator Pods a probe may grow to: search.rate.maxPods against a service
    (whose probes the generator may bind), else 1 (a search of the client never grows)."""
    rate = spec.search.rate if spec.search else None
    return rate.max_pods if rate is not None and spec.service is not None else 1


def probed_models(spec: ExperimentSpec) -> list[ProbedModel]:
    """Each model of the spec, in its order, with the workers its probes run: one for
    sequential; a worker per arrival (0) where its workers list has it, except processes
    (a fork per arrival); else its largest."""
    found = []
    for entry in spec.models:
        nonzero = [w for w in entry.workers if w > 0]
        if entry.model == "sequential":
            workers = 1
        elif 0 in entry.workers and entry.model != "processes":
            workers = 0
        else:
            workers = max(nonzero, default=PROCESS_PROBE_WORKERS)
        found += [ProbedModel(entry.model, g, workers) for g in entry.gomaxprocs_axis()]
    return found


def search_probes(
    spec: ExperimentSpec, model: ProbedModel, service: Variant | None, first: int,
    recorded: Mapping[str, TrialEntry],
) -> list[Trial]:  # fmt: skip
    """The line's probes so far, indexed from `first`: those recorded, and the next one if
    the search goes on (then it is last, and not recorded). Against a service, a probe the
    generator bound is run again at its rate with twice the Pods (up to search.rate.maxPods),
    and the probes after it keep them; a rate bound at maxPods cannot be offered: the search
    goes on below it as below search.rate.max. A probe whose trial ended without a Result
    (its Pods never placed, its runner failed) measured nothing: the line stops there."""
    assert spec.search is not None and spec.search.rate is not None
    rate = spec.search.rate
    probes: list[Trial] = []
    seen: list[tuple[float, bool]] = []
    unoffered: list[float] = []  # rates the generators could not offer at maxPods
    pods, again = 1, None
    while True:
        number = len(probes) + 1  # the line's probe: 1, 2, ...
        probe = _next_probe(spec, rate, seen, unoffered, model, service, first + number - 1,
                            number, pods, again)  # fmt: skip
        if probe is None:
            return probes
        probes.append(probe)
        entry = recorded.get(probe.name)
        if entry is None:
            return probes
        [outcome] = outcomes_of([probe], [entry])
        held = searched_probe(spec, outcome)
        again = None
        if held.failed is not None:  # it measured nothing: to go on would guess
            return probes
        if held.generator_bound is None:
            seen.append((probe.rate_per_second or 0.0, held.holds))
        elif pods >= rate.max_pods:
            unoffered.append(probe.rate_per_second or 0.0)
        else:
            pods, again = min(2 * pods, rate.max_pods), probe.rate_per_second


def _next_probe(
    spec: ExperimentSpec, search: RateSearchSpec, seen: list[tuple[float, bool]],
    unoffered: list[float],
    model: ProbedModel, service: Variant | None, index: int, number: int, pods: int,
    again: float | None,
) -> Trial | None:  # fmt: skip
    """The rate the generator bound again (with more Pods), else a new rate while the
    bisection has one (and maxProbes allows; a rate the generators cannot offer bounds it as
    one that broke would), else a repeat of the boundary (the rate that held first), else
    None: the search has ended."""
    found = bounds(seen)

    def probe(rate: float) -> Trial:
        return Trial(
            index, model.model, model.workers, model.gomaxprocs, plan_rtt(spec),
            found.counts.get(rate, 0) + 1, pods, rate, probe=number,
            service_variant=service.index if service else 0,
            service=service.name if service else "",
        )  # fmt: skip

    if again is not None:
        return probe(again)
    planning = bounds([*seen, *((r, False) for r in unoffered)])
    rate = next_rate(planning, search.precision, search.max) if planning.counts else search.start
    if rate is not None and len(planning.counts) < search.max_probes:
        trial = probe(float(rate))
        if cannot_probe(spec, trial) is None:
            return trial
    for boundary in (found.low, found.high):
        if (boundary is not None and boundary not in unoffered
                and found.counts[boundary] < search.repeats):  # fmt: skip
            return probe(boundary)
    return None


def next_rate(found: Bounds, precision: float, most: float | None = None) -> float | None:
    """The next new rate to probe, None when the bisection has found its interval (to 3
    figures); it doubles up to `most` at the most (search.rate.max), and a rate held there
    ends it."""
    low, high = found.low, found.high
    if most is not None and low is not None and low >= most:
        return None  # it held where it may go at the most
    if high is None:
        assert low is not None
        return _figures(low * 2) if most is None else min(_figures(low * 2), float(most))
    if low is None:
        return _figures(high / 2)
    if (high - low) / low <= precision:
        return None
    middle = _figures((low + high) / 2)
    return middle if low < middle < high else None


def _figures(rate: float) -> float:
    return float(f"{rate:.3g}")


def cannot_probe(spec: ExperimentSpec, trial: Trial) -> str | None:
    """Why no runner runs this probe (past a runner's rate or tasks): the search ends."""
    workload = trial_spec(spec, trial).workload
    assert workload.arrival is not None
    arrivals = (trial.rate_per_second or 0.0) * parse_duration(workload.arrival.duration or "0s")
    if (trial.rate_per_second or 0.0) > _LIMITS["rate"].max or arrivals > _LIMITS["tasks"].max:
        return "past what a runner issues"
    if (trial.rate_per_second or 0.0) < 1 / parse_duration(workload.arrival.duration or "1s"):
        return "under one arrival in the probe's duration"
    return None
