"""Repeated measurements of one point: their centre, spread and confidence interval (Spread, as
the summary writes it), and whether two points can be told apart at all. Pure: the few t
quantiles needed are a table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field

from cxlab.shape import Maybe, Shape
from cxlab_contract.figures import significant

# Repetitions from which a point gets a confidence interval: with two, the t interval is
# ±12.7 sd wide, which says nothing a reader can use.
MIN_FOR_INTERVAL = 3

# t(0.975, df), the two-sided 95 % Student-t quantile, for df = 1 … 31: repetitions 2 … 32,
# the spec's bound (an objective's verdict uses df 1). Beyond the table its last entry is
# used: a little wide, never narrow.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010,
    2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796,
    2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423, 2.0395,
)  # fmt: skip


class Spread(Shape):
    """One quantity over a point's repetitions: mean, median, sample standard deviation,
    coefficient of variation, and from 3 repetitions the 95 % interval of the mean."""

    mean: float
    median: Maybe[float] = None
    """Absent only from summaries written before the median was kept."""
    stddev: float
    cv: float
    """stddev / mean; 0 for one repetition (it has no spread, not a small one)."""
    ci95: Maybe[Annotated[list[float], Field(min_length=2, max_length=2)]] = None
    """[low, high]: the Student t interval of the mean, from 3 repetitions on."""


def t975(df: int) -> float:
    if df < 1:
        raise ValueError(f"a t quantile needs 1 degree of freedom or more, not {df}")
    return _T975[min(df, len(_T975)) - 1]


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
    # To significant digits, never fixed decimals: a p99 of 1.4 µs stays 1.4 µs.
    spread = Spread(
        mean=significant(mean),
        median=significant(float(statistics.median(values))),
        stddev=significant(stddev),
        cv=round(stddev / mean, 4) if mean else 0.0,
    )
    if len(values) >= MIN_FOR_INTERVAL:
        half = t975(len(values) - 1) * stddev / len(values) ** 0.5
        # Times, bytes and counts cannot be negative: cut there, not at "-0.012 s".
        low = max(mean - half, 0.0) if min(values) >= 0 else mean - half
        spread.ci95 = [significant(low), significant(mean + half)]
    return spread


def present_stats(values: Sequence[float | None]) -> Spread | None:
    """The stats of the values a Result reported; None if none did (a Result written before
    the field existed, or a model that cannot measure it): never a made-up 0."""
    present = [v for v in values if v is not None]
    return stats(present) if present else None


def center(spread: Spread) -> float:
    """What knees, the recommendation and the tables go by: the median, so one outlier does
    not move them (the mean for a summary written before the median was kept)."""
    return spread.mean if spread.median is None else spread.median


def separable(a: Spread, b: Spread, tolerance: float) -> bool:
    """Whether two points' measurements of one quantity can be told apart. With a 95 %
    interval each (3+ repetitions): when the intervals do not overlap (stricter than a t
    test, so in doubt it says tied). With fewer: when the medians differ by more than the
    tolerance of the smaller, the same test as "within the tolerance of the fastest", since
    one or two runs cannot show a smaller difference."""
    if a.ci95 is not None and b.ci95 is not None:
        (a_low, a_high), (b_low, b_high) = a.ci95, b.ci95
        return a_high < b_low or b_high < a_low
    low, high = sorted((center(a), center(b)))
    return high > low * (1 + tolerance)


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function, by the modified Lentz method
    (Numerical Recipes, betacf); converges fast for x < (a + 1) / (a + b + 2)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        # the two steps of one m: the even coefficient, then the odd one
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def _regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1) / (a + b + 2):
        return front * _beta_continued_fraction(a, b, x) / a
    # the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) keeps the fraction in its fast range
    return 1 - front * _beta_continued_fraction(b, a, 1 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom (any real df > 0, as Welch's test
    needs): 1/2 I_x(df/2, 1/2) with x = df / (df + t^2), accurate to about 1e-12."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, not {df}")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    # df / (df + t²) loses t when t² << df; t² / (df + t²) keeps it for the complement
    tail = 0.5 * (
        _regularized_beta(df / 2, 0.5, df / (df + t * t))
        if t * t > df
        else 1 - _regularized_beta(0.5, df / 2, t * t / (df + t * t))
    )
    return tail if t >= 0 else 1 - tail


def welch_t_test(
    new: Sequence[float], base: Sequence[float], bad: Literal["up", "down"]
) -> tuple[float, float] | None:
    """One-sided Welch t test that `new` moved in the `bad` direction from `base`: (t, p), t
    signed so that positive is bad. One new value is tested against the base's prediction
    interval, t = (x - mean) / (sd * sqrt(1 + 1/n)) on n - 1 degrees of freedom, the chance
    that one more draw from the base lies that far out. Without any spread on either side, a
    difference is certain (t infinite, p 0 or 1). None when the test cannot run: fewer than two
    base values, or all values equal."""
    if len(new) < 1 or len(base) < 2:
        return None
    sign = 1.0 if bad == "up" else -1.0
    var_base = statistics.variance(base)
    difference = sign * (statistics.fmean(new) - statistics.fmean(base))
    if len(new) == 1:
        scale, df = math.sqrt(var_base * (1 + 1 / len(base))), len(base) - 1.0
    else:
        part_new, part_base = statistics.variance(new) / len(new), var_base / len(base)
        scale = math.sqrt(part_new + part_base)
        # the Welch-Satterthwaite degrees of freedom
        denominator = part_new**2 / (len(new) - 1) + part_base**2 / (len(base) - 1)
        df = (part_new + part_base) ** 2 / denominator if denominator else math.nan
    if scale == 0:  # no spread anywhere: a difference is certain, equality says nothing
        if difference == 0:
            return None
        return math.copysign(math.inf, difference), float(difference < 0)
    t = difference / scale
    return t, student_t_sf(t, df)
