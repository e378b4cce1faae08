"""A rate search's probes read (spec.search.rate), per line (a model, or a service variant
and a model): the rates that held (every probe of them), the interval the rate that holds
lies in, whether the outcomes are monotone in the rate (`noisy` when a higher rate held
where a lower one broke, with the rates they disagree between), and against a service
subject whose limit the boundary is, the service's or the generator's. Pure: the search's
next probe (cxlab.experiments.rate_search) is planned from the same bounds.

The interval is conservative: its top is the lowest rate any probe broke, its bottom the
highest rate below that every probe of which held; a lucky hold above a break is noise, not
capacity."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cxlab.analysis.capacity_plan import Probe
from cxlab.analysis.labels import rate_text
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.verification import probe_of
from cxlab.experiments.spec import ExperimentSpec
from cxlab.shape import Maybe, Shape

# A share of its cores at or over this, the service's (or the generator's) CPU is its bound.
BUSY_SHARE = 0.9


@dataclass(frozen=True)
class Bounds:
    """What a search's probes so far say: probes per rate, and the interval."""

    counts: dict[float, int] = field(default_factory=dict)
    held: tuple[float, ...] = ()  # rates every probe of which held, ascending
    failed: tuple[float, ...] = ()  # rates a probe of which did not, ascending
    low: float | None = None  # the highest rate that held below every rate that failed
    high: float | None = None  # the lowest rate that failed
    # Not monotone: (the lowest rate that failed, the highest rate above it a probe held at).
    disagree: tuple[float, float] | None = None


def bounds(probes: Iterable[tuple[float, bool]]) -> Bounds:
    """The bounds of probes given as (rate, held)."""
    outcomes: dict[float, list[bool]] = {}
    for rate, holds in probes:
        outcomes.setdefault(rate, []).append(holds)
    held = tuple(sorted(r for r, o in outcomes.items() if all(o)))
    failed = tuple(sorted(r for r, o in outcomes.items() if not all(o)))
    high = failed[0] if failed else None
    low = max((r for r in held if high is None or r < high), default=None)
    lucky = [r for r, o in outcomes.items() if any(o) and high is not None and r > high]
    disagree = (high, max(lucky)) if high is not None and lucky else None
    counts = {r: len(o) for r, o in outcomes.items()}
    return Bounds(counts, held, failed, low, high, disagree)


class RateInterval(Shape):
    """Where the rate that holds lies, tasks per second for one Pod."""

    low: Maybe[float] = None
    """The highest rate every probe of which held, below every rate that broke (the searched
    rate); absent when none held."""
    high: Maybe[float] = None
    """The lowest rate a probe broke at; absent when none did."""


class RateSearch(Shape):
    """One line's rate search (status.rateSearch): its searched rate, how sure it is, and
    whose limit it is."""

    variant: str
    """The line: a model, or a service variant and a model ("sync-2 / asyncio")."""
    rate_per_second: Maybe[float] = None
    """The searched rate: interval.low, the rate a plan uses; absent when no rate held."""
    interval: RateInterval
    """The rate that holds lies in [low, high)."""
    noisy: bool
    """The outcomes are not monotone in the rate: a higher rate held where a lower one
    broke."""
    spread: Maybe[RateInterval] = None
    """When noisy: the rates the outcomes disagree between (the lowest that broke, the
    highest that held above it)."""
    limit: Maybe[str] = None
    """Against a service subject, whose limit the boundary is: service or generator."""
    service_cpu_share: Maybe[float] = None
    """The share of its cores the service used at the searched rate (the median probe)."""
    service_cpu_per_request_seconds: Maybe[float] = None
    """The service's CPU per request at the searched rate."""
    service_peak_memory_bytes: Maybe[int] = None
    """The service's peak memory at the searched rate."""
    message: str
    """The search's answer in a sentence."""
    probes: list[Probe]
    """Its probes, in the order they ran."""


def rate_searches(spec: ExperimentSpec, outcomes: Sequence[TrialOutcome]) -> list[RateSearch]:
    """Every line's search, in the order the lines first probed (none: no search)."""
    if spec.search is None or spec.search.rate is None:
        return []
    lines: dict[str, list[TrialOutcome]] = {}
    for outcome in sorted((o for o in outcomes if o.trial.probe), key=lambda o: o.trial.index):
        lines.setdefault(outcome.trial.variant, []).append(outcome)
    return [_search(spec, variant, probed) for variant, probed in lines.items()]


def _search(spec: ExperimentSpec, variant: str, probed: list[TrialOutcome]) -> RateSearch:
    probes = [probe_of(spec, o) for o in probed]
    found = bounds((p.rate_per_second, p.holds) for p in probes)
    spread = None
    if found.disagree is not None:
        spread = RateInterval(low=found.disagree[0], high=found.disagree[1])
    search = RateSearch(
        variant=variant, rate_per_second=found.low,
        interval=RateInterval(low=found.low, high=found.high), noisy=spread is not None,
        spread=spread, message="", probes=probes,
    )  # fmt: skip
    # the probes at the searched rate that measured the service's CPU (a cluster's window
    # may lack it): the median one's figures
    at_low = [
        o for o in probed
        if o.trial.rate_per_second == found.low and o.service and o.service.cpu_seconds is not None
    ]  # fmt: skip
    if at_low:
        middle = sorted(at_low, key=lambda o: o.service.cpu_seconds or 0.0 if o.service else 0.0)
        figures = middle[len(middle) // 2].service
        assert figures is not None
        share = figures.cpu_share
        search.service_cpu_share = None if share is None else round(share, 3)
        search.service_cpu_per_request_seconds = figures.cpu_per_request_seconds
        search.service_peak_memory_bytes = figures.peak_memory_bytes
    search.limit, whose = _whose_limit(spec, found, probed, probes, search.service_cpu_share)
    search.message = _message(spec, search, found, whose)
    return search


def _message(spec: ExperimentSpec, search: RateSearch, found: Bounds, whose: str) -> str:
    """The answer: the rate that held, its interval and repeats, its noise, whose limit."""
    rate = spec.search.rate if spec.search else None
    assert rate is not None
    if found.low is None:
        text = "no rate held"
        if found.high is not None:
            text += f" (the lowest probed, {rate_text(found.high)} tasks/s, broke)"
    else:
        text = f"held {rate_text(found.low)} tasks/s"
        times = found.counts.get(found.low, 0)
        text += f" ({times} probe{'s' if times != 1 else ''})"
        if found.high is not None:
            text += f", broke at {rate_text(found.high)}: between {rate_text(found.low)} and "
            text += f"{rate_text(found.high)}"
        elif rate.max is not None and found.low >= rate.max:
            text += ", search.rate.max: no higher rate tried"
        else:
            text += ", no rate above it broke within search.rate.maxProbes"
    if search.spread is not None:
        text += (
            f"; noisy: a probe held at {rate_text(search.spread.high or 0.0)} above the "
            f"{rate_text(search.spread.low or 0.0)} that broke"
        )
    return f"{search.variant}: {text}" + (f"; {whose}" if whose else "")


def _whose_limit(
    spec: ExperimentSpec, found: Bounds, probed: list[TrialOutcome], probes: list[Probe],
    service_share: float | None,
) -> tuple[str | None, str]:  # fmt: skip
    """Against a service subject, whose limit broke the lowest rate that failed, and why in
    words: the generator's when it could not keep the rate or its CPU was near its cores
    while the service had room, else the service's (its CPU, its failures or its latency)."""
    if spec.service is None or found.high is None:
        return None, ""
    broke = [(o, p) for o, p in zip(probed, probes, strict=True)
             if p.rate_per_second == found.high and not p.holds]  # fmt: skip
    outcome, probe = broke[0]
    room = _room(service_share, found.low)
    service = outcome.service.cpu_share if outcome.service else None
    generator = generator_cpu_share(outcome)
    at = f"at {rate_text(found.high)} tasks/s"
    if probe.generator_saturated:
        return "generator", f"the generator's limit {at}: it could not keep the rate{room}"
    if generator is not None and generator >= BUSY_SHARE and (service or 0.0) < BUSY_SHARE:
        return "generator", (
            f"the generator's limit {at}: its CPU {generator:.0%} of its cores{room}"
        )
    if service is not None and service >= BUSY_SHARE:
        return "service", f"the service's limit {at}: its CPU {service:.0%} of its cores"
    # the shortfall without its "1 Pod x 64 workers at 40 tasks/s: "
    why = (probe.shortfall or "").partition(" tasks/s: ")[2] or "it broke"
    cpu = "" if service is None else f", its CPU {service:.0%} of its cores (not CPU-bound)"
    return "service", f"the service's limit {at}: {why}{cpu}"


def _room(share: float | None, low: float | None) -> str:
    """How much room the service had at the searched rate, in words."""
    if share is None:
        return ""
    at = f" at {rate_text(low)} tasks/s" if low is not None else ""
    return f" (the service used {share:.0%} of its cores{at})"


def generator_cpu_share(outcome: TrialOutcome) -> float | None:
    """The share of its cores the generator used (its Result's CPU over its wall time)."""
    result = outcome.result
    cpus = result.get("cpus") if result is not None else None
    if result is None or not cpus or result["wallSeconds"] <= 0:
        return None
    cpu = result["cpuUserSeconds"] + result["cpuSystemSeconds"]
    return cpu / (result["wallSeconds"] * len(cpus))
