"""`make bench-regression`: how often a schedule's regression check cries wolf, and how often
it finds a real change, on simulated histories judged by cxlab's own `regressions()`.

A history is `runs` baseline runs and a newest one of a template of 1 or 20 points x the five
compared metrics, 3 repetitions each. Every value is its typical level times lognormal noise:
run to run with sigma `noise` (5, 10, 15 %), split between a part every point and metric of
the run shares and a part of its own (correlation "shared" 1, "half" 0.5, "independent" 0),
and 2 % between repetitions. For detection the newest run's first point got 25 % slower:
its wall time, latency p99 and CPU per task x 1.25, its throughput / 1.25 (its memory as it
was). Columns:

- false: share of unchanged histories with any finding (goal: at most 1 % at 10 % noise);
- found: share of histories with the step where a finding names the changed point;
- oracle: the same for a test that knows the run-to-run noise exactly (a z test of the point's
  wall time with its true standard deviation net of what the run shares, at the same
  Benjamini-Yekutieli level over the same number of hypotheses): what no procedure can beat
  by much, and where the step is simply within the noise.

Runs on every core; prints the table; asserts nothing.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from cxlab.schedules.history import HistoryEntry
from cxlab.schedules.regression import BAD_DIRECTION, Policy, regressions

MIB = 2**20
TYPICAL = {
    "wallSeconds": 1.2,
    "throughputPerSecond": 8000.0,
    "cpuSecondsPerTask": 4e-5,
    "latencyP99Seconds": 0.104,
    "peakRssBytes": 50.0 * MIB,
}
SLOWER = ("wallSeconds", "throughputPerSecond", "cpuSecondsPerTask", "latencyP99Seconds")
CORRELATIONS = {"shared": 1.0, "half": 0.5, "independent": 0.0}
NOISES = (0.05, 0.10, 0.15)
BASELINES = (3, 5, 10, 30)
POINTS = (1, 20)
STEP = 0.25
REPETITIONS = 3
WITHIN = 0.02


def history(
    rng: random.Random, runs: int, points: int, noise: float, correlation: float, step: float
) -> list[HistoryEntry]:
    """`runs` baseline runs and a newest one, as history entries (medians and samples)."""
    entries = []
    for run in range(runs + 1):
        shared = rng.gauss(0, 1)
        built = []
        for p in range(points):
            medians, samples = {}, {}
            for metric, typical in TYPICAL.items():
                own = rng.gauss(0, 1)
                log = noise * (math.sqrt(correlation) * shared + math.sqrt(1 - correlation) * own)
                if run == runs and p == 0 and metric in SLOWER:
                    log += math.log1p(step)
                sign = 1.0 if BAD_DIRECTION[metric] == "up" else -1.0
                reps = [typical * math.exp(sign * log + rng.gauss(0, WITHIN))
                        for _ in range(REPETITIONS)]  # fmt: skip
                medians[metric], samples[metric] = statistics.median(reps), reps
            point = {"point": f"p{p} w=10", "model": "asyncio", "n": REPETITIONS, **medians}
            if run == runs:  # a history keeps the newest run's samples only
                point["samples"] = samples
            built.append(point)
        entries.append(
            HistoryEntry.read({"run": f"nightly-{run}", "phase": "Succeeded", "points": built})
        )
    return entries


def oracle_found(
    rng: random.Random, runs: int, points: int, noise: float, correlation: float
) -> bool:
    """A z test of the changed point's wall time that knows the noise: against the baseline
    mean, net of the shared part when there are points to tell it by (what the decomposition
    removes), at the level BY gives the first of the hypotheses cxlab tests."""
    own = noise * math.sqrt(1 - correlation) if points > 1 else noise
    sd = math.sqrt(own**2 + WITHIN**2 / REPETITIONS * 1.5)  # a median of 3 draws: ~1.5x var
    draws = [rng.gauss(0, sd) for _ in range(runs + 1)]
    z = (math.log1p(STEP) + draws[-1] - statistics.fmean(draws[:-1])) / (
        sd * math.sqrt(1 + 1 / runs)
    )
    hypotheses = points * len(TYPICAL) + (len(TYPICAL) if points >= 3 else 0)
    level = 0.01 / (hypotheses * sum(1 / i for i in range(1, hypotheses + 1)))
    return 0.5 * math.erfc(z / math.sqrt(2)) <= level


def cell(args: tuple[float, str, int, int, int, int]) -> tuple[Any, ...]:
    """One row of the table: (false, found, oracle) rates."""
    noise, name, runs, points, unchanged, changed = args
    correlation = CORRELATIONS[name]
    rng = random.Random(f"{noise} {name} {runs} {points}")
    policy = Policy(baseline_runs=runs)
    false = sum(
        bool(regressions(history(rng, runs, points, noise, correlation, 0.0), policy))
        for _ in range(unchanged)
    )
    found = sum(
        any(r.point == "p0 w=10" for r in regressions(
            history(rng, runs, points, noise, correlation, STEP), policy))
        for _ in range(changed)
    )  # fmt: skip
    oracle = sum(oracle_found(rng, runs, points, noise, correlation) for _ in range(20_000))
    return noise, name, runs, points, false / unchanged, found / changed, oracle / 20_000


def main() -> None:
    unchanged = int(os.environ.get("UNCHANGED", "1000"))
    changed = int(os.environ.get("CHANGED", "200"))
    cells = [(noise, name, runs, points, unchanged, changed)
             for points in POINTS for noise in NOISES for name in CORRELATIONS
             for runs in BASELINES]  # fmt: skip
    began = time.monotonic()
    print(f"regression check on simulated histories: {unchanged} unchanged and {changed} with "
          f"a +{STEP:.0%} step of one point per row, {REPETITIONS} repetitions, "
          f"{WITHIN:.0%} between them", flush=True)  # fmt: skip
    print(f"{'points':>6} {'noise':>5} {'correlation':<11} {'runs':>4}  "
          f"{'false':>6} {'found':>6} {'oracle':>6}")  # fmt: skip
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        for noise, name, runs, points, false, found, oracle in pool.map(cell, cells):
            print(f"{points:>6} {noise:>5.0%} {name:<11} {runs:>4}  "
                  f"{false:>6.1%} {found:>6.1%} {oracle:>6.1%}", flush=True)  # fmt: skip
    print(f"({time.monotonic() - began:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
