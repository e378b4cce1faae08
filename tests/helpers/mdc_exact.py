"""The M/D/c queue exactly, as references for the capacity plan's queueing model (which
approximates it): Crommelin's chain of the number in the system, and Franx's waiting-time
formula from it. Shares nothing with cxlab.analysis.queueing.

Crommelin (1932): with c workers each busy a constant D, every task in service at a time t has
left by t + D, and every arrival of (t, t + D] is still there, so N(t + D) = max(N(t) - c, 0)
+ A, A Poisson of mean a = λD: a Markov chain whose stationary law is the law of N at any
time. Franx (2001, "A simple solution for the M/D/c waiting time distribution"): a task
arriving at t waits at most kD + u (0 <= u < D) exactly when the tasks present at t + u - D in
excess of c, plus those arriving in (t + u - D, t), are at most (k + 1)c - 1:

    P(W <= kD + u) = P(max(N - c, 0) + A' <= (k + 1)c - 1),   A' Poisson of mean λ(D - u)

Also the recursion an M/D/c simulation needs: first come first served with constant service,
task n starts on the worker task n - c leaves, start_n = max(arrival_n, start_(n-c) + D)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable


def poisson(mean: float) -> list[float]:
    """P(A = k) for k = 0 .. until the terms are negligible."""
    terms = [math.exp(-mean)]
    while len(terms) <= mean or terms[-1] > 1e-18:
        terms.append(terms[-1] * mean / len(terms))
    return terms


class MDc:
    """One M/D/c queue: λ arrivals/s, constant service D, c workers."""

    def __init__(
        self, rate: float, service: float, workers: int,
        broken: Callable[[MDc], bool] = lambda queue: False,
    ) -> None:  # fmt: skip
        """broken: a bound on the tail the caller needs; from an empty queue the chain's law
        grows stochastically toward the stationary one, so a tail over a bound on the way is
        over it for good, and the iteration stops there (self.settled False)."""
        if rate * service >= workers:
            raise ValueError("the queue grows forever")
        self.rate, self.service, self.workers = rate, service, workers
        self.excess = [1.0]
        self.settled = self._settle(broken)

    def _settle(self, broken: Callable[[MDc], bool]) -> bool:
        """The law of max(N - c, 0), by iterating the chain from an empty queue until it
        stops moving."""
        arrivals, c = poisson(self.rate * self.service), self.workers
        law = [1.0]
        for step_number in range(200_000):
            excess = [sum(law[: c + 1]), *law[c + 1 :]]
            step = [0.0] * (len(excess) + len(arrivals) - 1)
            for i, p in enumerate(excess):
                for k, q in enumerate(arrivals):
                    step[i + k] += p * q
            while step[-1] < 1e-20:
                step.pop()
            moved = sum(abs(x - y) for x, y in zip(step, law, strict=False))
            moved += sum(step[len(law) :]) + sum(law[len(step) :])
            law = step
            self.excess = [sum(law[: c + 1]), *law[c + 1 :]]
            if moved < 1e-14:
                return True
            if step_number % 20 == 0 and broken(self):
                return False
        raise AssertionError("the chain did not settle")

    def wait_over(self, seconds: float) -> float:
        """P(W > seconds), Franx's formula."""
        k, u = divmod(seconds, self.service)
        later = poisson(self.rate * (self.service - u))
        most = (int(k) + 1) * self.workers - 1
        below = sum(p * sum(later[: most - i + 1]) for i, p in enumerate(self.excess[: most + 1]))
        return 1.0 - below

    def latency_quantile(self, q: float) -> float:
        """The q-quantile of wait + D, by bisection on Franx's tail."""
        low, high = 0.0, self.service
        while self.wait_over(high) > 1 - q:
            high *= 2
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (middle, high) if self.wait_over(middle) > 1 - q else (low, middle)
        return high + self.service


def fewest_workers(
    rate: float, service: float, q: float, objective: float, max_wait_probability: float
) -> int:
    """The fewest workers for which P(wait) <= the bound and the q-quantile of wait + D is
    within the objective, exactly."""

    def broken(queue: MDc) -> bool:
        return (
            queue.wait_over(0.0) > max_wait_probability
            or queue.wait_over(objective - service) > 1 - q
        )

    workers = math.floor(rate * service) + 1
    while True:
        queue = MDc(rate, service, workers, broken)
        if queue.settled and not broken(queue):
            return workers
        workers += 1


def simulated_waits(
    rate: float, service: float, workers: int, tasks: int, seed: int = 1
) -> list[float]:
    """Each task's wait in a simulated M/D/c, the first tenth left out (the empty start)."""
    rng = random.Random(seed)
    now, starts, waits = 0.0, [], []
    for n in range(tasks):
        now += rng.expovariate(rate)
        start = now if n < workers else max(now, starts[n - workers] + service)
        starts.append(start)
        waits.append(start - now)
    return waits[tasks // 10 :]


def fewest_replicas(
    rate: float, service: float, workers: int, q: float, objective: float,
    max_wait_probability: float = 1.0,
) -> int:  # fmt: skip
    """The fewest replicas of `workers` each, arrivals spread at random over them (each an
    M/D/c at rate / replicas), that keep P(wait) and the q-quantile of wait + D, exactly."""

    def broken(queue: MDc) -> bool:
        return (
            queue.wait_over(0.0) > max_wait_probability
            or queue.wait_over(objective - service) > 1 - q
        )

    replicas = 1
    while True:
        each = rate / replicas
        if each * service < workers:
            queue = MDc(each, service, workers, broken)
            if queue.settled and not broken(queue):
                return replicas
        replicas += 1
