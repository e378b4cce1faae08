"""Trial Results → the experiment's answer: repetitions aggregated per point, the knee of each
model per RTT, and one recommendation per RTT. Pure, shared by the local backend and the
operator, so both write the same summary into the same status shape."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cxlab.plan import Trial
from cxlab_runner.durations import format_duration

Result = dict[str, Any]


@dataclass(frozen=True)
class TrialOutcome:
    """A finished trial: its Result, or why it has none."""

    trial: Trial
    result: Result | None
    error: str | None = None
    unpinned: str | None = None  # why the trial did not run on exactly its own cores

    @property
    def succeeded(self) -> bool:
        return self.result is not None and self.error is None

    def counts(self, pinning: str) -> bool:
        """Whether the trial's Result enters the summary under the experiment's pinning."""
        return self.succeeded and (self.unpinned is None or pinning == "preferred")


def stats(values: list[float]) -> dict[str, float]:
    """Mean, sample standard deviation and coefficient of variation (0 for one value)."""
    mean = statistics.fmean(values)
    stddev = statistics.stdev(values) if len(values) > 1 else 0.0
    return {
        "mean": round(mean, 6),
        "stddev": round(stddev, 6),
        "cv": round(stddev / mean, 4) if mean else 0.0,
    }


def rtt_label(rtt_seconds: float) -> str:
    return f"RTT {format_duration(rtt_seconds)}"


def spread_cells(
    stat: dict[str, float], repetitions: int, show: Callable[[float], str]
) -> tuple[str, str]:
    """A repeated measurement as shown in tables: "mean ± sd" and the CV; with one run there
    is no spread to show, so "n=1" instead of a reassuring ± 0 and 0 %."""
    if repetitions == 1:
        return show(stat["mean"]), "n=1"
    return f"{show(stat['mean'])} ± {show(stat['stddev'])}", f"{stat['cv']:.1%}"


def workers_label(model: str, workers: int) -> str:
    if model == "sequential":
        return "1 worker"
    return "one worker per task" if workers == 0 else f"{workers} workers"


def _points(outcomes: Iterable[TrialOutcome], pinning: str) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, float | None], list[TrialOutcome]] = {}
    for outcome in outcomes:
        trial = outcome.trial
        groups.setdefault((trial.variant, trial.workers, trial.rtt_seconds), []).append(outcome)
    points = []
    for (variant, workers, rtt), members in groups.items():
        trial = members[0].trial
        results = [o.result for o in members if o.counts(pinning) and o.result is not None]
        unpinned = sum(o.succeeded and not o.counts(pinning) for o in members)
        point: dict[str, Any] = {
            "variant": variant,
            "model": trial.model,
            "gomaxprocs": trial.gomaxprocs,
            "workers": workers,
            "rttSeconds": rtt,
            "repetitions": len(results),
            "failedTrials": len(members) - len(results) - unpinned,
        }
        if unpinned:
            point["unpinnedTrials"] = unpinned  # measured, but not on the cores it asked for
        if results:
            cpu = [r["cpuUserSeconds"] + r["cpuSystemSeconds"] for r in results]
            growth = [(r["peakRssBytes"] - r["baselineRssBytes"]) / r["workers"] for r in results]
            point |= {
                "effectiveWorkers": results[0]["workers"],
                "tasksFailed": sum(r["tasksFailed"] for r in results),
                "wallSeconds": stats([r["wallSeconds"] for r in results]),
                "cpuSeconds": stats(cpu),
                "cpuPercent": stats([r["cpuPercent"] for r in results]),
                "peakRssBytes": stats([r["peakRssBytes"] for r in results]),
                "memoryPerWorkerBytes": round(statistics.fmean(growth)),
                "contextSwitches": stats(
                    [
                        r["voluntaryContextSwitches"] + r["involuntaryContextSwitches"]
                        for r in results
                    ]
                ),
                "efficiency": _mean_or_none([r["efficiency"] for r in results]),
                "throughputPerSecond": round(
                    statistics.fmean(r["throughputPerSecond"] for r in results), 3
                ),
                "latencyP99Seconds": round(
                    statistics.fmean(r["latencySeconds"]["p99"] for r in results), 6
                ),
            }
        points.append(point)
    return points


def _mean_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 4) if present else None


def _valid(point: dict[str, Any]) -> bool:
    """A point can be an answer only if it ran and none of its tasks failed."""
    return bool(point["repetitions"] > 0 and point["tasksFailed"] == 0)


def _wall(point: dict[str, Any]) -> float:
    mean: float = point["wallSeconds"]["mean"]
    return mean


def find_knees(points: list[dict[str, Any]], tolerance: float) -> list[dict[str, Any]]:
    """Per model variant and RTT: the fewest workers whose mean wall time is within
    `tolerance` of that variant's best — where adding workers stops paying."""
    groups: dict[tuple[str, float | None], list[dict[str, Any]]] = {}
    for point in filter(_valid, points):
        groups.setdefault((point["variant"], point["rttSeconds"]), []).append(point)
    knees = []
    for (variant, rtt), members in groups.items():
        best = min(members, key=_wall)
        within = [p for p in members if _wall(p) <= _wall(best) * (1 + tolerance)]
        knee = min(within, key=lambda p: (p["effectiveWorkers"], _wall(p)))
        knees.append(
            {
                "variant": variant,
                "model": knee["model"],
                "gomaxprocs": knee["gomaxprocs"],
                "rttSeconds": rtt,
                "workers": knee["workers"],
                "effectiveWorkers": knee["effectiveWorkers"],
                "wallSeconds": _wall(knee),
                "bestWallSeconds": _wall(best),
                "bestWorkers": best["workers"],
                "cpuSeconds": knee["cpuSeconds"]["mean"],
                "cpuPercent": knee["cpuPercent"]["mean"],
                "peakRssBytes": knee["peakRssBytes"]["mean"],
            }
        )
    return knees


def recommend(points: list[dict[str, Any]], tolerance: float) -> list[dict[str, Any]]:
    """Per RTT: of every configuration within `tolerance` of the fastest, the one that costs
    least CPU, then least memory, then fewest workers."""
    by_rtt: dict[float | None, list[dict[str, Any]]] = {}
    for point in filter(_valid, points):
        by_rtt.setdefault(point["rttSeconds"], []).append(point)
    recommendations = []
    for rtt, members in by_rtt.items():
        fastest = min(members, key=_wall)
        within = [p for p in members if _wall(p) <= _wall(fastest) * (1 + tolerance)]
        pick = min(
            within,
            key=lambda p: (p["cpuSeconds"]["mean"], p["peakRssBytes"]["mean"], p["workers"]),
        )
        # Without an RTT (cpu, hold) there is one group: "no RTT:" would read like an error.
        text = (
            f"{'Overall' if rtt is None else rtt_label(rtt)}: {pick['variant']} with "
            f"{workers_label(pick['model'], pick['workers'])} — {_wall(pick):.3g} s wall, "
            f"{pick['cpuPercent']['mean']:.0f}% CPU, "
            f"{pick['peakRssBytes']['mean'] / 2**20:.0f} MiB peak; the cheapest of "
            f"{len(within)} within {tolerance:.0%} of the fastest "
            f"({fastest['variant']}, {_wall(fastest):.3g} s)"
        )
        recommendations.append(
            {
                "rttSeconds": rtt,
                "variant": pick["variant"],
                "model": pick["model"],
                "gomaxprocs": pick["gomaxprocs"],
                "workers": pick["workers"],
                "wallSeconds": _wall(pick),
                "text": text,
            }
        )
    return recommendations


def summarize(
    outcomes: list[TrialOutcome], tolerance: float, pinning: str = "required"
) -> dict[str, Any]:
    """The `status.summary` of an experiment; under pinning "required" an unpinned trial's
    Result stays in its entry but not in the points, knees and recommendations."""
    points = _points(outcomes, pinning)
    return {
        "tolerance": tolerance,
        "points": points,
        "knees": find_knees(points, tolerance),
        "recommendations": recommend(points, tolerance),
    }
