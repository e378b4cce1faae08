"""A rate search's probes read (spec.search.rate), per line (a model, or a service variant
and a model): the rates that held (every probe of them), the interval the rate that holds
lies in, whether the outcomes are monotone in the rate (`noisy` when a higher rate held
where a lower one broke, with the rates they disagree between), and against a service
subject whose limit the boundary is, the service's or the generator's. Against a service a
probe the generator bound (generator_bound) does not count: its rate runs again with more
generator Pods. Pure: the search's next probe (cxlab.experiments.rate_search) is planned
from the same reading.

The interval is conservative: its top is the lowest rate any probe broke, its bottom the
highest rate below that every probe of which held; a lucky hold above a break is noise, not
capacity."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cxlab.analysis.capacity_plan import Probe
from cxlab.analysis.labels import rate_text
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.service_figures import cpu_share
from cxlab.analysis.sizing import FRACTION
from cxlab.analysis.verification import probe_of
from cxlab.experiments.spec import ExperimentSpec
from cxlab.shape import Maybe, Shape
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.histogram import quantile

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
    generator_cpu_share: Maybe[float] = None
    """The share of its cores the generator used at the searched rate (the median probe),
    beside the service's."""
    generator_pods: Maybe[int] = None
    """The generator Pods that offered the searched rate (grown when the generator bound a
    probe: search.rate.maxPods)."""
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


def searched_probe(spec: ExperimentSpec, outcome: TrialOutcome) -> Probe:
    """A probe as the search reads it: held or not, its Pods, and against a service subject
    whether the generator bound it (then it does not count)."""
    probe = probe_of(spec, outcome)
    probe.pods = outcome.trial.pods
    if outcome.result is None:
        probe.failed = outcome.error or outcome.skipped or "its trial has no Result"
        return probe
    probe.generator_bound = generator_bound(spec, outcome, probe)
    return probe


def counted(probes: Iterable[Probe]) -> list[tuple[float, bool]]:
    """The (rate, held) of the probes that measured the subject, for bounds()."""
    return [(p.rate_per_second, p.holds) for p in probes if p.measured]


def _search(spec: ExperimentSpec, variant: str, probed: list[TrialOutcome]) -> RateSearch:
    probes = [searched_probe(spec, o) for o in probed]
    found = bounds(counted(probes))
    spread = None
    if found.disagree is not None:
        spread = RateInterval(low=found.disagree[0], high=found.disagree[1])
    search = RateSearch(
        variant=variant, rate_per_second=found.low,
        interval=RateInterval(low=found.low, high=found.high), noisy=spread is not None,
        spread=spread, message="", probes=probes,
    )  # fmt: skip
    # the probes counted at the searched rate: the generator's CPU and Pods there, and of
    # those that measured the service's CPU (a cluster's window may lack it) the median one's
    at_rate = [
        o for o, p in zip(probed, probes, strict=True)
        if o.trial.rate_per_second == found.low and p.measured
    ]  # fmt: skip
    shares = sorted(s for o in at_rate if (s := generator_cpu_share(spec, o)) is not None)
    if shares:
        search.generator_cpu_share = round(shares[len(shares) // 2], 3)
    if at_rate:
        search.generator_pods = max(o.trial.pods for o in at_rate)
    at_low = [o for o in at_rate if o.service and o.service.cpu_seconds is not None]
    if at_low:
        middle = sorted(at_low, key=lambda o: o.service.cpu_seconds or 0.0 if o.service else 0.0)
        figures = middle[len(middle) // 2].service
        assert figures is not None
        share = cpu_share(figures, middle[len(middle) // 2].result)
        search.service_cpu_share = None if share is None else round(share, 3)
        search.service_cpu_per_request_seconds = figures.cpu_per_request_seconds
        search.service_peak_memory_bytes = figures.peak_memory_bytes
    search.limit, whose = _whose_limit(spec, found, probed, probes, search.service_cpu_share)
    search.message = _message(spec, search, found, whose)
    return search


def generator_bound(spec: ExperimentSpec, outcome: TrialOutcome, probe: Probe) -> str | None:
    """Against a service subject, why a probe that broke measured its generator, not the
    service (None: it held, there is no service, or the service bounded it): the generator
    could not keep the rate; or its CPU was near its cores while the service's was not; or
    its workers were too few: fewer than the rate x the objective (Little's law: so many
    tasks in flight at once to see the service answer as late as the objective), the
    service's answers within the objective and the wait for a worker over it."""
    result = outcome.result
    if spec.service is None or probe.holds or result is None or outcome.error:
        return None
    arrival = result.get("arrival")
    if probe.generator_saturated:
        why = arrival["saturation"] if arrival is not None else None
        return f"it could not keep the rate ({why or 'saturated'})"
    generator = generator_cpu_share(spec, outcome)
    service = cpu_share(outcome.service, outcome.result)
    if generator is not None and generator >= BUSY_SHARE and (service or 0.0) < BUSY_SHARE:
        return f"its CPU {generator:.0%} of its cores"
    target = spec.probe_latency
    if arrival is None or target is None or result["tasksFailed"] or arrival["dropped"]:
        return None
    answered = quantile(arrival["serviceHistogram"], FRACTION[target.percentile])
    waited = quantile(arrival["waitHistogram"], FRACTION[target.percentile])
    objective = parse_duration(target.max)
    latency = result["latencySeconds"][target.percentile]
    # Little's law: to see the service answer as late as the objective, rate x objective
    # tasks must be in flight at once; with fewer workers the wait for one hides whether
    # the service would have held
    trial = outcome.trial
    workers, needed = trial.workers * trial.pods, (trial.rate_per_second or 0.0) * objective
    broke = answered <= objective < latency and answered + waited > objective  # by the wait
    if 0 < workers < needed and broke:
        return (
            f"its workers were too few: {workers} in all, under the rate x the objective "
            f"({needed:.3g}); the service answered within {target.percentile} "
            f"{format_duration(answered)}, the wait for a worker ({target.percentile} "
            f"{format_duration(waited)}) broke it"
        )
    return None


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
        elif search.limit != "generator":  # else whose says what ended it
            text += ", no rate above it broke within search.rate.maxProbes"
    if search.spread is not None:
        text += (
            f"; noisy: a probe held at {rate_text(search.spread.high or 0.0)} above the "
            f"{rate_text(search.spread.low or 0.0)} that broke"
        )
    failed = next((p for p in search.probes if p.failed is not None), None)
    if failed is not None:
        text += (
            f"; the search stopped at {rate_text(failed.rate_per_second)} tasks/s, whose probe "
            f"measured nothing: {failed.failed}"
        )
    return f"{search.variant}: {text}" + (f"; {whose}" if whose else "")


def _whose_limit(
    spec: ExperimentSpec, found: Bounds, probed: list[TrialOutcome], probes: list[Probe],
    service_share: float | None,
) -> tuple[str | None, str]:  # fmt: skip
    """Against a service subject, whose limit bounds the search, and why in words: the
    service's at the lowest rate that broke (its CPU, its failures or its latency), else,
    when no rate broke, the generator's at the lowest rate it could not offer at
    search.rate.maxPods (a probe the generator bound below maxPods is run again)."""
    rate = spec.search.rate if spec.search else None
    if spec.service is None or rate is None:
        return None, ""
    unoffered = [p for p in probes if p.generator_bound is not None and p.pods >= rate.max_pods]
    if found.high is None and unoffered:
        first = min(unoffered, key=lambda p: p.rate_per_second)
        return "generator", (
            f"the generators cannot offer {rate_text(first.rate_per_second)} tasks/s with "
            f"{first.pods} Pod{'s' if first.pods != 1 else ''} (search.rate.maxPods): "
            f"{first.generator_bound}{_room(service_share, found.low)}; raise maxPods, or the "
            f"model's workers or resources"
        )
    if found.high is None:
        return None, ""
    broke = [
        (o, p) for o, p in zip(probed, probes, strict=True)
        if p.rate_per_second == found.high and not p.holds and p.measured
    ]  # fmt: skip
    outcome, probe = broke[0]
    service = cpu_share(outcome.service, outcome.result)
    at = f"at {rate_text(found.high)} tasks/s"
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


def generator_cpu_share(spec: ExperimentSpec, outcome: TrialOutcome) -> float | None:
    """The share of its cores the generator used: its Result's CPU over its wall time and
    its cores, those its Pods ran on (merged: their union) but no more than their CPU limits
    allow (resources.cpu a Pod: on a cluster a fraction of a core, or Pods on several nodes,
    whose core numbers the union would merge)."""
    result = outcome.result
    cpus = result.get("cpus") if result is not None else None
    if result is None or not cpus or result["wallSeconds"] <= 0:
        return None
    cores = float(len(cpus))
    if spec.resources.cpu is not None:
        cores = min(cores, outcome.trial.pods * float(spec.resources.cpu))
    cpu = result["cpuUserSeconds"] + result["cpuSystemSeconds"]
    return cpu / (result["wallSeconds"] * cores)
