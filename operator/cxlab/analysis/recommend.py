"""The answer of a summary's points (status.summary.recommendations): one recommendation per RTT,
the cheapest of the fastest, naming the points the measurements cannot tell from it; for arrival
runs, the configuration holding the largest rate (from the knees, cxlab.analysis.knees). Pure;
by each point's median (cxlab.analysis.stats), so one outlier does not move them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Annotated

from cxlab.analysis.knees import Configuration, RateKnee, answers, ms, wall, within
from cxlab.analysis.labels import (
    NOISE_CHECKED,
    concurrency,
    rtt_label,
    variant_text,
    workers_label,
    workers_text,
)
from cxlab.analysis.point import MeasuredPoint, Point
from cxlab.analysis.stats import Spread, center, separable
from cxlab.shape import ONE_OBJECT, Maybe, Shape, nullable


class Brief(Shape):
    """A point as a recommendation names it: its configuration and the ranked medians."""

    variant: str
    model: str
    gomaxprocs: int | None = nullable()
    pods: int = 1
    workers: int
    effective_workers: int
    workers_started: int | None = nullable()
    pool: str | None = nullable()
    repetitions: int
    wall_seconds: float
    cpu_seconds: float
    peak_rss_bytes: float


class _AtRtt(Shape):
    rtt_seconds: float | None = nullable()
    """The RTT it is for; null for workloads without one (one recommendation overall)."""


class Recommendation(Brief, _AtRtt):  # in this order, the RTT comes first
    """Per RTT: of the configurations within the tolerance of the fastest, the one using the
    least CPU, then memory, then workers, with those the measurements cannot tell from it."""

    noisy: bool = False
    tied_with: Maybe[list[Brief]] = None
    """The points it cannot be told from (the whole summary's; a status's compact one counts
    them in tiedCount)."""
    text: str
    """The answer in one line."""
    tied_count: Maybe[int] = None


class RateRecommendation(Configuration):
    """An arrival run's, per RTT: of the configurations holding the largest rate (within the
    tolerance), the one using the least CPU at its knee, then the fewest workers in all."""

    rate_per_second: float
    """The rate it holds (its knee)."""
    highest_measured: bool
    latency_p99_seconds: float
    cpu_percent: float
    peak_rss_bytes: float
    noisy: bool = False
    text: str
    tied_with: Maybe[list[Brief]] = None
    """Always empty: rates are not tied."""
    tied_count: Maybe[int] = None


class NoRateHeld(_AtRtt):
    """An arrival run's RTT where no configuration held even its lowest rate."""

    rate_per_second: None = nullable()
    text: str


# A summary's recommendations: in the workers, or for arrival runs in the rate.
AnyRecommendation = Annotated[RateRecommendation | Recommendation | NoRateHeld, ONE_OBJECT]

# The ranking, cheapest first: CPU, then memory. Where the measurements cannot separate two
# points on one quantity both go on to the next; where they separate on none, the fewest
# workers win, then the spec's order: numbers the noise cannot move, so the printed answer
# does not flip between runs of the same experiment.
RANKED_BY: tuple[Callable[[MeasuredPoint], Spread], ...] = (
    lambda p: p.cpu_seconds,
    lambda p: p.peak_rss_bytes,
)


def _rank(
    candidates: list[MeasuredPoint], tolerance: float
) -> tuple[MeasuredPoint, list[MeasuredPoint]]:
    """The pick among the candidates, and the points the measurements cannot tell from it
    (not separable from the cheapest on each ranked quantity in turn), in the same order."""
    group = candidates
    for quantity in RANKED_BY:
        cheapest = quantity(min(group, key=lambda p: center(quantity(p))))
        group = [p for p in group if not separable(quantity(p), cheapest, tolerance)]
    pick, *tied = sorted(group, key=lambda p: (concurrency(p), p.pods))  # stable: spec order
    return pick, tied


def _cpu(point: MeasuredPoint) -> str:
    return f"{center(point.cpu_seconds):.3g} s"


def _runs(count: int) -> str:
    return f"{count} repetition" + ("" if count == 1 else "s")


def _tie_text(pick: MeasuredPoint, tied: list[MeasuredPoint]) -> str:
    """The clause "; tied with …", naming up to two of the points the pick cannot be told
    from, in the order the pick was chosen by."""
    if not tied:
        return ""
    runs = _runs(min(p.repetitions for p in [pick, *tied]))
    if len(tied) == 1:
        other = tied[0]
        return (
            f"; tied with {variant_text(other)} with {workers_text(other)} (CPU {_cpu(pick)} "
            f"vs {_cpu(other)}, not separable with {runs})"
        )
    named = ", ".join(f"{variant_text(p)} with {workers_text(p)} (CPU {_cpu(p)})" for p in tied[:2])
    more = f" and {len(tied) - 2} more" if len(tied) > 2 else ""
    return f"; tied with {named}{more} (CPU {_cpu(pick)} here, not separable with {runs})"


def _noise_text(point: MeasuredPoint, tolerance: float) -> str:
    if not point.noisy:
        return ""
    checked = point.noise_checked()
    cvs = ", ".join(f"{NOISE_CHECKED[k]} {checked[k].cv:.0%}" for k in point.noisy_quantities)
    return f"; noisy: cv of {cvs}, over the {tolerance:.0%} tolerance"


def _recommendation_text(
    rtt: float | None, pick: MeasuredPoint, tied: list[MeasuredPoint], fastest: MeasuredPoint,
    candidates: int, tolerance: float,
) -> str:  # fmt: skip
    return (
        f"{_where(rtt)}: {variant_text(pick)} with {workers_text(pick)} — {wall(pick):.3g} s "
        f"wall, CPU {_cpu(pick)}, {center(pick.peak_rss_bytes) / 2**20:.0f} MiB peak; the "
        f"cheapest of {candidates} within {tolerance:.0%} of the fastest "
        f"({variant_text(fastest)}, {wall(fastest):.3g} s){_tie_text(pick, tied)}"
        f"{_noise_text(pick, tolerance)}"
    )


def _where(rtt: float | None) -> str:
    # Without an RTT (cpu, hold) there is one group: "no RTT:" would read like an error.
    return "Overall" if rtt is None else rtt_label(rtt)


def brief(point: MeasuredPoint) -> Brief:
    return Brief(
        variant=point.variant, model=point.model, gomaxprocs=point.gomaxprocs, pods=point.pods,
        workers=point.workers, effective_workers=point.effective_workers,
        workers_started=point.workers_started, pool=point.pool, repetitions=point.repetitions,
        wall_seconds=wall(point), cpu_seconds=center(point.cpu_seconds),
        peak_rss_bytes=center(point.peak_rss_bytes),
    )  # fmt: skip


def recommend(points: Iterable[Point], tolerance: float) -> list[Recommendation]:
    """Per RTT: of every configuration within `tolerance` of the fastest (median wall), the
    one that costs least CPU, then least memory, then has the fewest workers (see _rank),
    with the configurations it is tied with."""
    by_rtt: dict[float | None, list[MeasuredPoint]] = {}
    for point in answers(points):
        by_rtt.setdefault(point.rtt_seconds, []).append(point)
    recommendations = []
    for rtt, members in by_rtt.items():
        fastest, close = within(members, tolerance)
        pick, tied = _rank(close, tolerance)
        text = _recommendation_text(rtt, pick, tied, fastest, len(close), tolerance)
        recommendations.append(
            Recommendation(
                rtt_seconds=rtt,
                **dict(brief(pick)),
                noisy=pick.noisy,
                tied_with=[brief(p) for p in tied],
                text=text,
            )
        )
    return recommendations


def best_line(recommendation: RateRecommendation | Recommendation | NoRateHeld) -> str:
    """status.best: the first recommendation, short, saying when it is noisy or tied."""
    if isinstance(recommendation, NoRateHeld):
        return "no configuration held its lowest rate"
    workers = workers_label(recommendation.model, recommendation.workers, recommendation.pods)
    if isinstance(recommendation, RateRecommendation):  # an arrival run's: the rate it holds
        return (
            f"{variant_text(recommendation)}, {workers} "
            f"({recommendation.rate_per_second:g}/s at p99 "
            f"{ms(recommendation.latency_p99_seconds)})"
        )
    shown = f"{recommendation.wall_seconds:.3g} s"
    if recommendation.noisy:
        shown += ", noisy"
    if tied := len(recommendation.tied_with or []):
        shown += f", tied with {tied} other" + ("s" if tied > 1 else "")
    return f"{variant_text(recommendation)}, {workers} ({shown})"


def recommend_rates(
    knees: Sequence[RateKnee], tolerance: float
) -> list[RateRecommendation | NoRateHeld]:
    """Per RTT: the configuration that holds the largest rate, of those within `tolerance`
    of it the one using the least CPU at its knee, then the fewest workers in all."""
    by_rtt: dict[float | None, list[RateKnee]] = {}
    for knee in knees:
        by_rtt.setdefault(knee.rtt_seconds, []).append(knee)
    recommendations: list[RateRecommendation | NoRateHeld] = []
    for rtt, members in by_rtt.items():
        held = [(k, k.rate_per_second) for k in members if k.rate_per_second is not None]
        if not held:
            text = f"{_where(rtt)}: no configuration held even its lowest rate"
            recommendations.append(
                NoRateHeld(rtt_seconds=rtt, text=f"{text} ({members[0].criterion})")
            )
            continue
        top = max(rate for _, rate in held)
        close = [(k, rate) for k, rate in held if rate >= top * (1 - tolerance)]
        pick, rate = min(close, key=lambda kr: (kr[0].cpu_percent, concurrency(kr[0]), kr[0].pods))
        more = " or more (the highest rate measured)" if pick.highest_measured else ""
        text = (
            f"{_where(rtt)}: {variant_text(pick)} with {workers_text(pick)} holds "
            f"{rate:g}/s{more} at p99 {ms(pick.latency_p99_seconds)} "
            f"({pick.criterion}), {pick.cpu_percent:.0f}% CPU; the cheapest of "
            f"{len(close)} within {tolerance:.0%} of the largest rate held"
        )
        figures = pick.model_dump(exclude={"criterion", "rate_per_second"})
        recommendations.append(
            RateRecommendation(**figures, rate_per_second=rate, text=text, tied_with=[])
        )
    return recommendations
