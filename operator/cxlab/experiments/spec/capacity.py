"""spec.capacity and spec.search: the load a capacity plan is for, how the plan is verified,
and the rate search that finds what one Pod sustains."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from cxlab.experiments.fields import (
    LIMITS,
    ArrivalRate,
    Fraction,
    LatencyObjective,
    Number,
    Rtt,
    RunDuration,
    Strict,
    TargetRate,
)
from cxlab.experiments.spec.examples import CAPACITY, looping, served, workload
from cxlab.experiments.spec.limits import MAX_PROBES, MAX_REPEATS, MAX_VERIFY_ATTEMPTS
from cxlab.rules import Rule
from cxlab_contract.durations import parse_duration

if TYPE_CHECKING:
    from cxlab.experiments.spec.experiment import ExperimentSpec


class LatencyTarget(Strict):
    """The latency every task must meet, at one of the percentiles the runners report."""

    percentile: Literal["p50", "p90", "p99"] = "p99"
    """The percentile of task latency the objective is about."""
    max: LatencyObjective
    """The most that percentile may be, e.g. 250ms."""


class CapacityTarget(Strict):
    """The load a capacity plan is for."""

    rate_per_second: TargetRate
    """Tasks per second the whole fleet must sustain."""
    latency: LatencyTarget
    """The latency objective (e.g. p99 at most 250ms)."""
    cpu_utilization: Fraction = 0.7
    """The share of each Pod's CPUs the plan may use: headroom for bursts and noisy
    neighbours."""
    rtt: Rtt | None = None
    """The RTT the plan is for when the workload has several (rtts); unset: the largest."""
    max_wait_probability: Fraction = 0.2
    """The most of the tasks arriving at random that may find every worker of their Pod busy
    and wait for one (Erlang C): the plan adds workers, then Pods, until it holds. 1: no bound
    but the latency objective, which counts the wait too."""
    peak_rate_per_second: TargetRate | None = None
    """Against a service subject, the highest rate its autoscaler must carry: the
    HorizontalPodAutoscaler's maxReplicas is planned for it (minReplicas for ratePerSecond).
    Unset: ratePerSecond."""

    rules = (
        Rule(
            "capacity.target.peakRatePerSecond is below ratePerSecond: the peak is the most "
            "the service must carry, at least the target",
            holds=lambda t: (
                t.peak_rate_per_second is None or t.peak_rate_per_second >= t.rate_per_second
            ),
            cel="!has(self.peakRatePerSecond) || self.peakRatePerSecond >= self.ratePerSecond",
            field="peakRatePerSecond",
            valid={
                **served(),
                "search": {"rate": {}},
                "capacity": {"target": {**CAPACITY["target"], "peakRatePerSecond": 1000}},
            },
            invalid={
                **served(),
                "search": {"rate": {}},
                "capacity": {"target": {**CAPACITY["target"], "peakRatePerSecond": 1}},
            },
        ),
    )


class VerifySpec(Strict):
    """Run the chosen plan to see whether it holds: its Pods, each with its workers, at the
    target rate split among them, tasks arriving at random (Poisson) and queueing for a worker,
    for a duration. Refuted, one more Pod is tried, up to maxAttempts plans in all. Against a
    service subject, the plan's replicas of the chosen variant run as a copy of their own,
    loaded by the client model that measured it; refuted, one more replica."""

    enabled: bool = True
    """false: plan without running the plan (a schedule's template verifies unless it says
    so)."""
    duration: RunDuration = "60s"
    """How long tasks arrive at each verification trial."""
    max_attempts: Annotated[int, Field(strict=True, ge=1, le=MAX_VERIFY_ATTEMPTS)] = 3
    """Plans tried in all: the first, then one more Pod each time the last fell short."""
    pods: Annotated[int, Field(strict=True, ge=1, le=LIMITS["pods"].max)] | None = None
    """Run this many Pods first instead of the plan's: to check the sizing you run today."""
    workers_per_pod: Annotated[int, Field(strict=True, ge=1, le=LIMITS["workers"].max)] | None = (
        None
    )
    """Run this many workers per Pod instead of the plan's (in every attempt)."""
    fewer: bool = False
    """Against a service subject, once the plan holds, run its replicas less one too: short,
    the plan is the fewest replicas that hold (status.servicePlan.fewer); held, it is one
    over (the message says so)."""


class RateSearchSpec(Strict):
    """Search each model's (and service variant's) largest arrival rate one Pod sustains: a
    probe at `start`, then double while the objective holds (halve while it does not), then
    bisect between the highest rate that held and the lowest that did not until they are
    within `precision`; then both boundary rates are probed `repeats` times, and a rate holds
    only if every probe of it held. Each probe is a trial of one Pod: tasks arrive at its rate
    for `duration` as workload.arrival says (its process; Poisson without one), queueing for
    a worker, and it holds when the latency objective is met with the wait counted, none
    dropped or failed, the generator on time."""

    start: ArrivalRate = 100
    """The first probe's rate, tasks per second for one Pod."""
    duration: RunDuration = "10s"
    """How long tasks arrive at each probe (workload.warmup of it, when set, is its warm-up)."""
    precision: Annotated[float, Number(0.01, 1)] = 0.1
    """Stop bisecting when the rates that held and failed are within this share of each
    other."""
    max_probes: Annotated[int, Field(strict=True, ge=1, le=MAX_PROBES)] = 8
    """Rates probed per model at most (the boundary's repeats come on top)."""
    max: ArrivalRate | None = None
    """The highest rate a probe tries, tasks per second for one Pod (what your service may be
    sent, say): holding there, the search stops. Unset: the probes double until one fails."""
    repeats: Annotated[int, Field(strict=True, ge=1, le=MAX_REPEATS)] = 3
    """Probes of each boundary rate (the highest that held, the lowest that failed): a rate
    holds only if all of them hold, so one lucky probe does not make a capacity. 1: each rate
    once."""
    latency: LatencyTarget | None = None
    """The objective a probe must hold (e.g. p99 at most 250ms). Unset: capacity.target's."""
    max_pods: Annotated[int, Field(strict=True, ge=1, le=LIMITS["pods"].max)] = 4
    """Against a service subject, the generator Pods a probe may grow to. A probe that broke
    with the generator, not the service, as the bound (it could not keep the rate, its CPU
    was near its cores while the service's was not, or its workers were too few: the
    service answered within the objective and the wait for a worker broke it) does not
    count: its rate runs again with twice the Pods, and so do the probes after it. Bound
    still at this many, the search ends: the generators cannot offer that rate."""

    rules = (
        Rule(
            "search.rate.max is below start: the first probe would already pass it",
            holds=lambda r: r.max is None or r.max >= r.start,
            cel="!has(self.max) || self.max >= self.start",
            field="max",
            valid={"capacity": CAPACITY, "search": {"rate": {"start": 100, "max": 100}}},
            invalid={"capacity": CAPACITY, "search": {"rate": {"start": 100, "max": 99.5}}},
        ),
    )


class SearchSpec(Strict):
    """Searches that add trials after the matrix's, each from the ones before."""

    rate: RateSearchSpec | None = None
    """The largest arrival rate per Pod, per model, at which capacity.target's latency
    objective holds (status.capacityPlan uses it)."""


class Capacity(Strict):
    """Turn the measurements into Pods and cores for a target load (status.capacityPlan)."""

    target: CapacityTarget
    """The load to plan for."""
    verify: VerifySpec | None = None
    """Verify the chosen plan by running it (status.capacityPlan.verification). Unset: an
    experiment does not; an ExperimentSchedule's runs do (verify: {enabled: false} to not)."""

    @property
    def verifying(self) -> VerifySpec | None:
        """The verification to run, if any."""
        return self.verify if self.verify is not None and self.verify.enabled else None


def _searching(spec: ExperimentSpec) -> bool:
    return spec.search is not None and spec.search.rate is not None


# The rules across the spec about the rate search (ExperimentSpec.rules takes them in).
SEARCH_RULES = (
    Rule(
        "search.rate needs the latency objective its probes hold: set search.rate.latency "
        "(or capacity.target, whose latency it then uses)",
        holds=lambda s: not _searching(s) or s.probe_latency is not None,
        cel="!has(self.search) || !has(self.search.rate) || has(self.search.rate.latency) || "
        "has(self.capacity)",
        valid={"search": {"rate": {"latency": {"max": "1s"}}}},
        invalid={"search": {"rate": {}}},
    ),
    Rule(  # past its own bound, warmup is refused there alone
        "search.rate.duration must be longer than workload.warmup, its probes' warm-up",
        holds=lambda s: (
            not _searching(s)
            or s.workload.warmup is None
            or parse_duration(s.workload.warmup) < parse_duration(s.search.rate.duration)
        ),
        cel="!has(self.search) || !has(self.search.rate) || !has(self.workload.warmup) || "
        f"duration(self.workload.warmup) > duration('{LIMITS['warmup'].max}') || "
        "duration(self.workload.warmup) < duration(has(self.search.rate.duration) ? "
        "self.search.rate.duration : '10s')",
        field="search.rate.duration",
        valid={
            "workload": looping(warmup="1s"),
            "search": {"rate": {"latency": {"max": "1s"}, "duration": "1001ms"}},
        },
        invalid={
            "workload": looping(warmup="1s"),
            "search": {"rate": {"latency": {"max": "1s"}, "duration": "1s"}},
        },
    ),
    Rule(
        "search.rate: Locust's users are closed loops and cannot run at a rate; leave locust "
        "out of an experiment that searches",
        holds=lambda s: not _searching(s) or all(m.model != "locust" for m in s.models),
        cel="!has(self.search) || !has(self.search.rate) || "
        "!self.models.exists(m, m.model == 'locust')",
        valid={"capacity": CAPACITY, "search": {"rate": {}}},
        invalid={
            "workload": workload(type="http", rtt="10ms"),
            "models": [{"model": "locust"}],
            "capacity": CAPACITY,
            "search": {"rate": {}},
        },
    ),
)
