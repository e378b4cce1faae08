"""What the report draws from: the points (the summary's, or aggregated so far for a running
experiment), their grouping by RTT and variant, one colour and marker per variant."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cxlab.analysis.knees import Knee, RateKnee
from cxlab.analysis.point import MeasuredPoint, Point
from cxlab.analysis.summary import Summary, summary_points
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.record import outcomes_of
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import TrialEntry
from cxlab.report import svg
from cxlab_contract.durations import parse_duration

Json = Mapping[str, Any]  # the experiment document as given: its spec is shown as written
MIB = 2**20
P = TypeVar("P", bound=Point)


@dataclass(frozen=True)
class Style:
    color: str
    shape: str


@dataclass(frozen=True)
class Context:
    """What every chart of the report shares."""

    spec: Json
    trials: Sequence[TrialEntry]
    knees: Sequence[Knee | RateKnee]
    styles: Mapping[str, Style]


def report_points(
    summary: Summary | None, trials: Sequence[TrialEntry], spec: ExperimentSpec
) -> list[Point]:
    """The summary's points; for an unfinished run, the same aggregation over the trials done
    so far (the planned trials, read back from their entries as the status builder does), so
    a running experiment already shows its curves."""
    if summary is not None:
        return list(summary.points or [])
    outcomes = outcomes_of(plan_trials(spec), trials)
    return summary_points(outcomes, spec.pinning, spec.tolerance)


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def variant_styles(points: Sequence[Point]) -> dict[str, Style]:
    """One colour and marker per variant, the same in every chart."""
    variants = _ordered(p.variant for p in points)
    return {
        variant: Style(
            svg.PALETTE[i % len(svg.PALETTE)],
            svg.SHAPES[i % len(svg.SHAPES)],
        )
        for i, variant in enumerate(variants)
    }


def by_rtt(points: Iterable[Point]) -> list[tuple[float | None, list[MeasuredPoint]]]:
    """The measured points by RTT (the charts' sections), in order, without an RTT last."""
    groups: dict[float | None, list[MeasuredPoint]] = {}
    for point in points:
        if isinstance(point, MeasuredPoint):
            groups.setdefault(point.rtt_seconds, []).append(point)
    return sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or 0.0))


def by_variant(points: Iterable[P]) -> dict[str, list[P]]:
    groups: dict[str, list[P]] = {}
    for point in points:
        groups.setdefault(point.variant, []).append(point)
    return groups


def _same_config(trial: TrialEntry, point: Point) -> bool:
    ours = (trial.model, trial.gomaxprocs, trial.workers, trial.rtt_seconds)
    return ours == (point.model, point.gomaxprocs, point.workers, point.rtt_seconds)


def first_success(trials: Sequence[TrialEntry], point: Point) -> TrialEntry | None:
    """The point's successful trial of the lowest repetition that recorded a timeline."""
    runs = [
        t
        for t in trials
        if _same_config(t, point)
        and not t.failed
        and t.result is not None
        and t.result["rssTimeline"]["rssBytes"]
    ]
    return min(runs, key=lambda t: t.repetition, default=None)


def floor_unit(workload: Json, rtt: float | None) -> tuple[float, str] | None:
    """Seconds one wave of tasks takes at best, and its name; None where no floor exists."""
    if rtt is not None:
        return rtt, "RTT"
    if workload.get("type") == "hold" and workload.get("hold"):
        return parse_duration(str(workload["hold"])), "hold"
    return None
