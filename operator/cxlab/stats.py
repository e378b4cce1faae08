"""Repeated measurements of one point: their centre, spread and confidence interval, and
whether two points can be told apart at all. Pure, no dependency: the few t quantiles needed
are a table."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

# Repetitions from which a point gets a confidence interval: with two, the t interval is
# ±12.7 sd wide, which says nothing a reader can use.
MIN_FOR_INTERVAL = 3

# t(0.975, df), the two-sided 95 % Student-t quantile, for df = 2 … 31: repetitions 3 … 32,
# the spec's bound. Beyond the table its last entry is used: a little wide, never narrow.
_T975 = (
    4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010,
    2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796,
    2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423, 2.0395,
)  # fmt: skip


class Spread(TypedDict):
    """One quantity over a point's repetitions, as the summary writes it."""

    mean: float
    median: float
    stddev: float
    cv: float
    ci95: NotRequired[list[float]]  # [low, high], from MIN_FOR_INTERVAL repetitions on


def t975(df: int) -> float:
    return _T975[min(df, len(_T975) + 1) - 2]


def stats(values: Sequence[float]) -> Spread:
    """Mean, median, sample standard deviation, CV (0 for one value) and, from three values,
    the 95 % confidence interval of the mean (Student t).

    Why an interval of the mean and not a distribution-free one of the median: the widest
    order-statistic interval, [min, max], covers the median with probability 1 - 2^(1-n):
    75 % at n = 3, and under 95 % until n = 6, while experiments run 3 to 5 repetitions. The
    t interval assumes roughly normal repetitions; an outlier widens it, so a noisy point
    ties rather than wins, which is the safe side."""
    mean = statistics.fmean(values)
    stddev = statistics.stdev(values) if len(values) > 1 else 0.0
    spread: Spread = {
        "mean": round(mean, 6),
        "median": round(float(statistics.median(values)), 6),
        "stddev": round(stddev, 6),
        "cv": round(stddev / mean, 4) if mean else 0.0,
    }
    if len(values) >= MIN_FOR_INTERVAL:
        half = t975(len(values) - 1) * stddev / len(values) ** 0.5
        # Times, bytes and counts cannot be negative: cut there, not at "-0.012 s".
        low = max(mean - half, 0.0) if min(values) >= 0 else mean - half
        spread["ci95"] = [round(low, 6), round(mean + half, 6)]
    return spread


def present_stats(values: Sequence[float | None]) -> Spread | None:
    """The stats of the values a Result reported; None if none did (a Result written before
    the field existed, or a model that cannot measure it): never a made-up 0."""
    present = [v for v in values if v is not None]
    return stats(present) if present else None


def center(spread: Mapping[str, Any]) -> float:
    """What knees, the recommendation and the tables go by: the median, so one outlier does
    not move them (the mean for a summary written before the median was kept)."""
    return float(spread.get("median", spread["mean"]))


def separable(a: Mapping[str, Any], b: Mapping[str, Any], tolerance: float) -> bool:
    """Whether two points' measurements of one quantity can be told apart. With a 95 %
    interval each (3+ repetitions): when the intervals do not overlap (stricter than a t
    test, so in doubt it says tied). With fewer: when the medians differ by more than the
    tolerance of the smaller, the same test as "within the tolerance of the fastest", since
    one or two runs cannot show a smaller difference."""
    if "ci95" in a and "ci95" in b:
        (a_low, a_high), (b_low, b_high) = a["ci95"], b["ci95"]
        return bool(a_high < b_low or b_high < a_low)
    low, high = sorted((center(a), center(b)))
    return high > low * (1 + tolerance)
