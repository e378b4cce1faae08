"""The answer of a summary's points: the knee of each model per RTT (where adding workers stops
paying) and one recommendation per RTT (the cheapest of the fastest), naming the points the
measurements cannot tell from it. Pure; by each point's median (cxlab.stats), so one outlier
does not move them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cxlab.experiments.labels import (
    NOISE_CHECKED,
    concurrency,
    rtt_label,
    variant_text,
    workers_label,
    workers_text,
)
from cxlab.stats import Spread, center, separable

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
    wall = f"{recommendation['wallSeconds']:.3g} s"
    if recommendation.get("noisy"):
        wall += ", noisy"
    if tied := len(recommendation.get("tiedWith") or []):
        wall += f", tied with {tied} other" + ("s" if tied > 1 else "")
    workers = workers_label(
        recommendation["model"], recommendation["workers"], recommendation.get("pods", 1)
    )
    return f"{variant_text(recommendation)}, {workers} ({wall})"
