"""An arrival run's schedule (CONTRACT.md, Duration runs): the rate profile r(t) from --rate and
--stages, its integral Λ, the inverse that places arrival k at Λ⁻¹(s_k), and the uniform and
Poisson schedules. Shared by the Python runner (which issues the arrivals) and the spec (which
bounds the expected arrivals Λ(D) before any runner starts); the Go runner has its own copy,
checked against the same cases (workloads/testdata/arrivals.json)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from cxlab_contract.durations import format_duration, parse_duration

# The uniform schedule's last point s_k < Λ(D) must not appear through rounding in Λ.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Stage:
    seconds: float
    target: float  # arrivals per second at the stage's end


def parse_stages(text: str) -> tuple[Stage, ...]:
    """`D1:R1,D2:R2` (Go durations, decimal rates) as stages; ValueError names what is wrong."""
    stages = []
    for part in text.split(","):
        duration, colon, rate = part.strip().partition(":")
        if not colon:
            raise ValueError(f"stage {part.strip()!r} is not DURATION:RATE (for example 30s:100)")
        try:
            target = float(rate)
        except ValueError:
            raise ValueError(f"stage {part.strip()!r}: {rate!r} is not a rate") from None
        if not math.isfinite(target):
            raise ValueError(f"stage {part.strip()!r}: the rate must be a number")
        stages.append(Stage(parse_duration(duration), target))
    return tuple(stages)


def format_stages(stages: Sequence[Stage]) -> str:
    return ",".join(f"{format_duration(s.seconds)}:{s.target:.9g}" for s in stages)


@dataclass(frozen=True)
class _Piece:
    """One stage on the time axis: r(t0 + u) = a + b·u for 0 ≤ u ≤ seconds, Λ(t0) = start."""

    t0: float
    seconds: float
    a: float
    b: float
    start: float

    @property
    def end(self) -> float:
        return self.start + self.a * self.seconds + self.b * self.seconds**2 / 2


class RateProfile:
    """r(t): `rate` throughout `duration`, or ramping linearly through `stages` from `rate`."""

    def __init__(self, rate: float, stages: Sequence[Stage] = (), duration: float = 0.0) -> None:
        self.stages = tuple(stages)  # as given: none for a constant rate
        if not stages:
            stages = (Stage(duration, rate),)
        self.pieces: list[_Piece] = []
        t0, start, previous = 0.0, 0.0, rate
        for stage in stages:
            slope = (stage.target - previous) / stage.seconds if stage.seconds > 0 else 0.0
            piece = _Piece(t0, stage.seconds, previous, slope, start)
            self.pieces.append(piece)
            t0, start, previous = t0 + stage.seconds, piece.end, stage.target
        self.duration = t0

    def expected_arrivals(self) -> float:
        """Λ(D): the mean number of arrivals over the run."""
        return self.pieces[-1].end if self.pieces else 0.0

    def rate_at(self, t: float) -> float:
        for piece in self.pieces:
            if t <= piece.t0 + piece.seconds and piece.seconds > 0:
                return piece.a + piece.b * max(0.0, t - piece.t0)
        return 0.0

    def inverse(self, s: float) -> float:
        """Λ⁻¹(s) for 0 ≤ s ≤ Λ(D): the first time the integral reaches s."""
        for piece in self.pieces:
            if piece.end >= s and piece.end > piece.start:
                x = max(0.0, s - piece.start)
                if x == 0:
                    return piece.t0
                if piece.b == 0:
                    return piece.t0 + x / piece.a
                # (-a + √(a² + 2bx)) / b, written without the cancellation for small b·x.
                return piece.t0 + 2 * x / (piece.a + math.sqrt(piece.a**2 + 2 * piece.b * x))
        return self.duration

    def schedule(self, process: str, seed: int = 1) -> list[float]:
        """Offsets (seconds from the task phase's start) of every arrival: s_k = k (uniform) or
        the running sum of Exp(1) gaps (poisson, from `seed`), for every s_k < Λ(D)."""
        total = self.expected_arrivals()
        if process == "uniform":
            return [self.inverse(k) for k in range(math.ceil(total - _EPSILON))]
        draw = random.Random(seed).expovariate
        offsets, s = [], draw(1.0)
        while s < total:
            offsets.append(self.inverse(s))
            s += draw(1.0)
        return offsets
