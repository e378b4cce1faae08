"""How a service's capacity grows with its replicas, measured, not assumed linear: the
Universal Scalability Law (N. J. Gunther, "Guerrilla Capacity Planning", 2007) fitted to the
capacities measured at several replica counts. Pure.

    X(N) = gamma·N / (1 + sigma·(N - 1) + kappa·N·(N - 1))

gamma is one replica's capacity, sigma the share of the work that serializes (contention: a
shared database, a lock), kappa the cost of keeping replicas coherent with each other
(crosstalk), both >= 0. sigma = kappa = 0 is linear scaling; kappa > 0 has a peak at
N* = sqrt((1 - sigma) / kappa), past which more replicas serve less.

The fit is the least-squares one over gamma, sigma and kappa together, as the R package `usl`
(S. Möding) fits since its version 2: gamma is fitted, not taken from the one-replica point,
whose noise would otherwise bend the whole curve. By Levenberg-Marquardt steps held to sigma,
kappa >= 0. With two replica counts gamma and sigma go through both points and kappa is held
at 0 (the plan says so)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

_STEPS = 200


@dataclass(frozen=True)
class Scalability:
    gamma: float  # one replica's capacity, tasks/s
    sigma: float  # contention
    kappa: float  # coherency
    points: int  # the replica counts it was fitted to

    def capacity(self, replicas: float) -> float:
        """X(N): the capacity of N replicas together."""
        return self.gamma * replicas / _denominator(self.sigma, self.kappa, replicas)

    @property
    def peak(self) -> float | None:
        """N*, the replica count of the most capacity (None: it grows without bound)."""
        if self.kappa <= 0:
            return None
        return math.sqrt(max(0.0, 1 - self.sigma) / self.kappa)

    def replicas_for(self, rate: float, most: int = 10_000) -> int | None:
        """The fewest replicas whose capacity is at least `rate` (None: no count up to the
        peak, or `most`, reaches it)."""
        limit = most if self.peak is None else min(most, math.floor(self.peak) + 1)
        for n in range(1, limit + 1):
            if self.capacity(n) >= rate:
                return n
        return None


def _denominator(sigma: float, kappa: float, n: float) -> float:
    return 1 + sigma * (n - 1) + kappa * n * (n - 1)


def fit(measured: Sequence[tuple[float, float]]) -> Scalability:
    """The USL through (replicas, capacity) points: two or more replica counts (a count
    measured more than once counts each time)."""
    counts = {n for n, _ in measured}
    if len(counts) < 2 or any(n < 1 or x <= 0 for n, x in measured):
        raise ValueError(f"the USL needs capacities > 0 at two or more replica counts >= 1, "
                         f"got {list(measured)}")  # fmt: skip
    lowest = min(counts)
    gamma = max(x / n for n, x in measured if n == lowest)
    params = _levenberg_marquardt(measured, [gamma, 0.0, 0.0], [True, True, len(counts) >= 3])
    return Scalability(gamma=params[0], sigma=params[1], kappa=params[2], points=len(counts))


def _residuals(measured: Sequence[tuple[float, float]], p: Sequence[float]) -> list[float]:
    return [x - p[0] * n / _denominator(p[1], p[2], n) for n, x in measured]


def _cost(measured: Sequence[tuple[float, float]], p: Sequence[float]) -> float:
    return sum(r * r for r in _residuals(measured, p))


def _jacobian(measured: Sequence[tuple[float, float]], p: Sequence[float]) -> list[list[float]]:
    """d model / d (gamma, sigma, kappa) at each point."""
    rows = []
    for n, _ in measured:
        d = _denominator(p[1], p[2], n)
        rows.append([n / d, -p[0] * n * (n - 1) / d**2, -p[0] * n * n * (n - 1) / d**2])
    return rows


def _levenberg_marquardt(
    measured: Sequence[tuple[float, float]], start: list[float], free: list[bool]
) -> list[float]:
    """Least squares over the free parameters, sigma and kappa held >= 0: Marquardt's scaling by
    the diagonal, since kappa is orders of magnitude below sigma."""
    p, damping = list(start), 1e-3
    cost = _cost(measured, p)
    index = [i for i, f in enumerate(free) if f]
    for _ in range(_STEPS):
        jac, res = _jacobian(measured, p), _residuals(measured, p)
        jtj = [[sum(row[i] * row[j] for row in jac) for j in index] for i in index]
        jtr = [sum(row[i] * r for row, r in zip(jac, res, strict=True)) for i in index]
        improved = False
        while damping < 1e12:
            a = [[jtj[i][j] + (damping * jtj[i][i] if i == j else 0.0) for j in range(len(index))]
                 for i in range(len(index))]  # fmt: skip
            step = _solve(a, jtr)
            trial = list(p)
            for k, i in enumerate(index):
                trial[i] = p[i] + step[k]
            trial[1], trial[2] = max(0.0, trial[1]), max(0.0, trial[2])
            if (new := _cost(measured, trial)) < cost:
                done = cost - new <= 1e-15 * max(cost, 1e-300)
                p, cost, damping, improved = trial, new, max(damping / 10, 1e-12), True
                if done:
                    return p
                break
            damping *= 10
        if not improved:
            return p
    return p


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """a x = b by Gaussian elimination with partial pivoting (a small, symmetric system);
    a singular direction gets no step."""
    size = len(b)
    m = [[*row, value] for row, value in zip(a, b, strict=True)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-300:
            continue
        for r in range(col + 1, size):
            factor = m[r][col] / m[col][col]
            for c in range(col, size + 1):
                m[r][c] -= factor * m[col][c]
    x = [0.0] * size
    for r in range(size - 1, -1, -1):
        if abs(m[r][r]) < 1e-300:
            continue
        x[r] = (m[r][size] - sum(m[r][c] * x[c] for c in range(r + 1, size))) / m[r][r]
    return x
