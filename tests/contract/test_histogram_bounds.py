"""The latency histogram's stated bound (workloads/CONTRACT.md, The latency histogram), held
from 1 µs to 100 s against the exact figures of the raw samples.

The reference, computed here from the samples themselves: of n values sorted
v_1 <= ... <= v_n, the q quantile is the nearest rank v_r, r = max(1, ceil(q x n)) (the
smallest value with at least a share q of the values at or below it), min is v_1 and max v_n.
The histogram claims min and max to 9 significant digits (never fixed decimals) and every
quantile within (base - 1) / (base + 1) of v_r, relative to v_r, at its schema
(base = 2^(2^-schema)): 1.08 % at schema 5, about twice as much at each schema below, which
a spread wider than 100 buckets forces. The Go runner's half:
TestTheHistogramKeepsItsBoundFromAMicrosecond (internal/runner/histogram_test.go)."""

from __future__ import annotations

import math
import random

import pytest

from cxlab.analysis.stats import stats
from cxlab_contract import histogram
from cxlab_contract.result import latency_seconds
from cxlab_runner.duration import OK, TaskTimes, generator_verdict, timeline

DIGITS = 5e-9  # 9 significant digits: off by at most half a unit of the 9th, relative
SLACK = 1e-12  # a float's last bits: the bucket index from log2, the middle from a power
FRACTIONS = (0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0)
# CONTRACT.md's table: (base - 1) / (base + 1) per schema, to the digits it states.
STATED = {5: 0.0108, 4: 0.0217, 3: 0.0433, 2: 0.0864, 1: 0.172, 0: 0.333, -1: 0.600,
          -2: 0.882, -3: 0.992, -4: 1.000}  # fmt: skip
# Log-uniform spans (ratio of the largest value to the smallest) that 100 buckets hold at
# each schema and not above it: a few octaves at schema 5, 1 µs to 100 s at schema 1.
SPANS = {5: 6.0, 4: 40.0, 3: 2e3, 2: 4e6, 1: 1e8}


def bound(schema: int) -> float:
    base = 2.0**2.0**-schema
    return (base - 1) / (base + 1)


def exact(ordered: list[float], fraction: float) -> float:
    """The nearest-rank quantile of sorted values: the reference."""
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def relative(got: float, want: float) -> float:
    return abs(got - want) / want


def worst_error(built: histogram.Histogram, values: list[float]) -> float:
    """The largest relative error of the histogram's quantiles over every rank of the values,
    after checking its min, max and the usual fractions against the exact ones."""
    ordered = sorted(values)
    n = len(ordered)
    assert relative(built["min"], ordered[0]) <= DIGITS, (built["min"], ordered[0])
    assert relative(built["max"], ordered[-1]) <= DIGITS, (built["max"], ordered[-1])
    limit = bound(built["schema"]) + DIGITS + SLACK
    for fraction in FRACTIONS:
        got, want = histogram.quantile(built, fraction), exact(ordered, fraction)
        assert relative(got, want) <= limit, (fraction, got, want, built["schema"])
    # rank r is fraction (r - 1/2) / n: ceil((r - 1/2) / n x n) = r, whatever the float's last bit
    errors = [
        relative(histogram.quantile(built, (r - 0.5) / n), ordered[r - 1]) for r in range(1, n + 1)
    ]
    assert max(errors) <= limit, (max(errors), built["schema"])
    return max(errors)


def log_uniform(low: float, ratio: float, n: int, seed: int) -> list[float]:
    draw = random.Random(seed)
    return [low * ratio ** draw.random() for _ in range(n)]


def test_the_stated_bounds_are_the_formulas() -> None:
    assert histogram.error_bound(5) == pytest.approx(0.010830, abs=1e-6)  # "1.1 %"
    for schema, stated in STATED.items():
        assert histogram.error_bound(schema) == pytest.approx(bound(schema), rel=1e-12)
        assert bound(schema) == pytest.approx(stated, abs=0.0005), schema


@pytest.mark.parametrize(
    "value", [1e-6, 1.4e-6, 1.5e-6, 2.5e-6, 1.0000004e-6, 3.33e-5, 1.4e-3, 0.1, 7.77, 100.0]
)
def test_a_constant_latency_is_reported_as_itself(value: float) -> None:
    # min = max = value bound the bucket's middle: every quantile is the value, 1.4 µs too
    # (rounded to 6 decimals it was 1 µs, and 1.5 µs was 2 µs).
    built = histogram.build([value] * 50)
    assert worst_error(built, [value] * 50) <= DIGITS
    assert built["min"] == built["max"] == value
    assert built["sum"] == pytest.approx(50 * value, rel=DIGITS)
    assert all(histogram.quantile(built, f) == value for f in FRACTIONS)
    assert set(latency_seconds([value] * 50).values()) == {value}


@pytest.mark.parametrize(
    ("schema", "low"),
    [(s, low) for s in SPANS for low in (1e-6, 1e-3, 1.0) if low * SPANS[s] <= 100],
)
def test_log_uniform_latencies_keep_their_schemas_bound(schema: int, low: float) -> None:
    ratio = SPANS[schema]
    values = log_uniform(low, ratio, 4000, seed=schema * 1000 + round(math.log10(low)))
    built = histogram.build(values)
    assert built["schema"] == schema  # the span is the one this schema holds
    worst = worst_error(built, values)
    # The bound is the real one: 4,000 draws put some value close to a bucket's edge.
    assert worst > 0.95 * bound(schema), (worst, bound(schema))


def test_from_a_microsecond_to_100_seconds_the_bound_is_schema_1s() -> None:
    # 26.6 octaves: 851 buckets at schema 5, 53 at schema 1, the first that 100 hold.
    values = [*log_uniform(1e-6, 1e8, 4000, seed=28), 1e-6, 1.4e-6, 1.5e-6, 100.0]
    built = histogram.build(values)
    assert built["schema"] == 1 and built["min"] == 1e-6 and built["max"] == 100.0
    assert 0.17 < worst_error(built, values) <= bound(1) + DIGITS + SLACK  # 17.2 %


def test_each_schema_the_cut_lowers_to_keeps_its_bound() -> None:
    # An oversized Result's cut lowers a histogram's schema further (histogram.coarser), down
    # to MIN_SCHEMA: there each bucket spans 65,536 x, and its middle can be 99.997 % off.
    values = log_uniform(1e-6, 1e8, 4000, seed=29)
    built = histogram.build(values)
    measured = {built["schema"]: worst_error(built, values)}
    while built["schema"] > histogram.MIN_SCHEMA:
        built = histogram.coarser(built)
        measured[built["schema"]] = worst_error(built, values)
    assert sorted(measured) == list(range(histogram.MIN_SCHEMA, 2))
    for schema, worst in measured.items():
        assert 0.99 * bound(schema) < worst, (schema, worst, bound(schema))


def test_merging_keeps_the_bound_and_microseconds() -> None:
    pods = [log_uniform(1e-6, 6.0, 1000, seed=pod) for pod in range(3)]
    merged = histogram.merge([histogram.build(p) for p in pods])
    assert merged["schema"] == 5
    assert worst_error(merged, [v for p in pods for v in p]) <= bound(5) + DIGITS + SLACK
    constant = histogram.merge([histogram.build([1.4e-6] * 10)] * 3)
    assert (constant["min"], constant["max"], histogram.quantile(constant, 0.99)) == (1.4e-6,) * 3


def test_a_duration_runs_microsecond_figures_keep_their_digits() -> None:
    # the timeline's p99 and the generator's lag: 2.9 µs and 1.5 µs, not 3 µs and 2 µs
    scheduled = [0.01 * k for k in range(10)]
    issued = [s + 1.5e-6 for s in scheduled]
    ended = [i + 1.4e-6 for i in issued]
    times = TaskTimes(scheduled, issued, issued, ended, bytearray([OK] * 10))
    assert timeline(times)["p99"] == pytest.approx([2.9e-6], rel=1e-6)
    lag = generator_verdict(times, duration=1.0, max_lag=0.01, warmup=0.0)["lagSeconds"]
    assert lag == pytest.approx({"p50": 1.5e-6, "p99": 1.5e-6, "max": 1.5e-6}, rel=1e-6)


def test_a_summarys_spread_of_microseconds_keeps_their_digits() -> None:
    spread = stats([1.4e-6, 1.5e-6, 1.4e-6])
    assert spread.median == 1.4e-6
    assert spread.mean == pytest.approx(1.4333333e-6, rel=1e-7)
    assert spread.ci95 is not None and spread.ci95[1] > 1.5e-6
