"""An M/G/c queue simulated (first come first served, c workers, Poisson arrivals, service
times drawn independently from a discrete distribution): each task's wait. It shares
nothing with cxlab.analysis.queueing, whose approximations it checks."""

from __future__ import annotations

import bisect
import heapq
import itertools
import random
from collections.abc import Sequence


def simulated_waits(
    rate: float, service: Sequence[tuple[float, float]], workers: int, tasks: int, seed: int = 1
) -> list[float]:
    """Each task's wait, the first tenth left out (the empty start). `service`: (seconds,
    probability) points."""
    rng = random.Random(seed)
    values = [s for s, _ in service]
    cumulative = list(itertools.accumulate(p for _, p in service))
    total = cumulative[-1]
    free = [0.0] * workers  # when each worker is next free, a heap
    now, waits = 0.0, []
    for _ in range(tasks):
        now += rng.expovariate(rate)
        start = max(now, free[0])
        drawn = values[bisect.bisect_left(cumulative, rng.random() * total)]
        heapq.heapreplace(free, start + drawn)
        waits.append(start - now)
    return waits[tasks // 10 :]


def wait_probability(
    rate: float, service: Sequence[tuple[float, float]], workers: int, tasks: int, seed: int = 1
) -> float:
    """The share of tasks that waited for a worker."""
    waits = simulated_waits(rate, service, workers, tasks, seed)
    return sum(w > 0 for w in waits) / len(waits)
