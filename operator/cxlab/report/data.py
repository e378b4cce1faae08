"""What the report draws from: the points (the summary's, or aggregated so far for a running
experiment), their grouping by RTT and variant, one colour and marker per variant."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cxlab.analysis.summary import summarize
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.record import latency_objective, outcomes_of
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import TrialEntry
from cxlab.report import svg
from cxlab_contract.durations import parse_duration

Json = Mapping[str, Any]
MIB = 2**20


@dataclass(frozen=True)
class Style:
    color: str
    shape: str


@dataclass(frozen=True)
class Context:
    """What every chart of the report shares."""

    spec: Json
    trials: Sequence[TrialEntry]
    knees: Sequence[Json]
    styles: Mapping[str, Style]


def report_points(
    summary: Json | None, trials: Sequence[TrialEntry], spec: ExperimentSpec
) -> list[Json]:
    """The summary's points; for an unfinished run, the same aggregation over the trials done
    so far (the planned trials, read back from their entries as the status builder does), so
    a running experiment already shows its curves."""
    if summary is not None:
        return list(summary.get("points") or [])
    outcomes = outcomes_of(plan_trials(spec), trials)
    if not outcomes:
        return []
    return list(
        summarize(outcomes, spec.tolerance, spec.pinning, latency_objective(spec))["points"]
    )


def measured(point: Json) -> bool:
    return int(point.get("repetitions", 0)) > 0


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def variant_styles(points: Sequence[Json]) -> dict[str, Style]:
    """One colour and marker per variant, the same in every chart."""
    variants = _ordered(str(p["variant"]) for p in points)
    return {
        variant: Style(
            svg.PALETTE[i % len(svg.PALETTE)],
            svg.SHAPES[i % len(svg.SHAPES)],
        )
        for i, variant in enumerate(variants)
    }


def by_rtt(points: Sequence[Json]) -> list[tuple[float | None, list[Json]]]:
    groups: dict[float | None, list[Json]] = {}
    for point in filter(measured, points):
        groups.setdefault(point.get("rttSeconds"), []).append(point)
    return sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or 0.0))


def by_variant(points: Sequence[Json]) -> dict[str, list[Json]]:
    groups: dict[str, list[Json]] = {}
    for point in points:
        groups.setdefault(str(point["variant"]), []).append(point)
    return groups


def _same_config(trial: TrialEntry, point: Json) -> bool:
    ours = (trial.model, trial.gomaxprocs, trial.workers, trial.rtt_seconds)
    return ours == tuple(point.get(key) for key in ("model", "gomaxprocs", "workers", "rttSeconds"))


def first_success(trials: Sequence[TrialEntry], point: Json) -> TrialEntry | None:
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
