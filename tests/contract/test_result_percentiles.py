"""The Result's exact percentiles (latencySeconds: p50, p90, p95, p97_5, p99, p99_9, max),
checked against computations of their own: the nearest rank's definition counted over the
same samples in exact fractions, a known distribution, and each runner's own histogram of the
same latencies (CONTRACT.md, The latency histogram)."""

from __future__ import annotations

import bisect
import random
from fractions import Fraction

import pytest
from helpers import run_runner

from cxlab_contract import histogram
from cxlab_contract.figures import significant
from cxlab_contract.result import latency_seconds

FRACTIONS = {
    "p50": Fraction(1, 2),
    "p90": Fraction(9, 10),
    "p95": Fraction(95, 100),
    "p97_5": Fraction(975, 1000),
    "p99": Fraction(99, 100),
    "p99_9": Fraction(999, 1000),
}


def by_definition(values: list[float], share: Fraction) -> float:
    """The smallest value with at least `share` of the values at or below it, found by
    counting (not by an index formula), in exact fractions."""
    ordered = sorted(values)
    for value in sorted(set(ordered)):
        if Fraction(bisect.bisect_right(ordered, value), len(ordered)) >= share:
            return value
    raise AssertionError("unreachable: the largest value has every value at or below it")


def _samples(seed: int) -> list[float]:
    draw = random.Random(seed)
    n = draw.choice([1, 2, 3, 7, 19, 40, 199, 200, 999, 1000, 1001, 4321])
    shape = seed % 3
    if shape == 0:  # log-uniform, 1 µs to 10 s
        return [10 ** draw.uniform(-6, 1) for _ in range(n)]
    if shape == 1:  # a few values, many ties
        return [draw.choice([0.001, 0.002, 0.05, 0.3]) for _ in range(n)]
    return [draw.expovariate(20) for _ in range(n)]  # exponential, mean 50 ms


@pytest.mark.parametrize("seed", range(30))
def test_each_percentile_is_the_nearest_rank_by_definition(seed: int) -> None:
    values = _samples(seed)
    figures = latency_seconds(sorted(values))
    for key, share in FRACTIONS.items():
        assert figures[key] == significant(by_definition(values, share)), (key, len(values))
    assert figures["max"] == significant(max(values))


def test_a_known_distribution_gives_its_percentiles() -> None:
    # 1 ms .. 10 s in steps of 1 ms, shuffled: the q-th percentile is q x 10 s
    values = [k / 1000 for k in range(1, 10_001)]
    random.Random(7).shuffle(values)
    figures = latency_seconds(sorted(values))
    assert figures == {"p50": 5.0, "p90": 9.0, "p95": 9.5, "p97_5": 9.75, "p99": 9.9,
                       "p99_9": 9.99, "max": 10.0}  # fmt: skip


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_both_runners_write_every_percentile_within_their_own_histograms_bound(
    model: str,
) -> None:
    """On real latencies (sleeps of 1-10 ms whose spread the scheduler makes): each exact
    percentile is the histogram's of the same latencies within the bucket bound, in order."""
    result = run_runner(model, "--workload", "sleep", "--tasks", "2000", "--workers", "50",
                        "--rtt", "2ms")  # fmt: skip
    figures, own = result["latencySeconds"], result["latencyHistogram"]
    order = [figures[key] for key in (*FRACTIONS, "max")]
    assert order == sorted(order), figures
    bound = histogram.error_bound(own["schema"])
    for key, share in FRACTIONS.items():
        from_histogram = histogram.quantile(own, float(share))
        assert from_histogram == pytest.approx(figures[key], rel=bound * 1.0001), key
