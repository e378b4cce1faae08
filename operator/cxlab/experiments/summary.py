"""Trial Results → the experiment's answer: repetitions aggregated per point, the knee of each
model per RTT, and one recommendation per RTT. Pure, shared by the local backend and the
operator, so both write the same summary into the same status shape.

Knees and recommendations go by each point's median (cxlab.stats), so one outlier does not
move them; a point whose CV exceeds the tolerance is flagged noisy, and a recommendation the
measurements cannot tell from its runners-up names them as tied."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from cxlab.experiments.outcome import TrialOutcome
from cxlab.experiments.plan import Trial
from cxlab.stats import Spread, center, present_stats, separable, stats
from cxlab_contract.durations import format_duration
from cxlab_contract.result import Result

Point = dict[str, Any]


class Summary(TypedDict, total=False):
    """status.summary: the points of the matrix, the knees and the recommendations. In a
    cluster experiment's status the compact one: the recommendations with their ties counted
    (tiedCount), how many points, and the ConfigMap holding the whole (summaryIn)."""

    tolerance: float
    points: list[Point]
    knees: list[dict[str, Any]]
    recommendations: list[dict[str, Any]]
    pointCount: int
    summaryIn: str


# The quantities an answer depends on, checked for noise: wall time (knees, the tolerance),
# CPU and memory (the ranking). Context switches and syscalls vary by nature and rank nothing.
NOISE_CHECKED = {"wallSeconds": "wall", "cpuSeconds": "cpu", "peakRssBytes": "rss"}


def rtt_label(rtt_seconds: float) -> str:
    return f"RTT {format_duration(rtt_seconds)}"


def spread_cells(
    stat: Mapping[str, Any], repetitions: int, show: Callable[[float], str]
) -> tuple[str, str, str]:
    """A repeated measurement as tables show it: the median (what knees and recommendations
    use), its 95 % interval, and the CV. One run has no spread to show, so "n=1" and no CV
    instead of a reassuring 0 %; two runs have a CV but no interval worth printing."""
    median = show(center(stat))
    if repetitions == 1:
        return median, "n=1", "—"
    interval = stat.get("ci95")
    shown = f"[{show(interval[0])}, {show(interval[1])}]" if interval else f"n={repetitions}"
    return median, shown, f"{stat['cv']:.1%}"


def workers_label(model: str, workers: int, pods: int = 1) -> str:
    """The configuration: workers, per Pod for a trial of several Pods (3 Pods x 100 workers)."""
    per_pod = "" if pods == 1 else f"{pods} Pods \u00d7 "
    if model == "sequential":
        return f"{per_pod}1 worker"
    if workers == 0:
        return f"{per_pod}one worker per task"
    return f"{per_pod}{workers} worker" + ("" if workers == 1 else "s")


def variant_text(point: Mapping[str, Any]) -> str:
    """The variant with the kind of pool its Results report (threads (on-demand pool))."""
    variant, pool = str(point["variant"]), point.get("pool")
    if not pool or "pool" in variant:  # none reported, or the variant names it already
        return variant
    return f"{variant} ({'on-demand' if pool == 'onDemand' else pool} pool)"


def workers_text(point: Mapping[str, Any]) -> str:
    """workers_label, and how many started when a pool started fewer than it may."""
    pods = point.get("pods", 1)
    text = workers_label(point["model"], point["workers"], pods)
    started, effective = point.get("workersStarted"), point.get("effectiveWorkers")
    if started is not None and effective is not None and started != effective * pods:
        text += f" ({started} started)"
    return text


def concurrency(point: Mapping[str, Any]) -> int:
    """Workers in all: a trial's Pods x the workers each ran (knees and ties go by it)."""
    return int(point.get("pods", 1)) * int(point["effectiveWorkers"])


def _task_switches(result: Result) -> float | None:
    """Context switches of the threads that ran tasks; None where the model cannot tell
    them apart (goroutines) or the Result predates the field."""
    task = result.get("taskContextSwitches")
    return None if task is None else float(task["voluntary"] + task["involuntary"])


def _syscalls(results: list[Result]) -> dict[str, Any] | None:
    """Syscall counts over the repetitions that have them: the total and the futex count
    (the Result keeps futex among its top counts whenever one was made: absent means 0);
    else the reason they are unavailable, never 0; None when no trial asked for them."""
    reported = [r.get("syscalls") for r in results]
    counted = [s for s in reported if s and "total" in s]
    if counted:
        futex = [s["counts"].get("futex", 0) for s in counted]
        return {"total": stats([s["total"] for s in counted]), "futex": stats(futex)}
    unavailable = [s["unavailable"] for s in reported if s and "unavailable" in s]
    return {"unavailable": unavailable[0]} if unavailable else None


def syscalls_requested(points: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any trial asked for syscall counts: tables leave their columns out if not."""
    return any(p.get("syscalls") is not None for p in points)


def _workers_started(results: list[Result]) -> int | None:
    """The median of threads or processes started (an on-demand pool may start fewer than
    its workers); None for Results written before the field."""
    started = [r["workersStarted"] for r in results if r.get("workersStarted") is not None]
    return round(statistics.median(started)) if started else None


def _memory_per_worker(result: Result) -> float:
    # per worker started: an on-demand pool of 10,000 that started 2,000 grew by 2,000 stacks
    started = int(result.get("workersStarted") or result["workers"])
    return float(result["peakRssBytes"] - result["baselineRssBytes"]) / max(started, 1)


def _noisy(point: Point, tolerance: float) -> list[str]:
    """The checked quantities whose CV exceeds the tolerance (one repetition has CV 0: it
    shows "n=1", not noise)."""
    return [key for key in NOISE_CHECKED if point[key]["cv"] > tolerance]


def _measures(results: list[Result]) -> dict[str, Any]:
    """A point's measurements over its counted repetitions."""
    return {
        "effectiveWorkers": results[0]["workers"],
        "workersStarted": _workers_started(results),
        "pool": next((r["pool"] for r in results if r.get("pool")), None),
        "tasksFailed": sum(r["tasksFailed"] for r in results),
        "wallSeconds": stats([r["wallSeconds"] for r in results]),
        "cpuSeconds": stats([r["cpuUserSeconds"] + r["cpuSystemSeconds"] for r in results]),
        "cpuPercent": stats([r["cpuPercent"] for r in results]),
        "peakRssBytes": stats([r["peakRssBytes"] for r in results]),
        "peakVmBytes": present_stats([r.get("peakVmBytes") for r in results]),
        "memoryPerWorkerBytes": round(statistics.fmean(map(_memory_per_worker, results))),
        "contextSwitches": stats(
            [r["voluntaryContextSwitches"] + r["involuntaryContextSwitches"] for r in results]
        ),
        "taskContextSwitches": present_stats([_task_switches(r) for r in results]),
        "syscalls": _syscalls(results),
        "efficiency": _mean_or_none([r["efficiency"] for r in results]),
        "throughputPerSecond": round(
            statistics.fmean(r["throughputPerSecond"] for r in results), 3
        ),
        "latencyP99Seconds": round(
            statistics.fmean(r["latencySeconds"]["p99"] for r in results), 6
        ),
    }


@dataclass(frozen=True)
class PointRuns:
    """One point of the matrix (variant, Pods, workers, RTT) and its trials: the Results that count
    under the experiment's pinning, and how many did not."""

    trial: Trial  # the first repetition's: the point's model, variant, Pods, workers, RTT
    members: list[TrialOutcome]
    results: list[Result]
    unpinned: int  # measured, but not on the cores asked for (left out under "required")

    @property
    def failed(self) -> int:
        return len(self.members) - len(self.results) - self.unpinned


def group_points(outcomes: Iterable[TrialOutcome], pinning: str) -> list[PointRuns]:
    """The outcomes by point, in the order the points first appear; shared by the summary,
    the capacity plan and a schedule's history, so all three see the same repetitions."""
    groups: dict[tuple[str, int, int, float | None], list[TrialOutcome]] = {}
    for outcome in outcomes:
        trial = outcome.trial
        key = (trial.variant, trial.pods, trial.workers, trial.rtt_seconds)
        groups.setdefault(key, []).append(outcome)
    return [
        PointRuns(
            trial=members[0].trial,
            members=members,
            results=[o.result for o in members if o.counts(pinning) and o.result is not None],
            unpinned=sum(o.succeeded and not o.counts(pinning) for o in members),
        )
        for members in groups.values()
    ]


def _points(
    outcomes: Iterable[TrialOutcome], pinning: str, tolerance: float
) -> list[dict[str, Any]]:
    points = []
    for group in group_points(outcomes, pinning):
        trial, results = group.trial, group.results
        point: dict[str, Any] = {
            "variant": trial.variant,
            "model": trial.model,
            "gomaxprocs": trial.gomaxprocs,
            "pods": trial.pods,
            "workers": trial.workers,
            "rttSeconds": trial.rtt_seconds,
            "repetitions": len(results),
            "failedTrials": group.failed,
        }
        if group.unpinned:
            point["unpinnedTrials"] = group.unpinned  # measured, but not on its own cores
        if results:
            point |= _measures(results)
            noisy = _noisy(point, tolerance)
            point |= {"noisy": bool(noisy), "noisyQuantities": noisy}
        points.append(point)
    return points


def _mean_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 4) if present else None


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


def summarize(outcomes: list[TrialOutcome], tolerance: float, pinning: str = "required") -> Summary:
    """The `status.summary` of an experiment; under pinning "required" an unpinned trial's
    Result stays in its entry but not in the points, knees and recommendations."""
    points = _points(outcomes, pinning, tolerance)
    return {
        "tolerance": tolerance,
        "points": points,
        "knees": find_knees(points, tolerance),
        "recommendations": recommend(points, tolerance),
    }
