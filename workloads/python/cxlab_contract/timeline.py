"""A duration run's timeline (CONTRACT.md, Duration runs): per interval, the tasks that ended,
the mean tasks in flight and the p99 latency. Its halving is one step of an oversized Result's
cut (result.encode) and of putting Pods' timelines side by side."""

from __future__ import annotations

import math
from typing import TypedDict

from cxlab_contract import runner_contract

MAX_INTERVALS: int = runner_contract().timeline_max_intervals


class Timeline(TypedDict):
    intervalSeconds: float
    completed: list[int]
    inFlight: list[float]
    p99: list[float]


def interval_for(span: float) -> float:
    """The smallest 2^j seconds (j ≥ 0) cutting [0, span] into at most MAX_INTERVALS."""
    interval = 1.0
    while math.floor(span / interval) + 1 > MAX_INTERVALS:
        interval *= 2
    return interval


def halve(timeline: Timeline) -> Timeline:
    """Intervals paired: ended tasks summed, in flight averaged (a lone last interval's other
    half is past the run, where nothing is in flight), p99 the larger: an upper bound."""

    def pairs(values: list) -> list[tuple]:  # type: ignore[type-arg]
        return [tuple(values[i : i + 2]) for i in range(0, len(values), 2)]

    return {
        "intervalSeconds": timeline["intervalSeconds"] * 2,
        "completed": [sum(pair) for pair in pairs(timeline["completed"])],
        "inFlight": [round(sum(pair) / 2, 3) for pair in pairs(timeline["inFlight"])],
        "p99": [max(pair) for pair in pairs(timeline["p99"])],
    }
