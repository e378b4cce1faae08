"""The Result's latencyHistogram (workloads/CONTRACT.md): exponential buckets that merge
exactly. The runner builds one from its latencies; the operator and the local backend merge a
trial's Pods' histograms and read percentiles from the merged one, with the same code."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import TypedDict

from cxlab_contract import runner_contract
from cxlab_contract.figures import significant

_SETTINGS = runner_contract().latency_histogram
INITIAL_SCHEMA: int = _SETTINGS["initialSchema"]
MIN_SCHEMA: int = _SETTINGS["minSchema"]
MAX_BUCKETS: int = _SETTINGS["maxBuckets"]


class Histogram(TypedDict):
    """The Result's latencyHistogram."""

    schema: int
    zeroCount: int
    offset: int
    counts: list[int]
    sum: float
    min: float
    max: float


def bucket_index(value: float, schema: int) -> int:
    """The bucket holding value > 0: base^(i-1) < value <= base^i, base = 2^(2^-schema).
    From frexp, so that powers of two land exactly on their boundary."""
    if schema < 0:  # the index at schema 0, downscaled
        return (bucket_index(value, 0) + (1 << -schema) - 1) >> -schema
    fraction, exponent = math.frexp(value)
    if fraction == 0.5:
        return (exponent - 1) << schema
    return (exponent << schema) + math.ceil(math.log2(fraction) * (1 << schema))


def _downscaled(buckets: Counter[int], steps: int) -> Counter[int]:
    """Each step merges bucket pairs (2j-1, 2j) into j: the same bucketing at schema - 1."""
    if steps <= 0:
        return buckets
    coarser: Counter[int] = Counter()
    for index, count in buckets.items():
        coarser[(index + (1 << steps) - 1) >> steps] += count
    return coarser


def _fit(buckets: Counter[int], schema: int) -> tuple[Counter[int], int]:
    """Lower the schema until the non-empty buckets span at most MAX_BUCKETS."""
    while buckets and max(buckets) - min(buckets) + 1 > MAX_BUCKETS and schema > MIN_SCHEMA:
        buckets, schema = _downscaled(buckets, 1), schema - 1
    return buckets, schema


def _document(
    buckets: Counter[int], schema: int, zero: int, total: float, low: float, high: float
) -> Histogram:
    used = {i: c for i, c in buckets.items() if c}
    offset = min(used) if used else 0
    counts = [used.get(i, 0) for i in range(offset, max(used) + 1)] if used else []
    return {
        "schema": schema,
        "zeroCount": zero,
        "offset": offset,
        "counts": counts,
        "sum": total,
        "min": low,
        "max": high,
    }


def build(latencies: Iterable[float]) -> Histogram:
    """The histogram of a runner's latencies (seconds)."""
    buckets: Counter[int] = Counter()
    zero, total, low, high = 0, 0.0, math.inf, 0.0
    for value in latencies:
        total += value
        low, high = min(low, value), max(high, value)
        if value <= 0:
            zero += 1
        else:
            buckets[bucket_index(value, INITIAL_SCHEMA)] += 1
    buckets, schema = _fit(buckets, INITIAL_SCHEMA)
    low = 0.0 if low == math.inf else low
    # To significant digits, never fixed decimals: 1.4 µs stays 1.4 µs (figures.py).
    return _document(buckets, schema, zero, significant(total), significant(low), significant(high))


def count(histogram: Histogram) -> int:
    return int(histogram["zeroCount"]) + sum(histogram["counts"])


def merge(histograms: list[Histogram]) -> Histogram:
    """One histogram of every latency the given ones hold: bucket for bucket what build()
    makes of all the latencies together (tests/analysis/test_merge.py)."""
    schema = min(h["schema"] for h in histograms)
    buckets: Counter[int] = Counter()
    for histogram in histograms:
        own = Counter({histogram["offset"] + k: c for k, c in enumerate(histogram["counts"]) if c})
        buckets.update(_downscaled(own, histogram["schema"] - schema))
    buckets, schema = _fit(buckets, schema)
    filled = [h for h in histograms if count(h)]
    return _document(
        buckets,
        schema,
        sum(h["zeroCount"] for h in histograms),
        significant(sum(h["sum"] for h in histograms)),
        min((h["min"] for h in filled), default=0.0),
        max((h["max"] for h in filled), default=0.0),
    )


def error_bound(schema: int) -> float:
    """How far quantile() can be from the exact nearest-rank value, relative to it, at this
    schema: (base - 1) / (base + 1), 1.08 % at schema 5, 17.2 % at schema 1. The middle
    2 x base^i / (base + 1) (the harmonic mean of the bucket's bounds) is that far from both
    ends of (base^(i-1), base^i], relative to each end, and closer to anything between."""
    base = math.pow(2.0, math.pow(2.0, -schema))
    return (base - 1) / (base + 1)


def quantile(histogram: Histogram, fraction: float) -> float:
    """Nearest-rank quantile: of the values v_1 <= ... <= v_n the histogram holds, it
    approximates v_r with r = max(1, ceil(fraction x n)), the smallest value with at least
    that fraction of the values at or below it. Read as the middle of the bucket holding rank
    r, kept within [min, max]: within error_bound(schema) of v_r, relative to it (1.08 % at
    schema 5; tests/contract/test_histogram_bounds.py). 0 for an empty histogram."""
    total = count(histogram)
    if total == 0:
        return 0.0
    rank = max(1, math.ceil(fraction * total))
    if rank <= histogram["zeroCount"]:
        return 0.0
    seen = histogram["zeroCount"]
    base = 2.0 ** (2.0 ** -histogram["schema"])
    for k, bucket_count in enumerate(histogram["counts"]):
        seen += bucket_count
        if seen >= rank:
            middle = 2 * base ** (histogram["offset"] + k) / (base + 1)
            return float(min(max(middle, histogram["min"]), histogram["max"]))
    return float(histogram["max"])


def coarser(histogram: Histogram) -> Histogram:
    """The same histogram one schema lower (bucket pairs merged), its sum, min and max as
    they were: a step of an oversized Result's cut."""
    own = Counter({histogram["offset"] + k: c for k, c in enumerate(histogram["counts"]) if c})
    return _document(
        _downscaled(own, 1),
        histogram["schema"] - 1,
        histogram["zeroCount"],
        histogram["sum"],
        histogram["min"],
        histogram["max"],
    )
