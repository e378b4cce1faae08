"""A capacity plan's run judged (status.capacityPlan.verification), and a rate search's probe:
whether a trial at its rate held the objective with the wait for a worker counted."""

from __future__ import annotations

from typing import Protocol

from cxlab.analysis.capacity_plan import Basis, Probe, Verification
from cxlab.analysis.labels import rate_text
from cxlab.analysis.outcome import TrialOutcome
from cxlab.experiments.spec import ExperimentSpec, LatencyTarget
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.figures import significant
from cxlab_contract.histogram import count as histogram_count
from cxlab_contract.histogram import quantile


class Verdicted(Protocol):
    """A plan a verification is folded into: the client's (CapacityPlan) or the service's."""

    basis: Basis | None
    display: str
    message: str
    unverified: str | None


def fold_verdict(plan: Verdicted, tries: list[Verification], unverified: str | None) -> Basis:
    """The plan verified or refuted by its last attempt: its basis, display and message
    (and why its next attempt could not run, when refuted)."""
    last = tries[-1]
    tried = f" after {len(tries)} attempts" if len(tries) > 1 else ""
    basis: Basis = "verified" if last.holds else "refuted"
    plan.basis = basis
    plan.display += f" ({basis})"
    if last.holds:
        plan.message += f"; verified{tried}: {last.summary}"
    else:
        plan.message += f"; refuted{tried}: {last.shortfall}"
        if unverified:  # the next attempt could not run here
            plan.message += f"; {unverified}"
            plan.unverified = unverified
    return basis


def verification_of(spec: ExperimentSpec, outcome: TrialOutcome) -> Verification:
    """Whether a verification trial held capacity.target's objective at the rate."""
    assert spec.capacity is not None
    return judged(spec.capacity.target.latency, outcome)


def judged(latency_target: LatencyTarget, outcome: TrialOutcome) -> Verification:
    """Whether a trial at a rate held the objective: every arrival issued on time (the
    generator not saturated), none dropped or failed, and the objective's percentile of
    latency, wait included, within it."""
    trial = outcome.trial
    percentile, objective = latency_target.percentile, parse_duration(latency_target.max)
    figures = Verification(
        attempt=trial.verify, trial=trial.name, pods=trial.pods,
        workers_per_pod=trial.workers, rate_per_second=round(trial.rate_per_second or 0.0, 3),
        percentile=percentile, objective_seconds=significant(objective), holds=False,
    )  # fmt: skip
    result = outcome.result
    if result is None or outcome.error:
        figures.shortfall = f"the trial failed: {outcome.error or 'no Result'}"
        return figures
    arrival = result.get("arrival")
    latency = result["latencySeconds"][percentile]
    figures.latency_seconds = significant(latency)
    short = []
    if arrival is not None:
        waits = arrival["waitHistogram"]
        figures.achieved_rate_per_second = round(arrival["achievedRatePerSecond"], 3)
        figures.mean_wait_seconds = significant(waits["sum"] / max(1, histogram_count(waits)))
        figures.wait_p99_seconds = significant(quantile(waits, 0.99))
        figures.dropped = arrival["dropped"]
        figures.generator_saturated = arrival["generatorSaturated"]
        if arrival["generatorSaturated"]:
            short.append(
                f"the generator could not keep the rate ({arrival['saturation'] or 'saturated'})"
            )
        if arrival["dropped"]:
            short.append(f"{arrival['dropped']} arrivals dropped")
    if result["tasksFailed"]:
        short.append(f"{result['tasksFailed']} tasks failed")
    if latency > objective:
        short.append(
            f"{percentile} {format_duration(latency)} > {format_duration(objective)}"
            + (
                f" (waits: mean {format_duration(figures.mean_wait_seconds)}, p99 "
                f"{format_duration(figures.wait_p99_seconds or 0.0)})"
                if figures.mean_wait_seconds is not None
                else ""
            )
        )
    figures.holds = not short
    pods = f"{trial.pods} Pod{'s' if trial.pods != 1 else ''} x {trial.workers} workers"
    figures.summary = (
        f"{pods} at {rate_text(trial.rate_per_second or 0.0)} tasks/s measured {percentile} "
        f"{format_duration(latency)} ≤ {format_duration(objective)}"
    )
    if short:
        figures.shortfall = (
            f"{pods} at {rate_text(trial.rate_per_second or 0.0)} tasks/s: " + "; ".join(short)
        )
    return figures


def probe_of(spec: ExperimentSpec, outcome: TrialOutcome) -> Probe:
    """A rate search's probe: its rate, and whether it held the search's objective as a
    verification would."""
    assert spec.probe_latency is not None
    held = judged(spec.probe_latency, outcome)
    return Probe(
        trial=outcome.trial.name, rate_per_second=held.rate_per_second, holds=held.holds,
        latency_seconds=held.latency_seconds, shortfall=held.shortfall,
        generator_saturated=held.generator_saturated or None,
    )  # fmt: skip
