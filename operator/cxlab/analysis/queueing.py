"""How many workers a Pod needs so that tasks arriving at random seldom wait for one and the
latency objective holds with the wait in it: the queueing model under the capacity plan
(docs/capacity-plan.md works an example by hand). Pure.

The model of one Pod: tasks arrive at random (a Poisson process, the harder case: arrivals
spaced evenly wait less) at λ tasks/s, first come first served by c workers; a task holds its
worker for a service time S drawn from the measured distribution (a Result's histogram of the
time a task spent on its worker), independently of the other tasks, as long as the Pod runs
no faster than it was measured. Then, with T = E[S] and the offered load a = λ·T (the workers
busy on average, Little's law):

    occupancy  rho = a / c                                   (c > a, or the queue grows forever)
    P(wait)    C(c, a), Erlang's C formula                 exact for exponential service
    E[wait]    C(c, a) · T / (c - a) · v                   v = (1 + cv²) / 2 for cv² >= 1
                                                           (Allen-Cunneen: exact for exponential
                                                           service and for one worker,
                                                           Pollaczek-Khinchine); below it
                                                           Cosmetatos' interpolation between
                                                           M/M/c and his M/D/c correction
    a waiting task waits an exponential time of mean E[wait] / C(c, a)   (exact for M/M/c)

Against the exact M/D/c (Crommelin's chain, Franx's waiting-time formula; tests/analysis/
test_queueing.py) this never plans a worker too few in the cases checked, and plans one too
many where few workers serve near-constant times (2 workers at 25/s of 53 ms: a p99 of 213 ms
predicted, 196 ms exact): an exponential wait's tail is longer than a constant service's.

cv² is the squared coefficient of variation of S. A task's latency is its wait plus its service,
independent of each other under first come first served, so its q-quantile is the t for which

    P(S + W > t) = Σ_s P(S = s) · P(W > t - s) = 1 - q,   P(W > x) = C(c, a) · e^(-x·C/E[wait])

References: J. D. C. Little, "A proof for the queuing formula L = λW" (1961); A. K. Erlang (1917),
whose C formula is here computed through Erlang B's recursion; A. O. Allen, "Probability,
Statistics, and Queueing Theory" (1990), the M/G/c approximation; G. P. Cosmetatos, "Some
approximate equilibrium results for the multi-server queue (M/G/r)", Operational Research
Quarterly 27 (1976)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cxlab_contract.histogram import Histogram, count

_BISECTIONS = 100


@dataclass(frozen=True)
class Service:
    """A measured service-time distribution: (seconds, probability) points and their moments."""

    points: tuple[tuple[float, float], ...]
    mean: float
    scv: float  # squared coefficient of variation, Var(S) / E[S]²

    @classmethod
    def of(cls, points: Sequence[tuple[float, float]], mean: float | None = None) -> Service:
        """From points whose weights need not sum to 1; mean: the exact mean when the points
        are rounded (a histogram's buckets), else theirs."""
        total = sum(w for _, w in points)
        normal = tuple((s, w / total) for s, w in points if w > 0)
        own = sum(s * p for s, p in normal)
        mean = own if mean is None else mean
        second = sum(s * s * p for s, p in normal)
        scv = max(0.0, second - mean * mean) / (mean * mean) if mean > 0 else 0.0
        return cls(normal, mean, scv)

    @classmethod
    def of_histogram(cls, histogram: Histogram) -> Service:
        """Each bucket as its upper edge, within [min, max]: a percentile read from the points
        is then never below the value it stands for (a bucket's middle, where
        histogram.quantile reads it, is up to half a bucket low: 1.1 % at schema 5, enough to
        plan a worker too few at a bound). The mean exactly, sum / count."""
        points: list[tuple[float, float]] = [(0.0, histogram["zeroCount"])]
        base = 2.0 ** (2.0 ** -histogram["schema"])
        for k, n in enumerate(histogram["counts"]):
            upper = base ** (histogram["offset"] + k)  # bucket i holds (base^(i-1), base^i]
            points.append((min(max(upper, histogram["min"]), histogram["max"]), n))
        return cls.of(points, histogram["sum"] / count(histogram))


def erlang_c(workers: int, load: float) -> float:
    """C(c, a): the probability that an arrival finds all c workers busy, offered load a < c.
    Through Erlang B's recursion, B(k) = a·B(k-1) / (k + a·B(k-1)), which neither overflows
    nor loses precision at thousands of workers as a^c / c! would."""
    if not 0 <= load < workers:
        raise ValueError(f"Erlang C needs 0 <= load < workers, got {load} and {workers}")
    return _c_from_b(workers, load, _erlang_b(workers, load))


def _erlang_b(workers: int, load: float) -> float:
    b = 1.0
    for k in range(1, workers + 1):
        b = load * b / (k + load * b)
    return b


def _c_from_b(workers: int, load: float, b: float) -> float:
    return workers * b / (workers - load * (1 - b))


@dataclass(frozen=True)
class Queue:
    """One Pod's queue at a rate with c workers: what the plan promises for it."""

    workers: int
    occupancy: float
    wait_probability: float
    mean_wait: float  # seconds, over every task (those that wait none included)
    latency: float  # seconds, the objective's quantile of wait plus service


def _latency_quantile(
    service: Service, wait_probability: float, waiting_mean: float, q: float
) -> float:
    """The smallest t with P(S + W > t) <= 1 - q, by bisection (the tail falls as t grows)."""

    def tail(t: float) -> float:
        total = 0.0
        for s, p in service.points:
            if t < s:
                total += p
            elif wait_probability > 0:
                total += p * wait_probability * math.exp(-(t - s) / waiting_mean)
        return total

    low = 0.0
    high = max(s for s, _ in service.points)
    if wait_probability > 1 - q:
        high += waiting_mean * math.log(wait_probability / (1 - q))
    # Bisection leaves `high` at a t whose tail is within bound; the rounding slack of the
    # floats makes the last step's tail compare a hair above it, hence the tolerance.
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if tail(middle) <= (1 - q) * (1 + 1e-12):
            high = middle
        else:
            low = middle
    return high


def queue(rate: float, service: Service, workers: int, q: float) -> Queue | None:
    """The queue of one Pod; None when the workers cannot keep up (a >= c)."""
    load = rate * service.mean
    if load >= workers:
        return None
    return _queue(rate, service, workers, q, erlang_c(workers, load))


def _queue(rate: float, service: Service, workers: int, q: float, c: float) -> Queue:
    load = rate * service.mean
    mean_wait = c * service.mean / (workers - load) * _variability(workers, load, service.scv)
    waiting_mean = mean_wait / c if c > 0 else 0.0
    return Queue(
        workers=workers,
        occupancy=load / workers,
        wait_probability=c,
        mean_wait=mean_wait,
        latency=_latency_quantile(service, c, waiting_mean, q),
    )


def _variability(workers: int, load: float, scv: float) -> float:
    """E[wait] over M/M/c's. Allen-Cunneen's (1 + cv²) / 2 above cv² = 1; below it
    Cosmetatos' interpolation between M/M/c and his M/D/c correction, which Allen-Cunneen's
    1/2 misses by up to a fifth at a few workers (M/D/8 at rho 0.625: 15 % more wait)."""
    if scv >= 1 or load <= 0:  # no load: no wait to scale
        return (1 + scv) / 2
    rho = load / workers
    deterministic = 0.5 * (
        1 + (1 - rho) * (workers - 1) * (math.sqrt(4 + 5 * workers) - 2) / (16 * rho * workers)
    )
    return scv + (1 - scv) * deterministic


def smallest_workers(
    rate: float, service: Service, q: float, objective: float, max_wait_probability: float,
    most: int,
) -> Queue | None:  # fmt: skip
    """The fewest workers (at most `most`) for which P(wait) <= max_wait_probability and the
    q-quantile of the latency, wait included, is <= objective; None when none is."""
    load = rate * service.mean
    first = math.floor(load) + 1
    if first > most:
        return None
    b = _erlang_b(first, load)
    workers = first
    while True:
        c = _c_from_b(workers, load, b)
        if c <= max_wait_probability:
            candidate = _queue(rate, service, workers, q, c)
            if candidate.latency <= objective:
                return candidate
        # Past the point where hardly any task waits, more workers change nothing.
        if c < 1e-12 or workers >= most:
            return None
        workers += 1
        b = load * b / (workers + load * b)
