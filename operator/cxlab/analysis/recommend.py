"""The answer of a summary's points: the knee of each model per RTT (where adding workers stops
paying) and one recommendation per RTT (the cheapest of the fastest), naming the points the
measurements cannot tell from it. Pure; by each point's median (cxlab.analysis.stats), so one
outlier does not move them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cxlab.analysis.labels import (
    NOISE_CHECKED,
    concurrency,
    rtt_label,
    variant_text,
    workers_label,
    workers_text,
)
from cxlab.analysis.stats import Spread, center, separable
from cxlab_contract.durations import format_duration

Point = dict[str, Any]


def _valid(point: Point) -> bool:
    """A point can be an answer only if it ran and none of its tasks failed."""
    return bool(point["repetitions"] > 0 and point["tasksFailed"] == 0)


def _wall(point: Point) -> float:
    return center(point["wallSeconds"])


def _within(members: list[Point], tolerance: float) -> tuple[Point, list[Point]]:
    """The fastest point by median wall time, and every point within `tolerance` of it."""
    fastest = min(members, key=_wall)
    return fastest, [p for p in members if _wall(p) <= _wall(fastest) * (1 + tolerance)]


def _vm(point: Point) -> float | None:
    vm: Spread | None = point.get("peakVmBytes")
    return None if vm is None else center(vm)


def find_knees(points: list[Point], tolerance: float) -> list[dict[str, Any]]:
    """Per model variant and RTT: the fewest workers in all (Pods x workers per Pod) whose
    median wall time is within `tolerance` of that variant's best — where adding workers
    stops paying; of equal totals, the fewest Pods."""
    groups: dict[tuple[str, float | None], list[Point]] = {}
    for point in filter(_valid, points):
        groups.setdefault((point["variant"], point["rttSeconds"]), []).append(point)
    knees = []
    for (variant, rtt), members in groups.items():
        best, within = _within(members, tolerance)
        knee = min(within, key=lambda p: (concurrency(p), p["pods"], _wall(p)))
        knees.append(
            {
                "variant": variant,
                "model": knee["model"],
                "gomaxprocs": knee["gomaxprocs"],
                "rttSeconds": rtt,
                "pods": knee["pods"],
                "workers": knee["workers"],
                "effectiveWorkers": knee["effectiveWorkers"],
                "workersStarted": knee["workersStarted"],
                "pool": knee["pool"],
                "wallSeconds": _wall(knee),
                "bestWallSeconds": _wall(best),
                "bestWorkers": best["workers"],
                "bestPods": best["pods"],
                "cpuSeconds": center(knee["cpuSeconds"]),
                "cpuPercent": center(knee["cpuPercent"]),
                "peakRssBytes": center(knee["peakRssBytes"]),
                "peakVmBytes": _vm(knee),
                "noisy": knee["noisy"],
            }
        )
    return knees


# The ranking, cheapest first: CPU, then memory. Where the measurements cannot separate two
# points on one quantity both go on to the next; where they separate on none, the fewest
# workers win, then the spec's order: numbers the noise cannot move, so the printed answer
# does not flip between runs of the same experiment.
RANKED_BY = ("cpuSeconds", "peakRssBytes")


def _rank(candidates: list[Point], tolerance: float) -> tuple[Point, list[Point]]:
    """The pick among the candidates, and the points the measurements cannot tell from it
    (not separable from the cheapest on each ranked quantity in turn), in the same order."""
    group = candidates
    for key in RANKED_BY:
        cheapest = min(group, key=lambda p: center(p[key]))
        group = [p for p in group if not separable(p[key], cheapest[key], tolerance)]
    pick, *tied = sorted(group, key=lambda p: (concurrency(p), p["pods"]))  # stable: spec order
    return pick, tied


def _cpu(point: Mapping[str, Any]) -> str:
    return f"{center(point['cpuSeconds']):.3g} s"


def _runs(count: int) -> str:
    return f"{count} repetition" + ("" if count == 1 else "s")


def _tie_text(pick: Point, tied: list[Point]) -> str:
    """The clause "; tied with …", naming up to two of the points the pick cannot be told
    from, in the order the pick was chosen by."""
    if not tied:
        return ""
    runs = _runs(min(p["repetitions"] for p in [pick, *tied]))
    if len(tied) == 1:
        other = tied[0]
        return (
            f"; tied with {variant_text(other)} with {workers_text(other)} (CPU {_cpu(pick)} "
            f"vs {_cpu(other)}, not separable with {runs})"
        )
    named = ", ".join(f"{variant_text(p)} with {workers_text(p)} (CPU {_cpu(p)})" for p in tied[:2])
    more = f" and {len(tied) - 2} more" if len(tied) > 2 else ""
    return f"; tied with {named}{more} (CPU {_cpu(pick)} here, not separable with {runs})"


def _noise_text(point: Point, tolerance: float) -> str:
    if not point["noisy"]:
        return ""
    cvs = ", ".join(f"{NOISE_CHECKED[k]} {point[k]['cv']:.0%}" for k in point["noisyQuantities"])
    return f"; noisy: cv of {cvs}, over the {tolerance:.0%} tolerance"


def _recommendation_text(
    rtt: float | None, pick: Point, tied: list[Point], fastest: Point, candidates: int,
    tolerance: float,
) -> str:  # fmt: skip
    # Without an RTT (cpu, hold) there is one group: "no RTT:" would read like an error.
    where = "Overall" if rtt is None else rtt_label(rtt)
    return (
        f"{where}: {variant_text(pick)} with {workers_text(pick)} — {_wall(pick):.3g} s wall, "
        f"CPU {_cpu(pick)}, {center(pick['peakRssBytes']) / 2**20:.0f} MiB peak; the cheapest "
        f"of {candidates} within {tolerance:.0%} of the fastest ({variant_text(fastest)}, "
        f"{_wall(fastest):.3g} s){_tie_text(pick, tied)}{_noise_text(pick, tolerance)}"
    )


def _brief(point: Point) -> dict[str, Any]:
    """A point as a recommendation names it: its configuration and the ranked medians."""
    return {
        "variant": point["variant"],
        "model": point["model"],
        "gomaxprocs": point["gomaxprocs"],
        "pods": point["pods"],
        "workers": point["workers"],
        "effectiveWorkers": point["effectiveWorkers"],
        "workersStarted": point["workersStarted"],
        "pool": point["pool"],
        "repetitions": point["repetitions"],
        "wallSeconds": _wall(point),
        "cpuSeconds": center(point["cpuSeconds"]),
        "peakRssBytes": center(point["peakRssBytes"]),
    }


def recommend(points: list[Point], tolerance: float) -> list[dict[str, Any]]:
    """Per RTT: of every configuration within `tolerance` of the fastest (median wall), the
    one that costs least CPU, then least memory, then has the fewest workers (see _rank),
    with the configurations it is tied with."""
    by_rtt: dict[float | None, list[Point]] = {}
    for point in filter(_valid, points):
        by_rtt.setdefault(point["rttSeconds"], []).append(point)
    recommendations = []
    for rtt, members in by_rtt.items():
        fastest, within = _within(members, tolerance)
        pick, tied = _rank(within, tolerance)
        text = _recommendation_text(rtt, pick, tied, fastest, len(within), tolerance)
        recommendations.append(
            {"rttSeconds": rtt}
            | _brief(pick)
            | {
                "noisy": pick["noisy"],
                "tiedWith": [_brief(p) for p in tied],
                "text": text,
            }
        )
    return recommendations


def best_line(recommendation: Mapping[str, Any]) -> str:
    """status.best: the first recommendation, short, saying when it is noisy or tied."""
    if "ratePerSecond" in recommendation:  # an arrival run's: the rate it holds
        if recommendation["ratePerSecond"] is None:
            return "no configuration held its lowest rate"
        workers = workers_label(
            recommendation["model"], recommendation["workers"], recommendation.get("pods", 1)
        )
        return (
            f"{variant_text(recommendation)}, {workers} "
            f"({recommendation['ratePerSecond']:g}/s at p99 "
            f"{_ms(recommendation['latencyP99Seconds'])})"
        )
    wall = f"{recommendation['wallSeconds']:.3g} s"
    if recommendation.get("noisy"):
        wall += ", noisy"
    if tied := len(recommendation.get("tiedWith") or []):
        wall += f", tied with {tied} other" + ("s" if tied > 1 else "")
    workers = workers_label(
        recommendation["model"], recommendation["workers"], recommendation.get("pods", 1)
    )
    return f"{variant_text(recommendation)}, {workers} ({wall})"


# Arrival runs (workloads/CONTRACT.md, Duration runs): the knee is in the rate, not in the
# workers. A rate "holds" when no task failed or was dropped and the latency meets the
# objective — or, without one, when p99 is still on its flat part, where no task queues: within
# the tolerance of a task's own p99 service time at the lowest rate measured (what a task takes
# when nothing waits), plus the lag the generator may have (maxLag). Against the service time,
# not the lowest rate's latency: a configuration that already queues at its lowest rate (or
# measured at one rate only) is not flat there.


@dataclass(frozen=True)
class LatencyObjective:
    """The latency a rate must keep (spec.capacity.target.latency)."""

    percentile: str  # p50, p90 or p99
    seconds: float

    @property
    def text(self) -> str:
        return f"{self.percentile} ≤ {format_duration(self.seconds)}"


def _latency(point: Point, percentile: str) -> float:
    return center(point[f"{percentile}Seconds"])


def _rate_holds(point: Point, objective: LatencyObjective | None, flat: float) -> bool:
    if not _valid(point) or point.get("dropped"):
        return False
    if objective is not None:
        return _latency(point, objective.percentile) <= objective.seconds
    return _latency(point, "p99") <= flat


def find_rate_knees(
    points: list[Point], tolerance: float, objective: LatencyObjective | None = None
) -> list[dict[str, Any]]:
    """Per configuration (variant, Pods, workers, RTT): the largest rate at and below which
    every measured rate holds (see above); None when not even the lowest does."""
    groups: dict[tuple[str, int, int, float | None], list[Point]] = {}
    for point in points:
        if point["repetitions"] and "p99Seconds" in point:
            key = (point["variant"], point["pods"], point["workers"], point["rttSeconds"])
            groups.setdefault(key, []).append(point)
    knees = []
    for members in groups.values():
        members.sort(key=lambda p: p["ratePerSecond"])
        lowest = members[0]
        service = center(lowest["serviceP99Seconds"])
        flat = service * (1 + tolerance) + lowest["maxLagSeconds"]
        held = None
        for point in members:
            if not _rate_holds(point, objective, flat):
                break
            held = point
        criterion = (
            objective.text
            if objective is not None
            else f"p99 within {tolerance:.0%} of a task's own {_ms(service)} (p99 service "
            f"time at {lowest['ratePerSecond']:g}/s) + {_ms(lowest['maxLagSeconds'])} of lag"
        )
        shown = held or lowest
        knees.append(
            {
                "variant": shown["variant"],
                "model": shown["model"],
                "gomaxprocs": shown["gomaxprocs"],
                "rttSeconds": shown["rttSeconds"],
                "pods": shown["pods"],
                "workers": shown["workers"],
                "effectiveWorkers": shown["effectiveWorkers"],
                "workersStarted": shown["workersStarted"],
                "pool": shown["pool"],
                "ratePerSecond": None if held is None else held["ratePerSecond"],
                "highestMeasured": held is not None and held is members[-1],
                "criterion": criterion,
                "latencyP99Seconds": _latency(shown, "p99"),
                "cpuPercent": center(shown["cpuPercent"]),
                "peakRssBytes": center(shown["peakRssBytes"]),
                "noisy": shown.get("noisy", False),
            }
        )
    return knees


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def recommend_rates(
    knees: list[dict[str, Any]], tolerance: float, objective: LatencyObjective | None = None
) -> list[dict[str, Any]]:
    """Per RTT: the configuration that holds the largest rate, of those within `tolerance`
    of it the one using the least CPU at its knee, then the fewest workers in all."""
    by_rtt: dict[float | None, list[dict[str, Any]]] = {}
    for knee in knees:
        by_rtt.setdefault(knee["rttSeconds"], []).append(knee)
    recommendations = []
    for rtt, members in by_rtt.items():
        where = "Overall" if rtt is None else rtt_label(rtt)
        held = [k for k in members if k["ratePerSecond"] is not None]
        if not held:
            recommendations.append(
                {
                    "rttSeconds": rtt,
                    "ratePerSecond": None,
                    "text": (
                        f"{where}: no configuration held even its lowest rate "
                        f"({members[0]['criterion']})"
                    ),
                }
            )
            continue
        top = max(k["ratePerSecond"] for k in held)
        close = [k for k in held if k["ratePerSecond"] >= top * (1 - tolerance)]
        pick = min(close, key=lambda k: (k["cpuPercent"], concurrency(k), k["pods"]))
        more = " or more (the highest rate measured)" if pick["highestMeasured"] else ""
        text = (
            f"{where}: {variant_text(pick)} with {workers_text(pick)} holds "
            f"{pick['ratePerSecond']:g}/s{more} at p99 {_ms(pick['latencyP99Seconds'])} "
            f"({pick['criterion']}), {pick['cpuPercent']:.0f}% CPU; the cheapest of "
            f"{len(close)} within {tolerance:.0%} of the largest rate held"
        )
        recommendations.append(
            {"rttSeconds": rtt}
            | {k: v for k, v in pick.items() if k != "criterion"}
            | {"text": text, "tiedWith": []}
        )
    return recommendations
