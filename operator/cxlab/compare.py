"""Two runs of one experiment (or schedule template), point by point (`cxlab compare A B`).

Each run comes as a history entry (cxlab.schedules.history): per point, every repetition's
value of each metric (its `samples`), or only the median when the entry kept none (a
schedule's older runs, a run of one repetition), which then counts as one repetition. Points
are matched by their key (`point_key`); a point of one run only is listed as added or removed.

Per point and metric:
- before -> after: the medians of A's and of B's repetitions, and the change, after / before - 1;
- each side's 95 % interval: a Student t interval of the mean of the logarithms, back-transformed
  (an interval of the geometric mean), from two repetitions on;
- the test: Welch's t test on the logarithms, two-sided, from two repetitions on each side
  (timings vary multiplicatively, so the log scale is where they are symmetric, as in
  cxlab.schedules.regression); the p-values of every point x metric tested are adjusted
  together by Benjamini-Yekutieli (false discovery rate under any dependence between them);
- the verdict: `worse` or `better` (which way is worse: BAD_DIRECTION) when the adjusted p is
  at most the significance and the change is at least `min_change` on the log scale, as the
  schedules' policy has it (a factor of 1.1 either way for 0.10: +10 %, or -9.1 %); `same`
  otherwise; `n/a` when either side has fewer than two repetitions (nothing to test).

The unit here is the repetition: the test says whether these two runs differ, and repetitions
of one run share its node, load and neighbours, so two runs of unchanged code differ more
often than the significance says. Whether a run is worse than the runs before it is what a
schedule's regression test (and `cxlab history`) answers, with the run as the unit.

Pure: two entries in, a typed comparison out."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from cxlab.analysis.stats import t975, welch_t_test
from cxlab.schedules.history import COMPARED, HistoryEntry, HistoryPoint
from cxlab.schedules.regression import BAD_DIRECTION, Policy, benjamini_yekutieli

Verdict = Literal["worse", "better", "same", "n/a"]
VERDICTS: tuple[Verdict, ...] = ("worse", "better", "same", "n/a")
# Repetitions each side needs for an interval and a test: one value has no spread.
MIN_TO_TEST = 2


class NothingToCompare(ValueError):
    """Two runs without a point in common (or one without any point): one line saying why."""


@dataclass(frozen=True)
class ComparePolicy:
    """When a change counts: the schedules' defaults (cxlab.schedules.regression.Policy)."""

    significance: float = Policy.significance
    min_change: float = Policy.min_relative_change

    def __post_init__(self) -> None:
        if not 0 < self.significance < 1:
            raise ValueError(f"significance must be in (0, 1), not {self.significance}")
        if self.min_change < 0:
            raise ValueError(f"min_change cannot be negative, not {self.min_change}")


@dataclass(frozen=True)
class Side:
    """One metric of one point in one run."""

    n: int
    """Repetitions compared: every sample, 1 for a median alone, 0 when none was measured."""
    median: float | None
    interval: tuple[float, float] | None
    """95 %, of the geometric mean; None below MIN_TO_TEST repetitions."""


@dataclass(frozen=True)
class Change:
    """One metric of one point in both runs."""

    point: str
    metric: str
    before: Side
    after: Side
    change: float | None
    """after / before - 1, of the medians; None when either is missing."""
    p_value: float | None
    """Two-sided, adjusted (Benjamini-Yekutieli) with every other test; None: not tested."""
    verdict: Verdict


@dataclass(frozen=True)
class Comparison:
    """B against A."""

    before: str
    """A's run name."""
    after: str
    changes: tuple[Change, ...]
    """Every point of both runs, in A's order, each metric in COMPARED order."""
    added: tuple[str, ...]
    """Points only B has."""
    removed: tuple[str, ...]
    """Points only A has."""
    tests: int
    """The hypotheses adjusted together."""
    policy: ComparePolicy

    def count(self, verdict: Verdict) -> int:
        return sum(c.verdict == verdict for c in self.changes)

    @property
    def worse(self) -> bool:
        return any(c.verdict == "worse" for c in self.changes)


def compare(
    before: HistoryEntry, after: HistoryEntry, policy: ComparePolicy = ComparePolicy()
) -> Comparison:
    """B (`after`) against A (`before`); NothingToCompare when they share no point."""
    points_a = {p.point: p for p in before.points or []}
    points_b = {p.point: p for p in after.points or []}
    for which, entry, points in (("A", before, points_a), ("B", after, points_b)):
        if not points:
            raise NothingToCompare(
                f"{which} ({entry.run}, {entry.phase}) has no points: it measured nothing"
            )
    common = [key for key in points_a if key in points_b]
    if not common:
        raise NothingToCompare(
            f"A ({before.run}) and B ({after.run}) have no point in common: runs of different "
            f"experiments? A has {_listed(points_a)}; B has {_listed(points_b)}"
        )
    pairs = [
        (key, metric, _values(points_a[key], metric), _values(points_b[key], metric))
        for key in common
        for metric in COMPARED
        if _measures(points_a[key], metric) or _measures(points_b[key], metric)
    ]
    raw = [_two_sided_p(a, b) for _, _, a, b in pairs]
    tested = [p for p in raw if p is not None]
    adjusted = iter(benjamini_yekutieli(tested))
    changes = []
    for (key, metric, a, b), p in zip(pairs, raw, strict=True):
        p_value = None if p is None else next(adjusted)
        changes.append(_change(key, metric, a, b, p_value, policy))
    return Comparison(
        before=before.run,
        after=after.run,
        changes=tuple(changes),
        added=tuple(key for key in points_b if key not in points_a),
        removed=tuple(key for key in points_a if key not in points_b),
        tests=len(tested),
        policy=policy,
    )


def _listed(points: Iterable[str], most: int = 4) -> str:
    keys = list(points)
    shown = ", ".join(keys[:most])
    return shown + (f" and {len(keys) - most} more" if len(keys) > most else "")


def _measures(point: HistoryPoint, metric: str) -> bool:
    """Whether the point has the metric at all (a service variant's point has its own)."""
    return point.value(metric) is not None or bool((point.samples or {}).get(metric))


def _values(point: HistoryPoint, metric: str) -> list[float]:
    """Every repetition's value, or the median alone when the entry kept no samples; only
    values the log scale can take (a zero throughput has no ratio to compare)."""
    values = (point.samples or {}).get(metric)
    if not values:
        median = point.value(metric)
        values = [] if median is None else [median]
    return [float(v) for v in values if math.isfinite(v) and v > 0]


def _side(values: Sequence[float]) -> Side:
    if not values:
        return Side(0, None, None)
    median = float(statistics.median(values))
    if len(values) < MIN_TO_TEST:
        return Side(len(values), median, None)
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Side(len(values), median, (math.exp(mean - half), math.exp(mean + half)))


def _two_sided_p(before: Sequence[float], after: Sequence[float]) -> float | None:
    """Welch's two-sided p on the logarithms; None when a side has too few repetitions."""
    if len(before) < MIN_TO_TEST or len(after) < MIN_TO_TEST:
        return None
    tested = welch_t_test([math.log(v) for v in after], [math.log(v) for v in before], "up")
    if tested is None:  # every value equal on both sides: nothing changed
        return 1.0
    _, one_sided = tested
    return min(1.0, 2 * min(one_sided, 1 - one_sided))


def _change(
    point: str,
    metric: str,
    before: Sequence[float],
    after: Sequence[float],
    p_value: float | None,
    policy: ComparePolicy,
) -> Change:
    side_a, side_b = _side(before), _side(after)
    change = None
    if side_a.median is not None and side_b.median is not None:
        change = side_b.median / side_a.median - 1
    verdict: Verdict = "n/a"
    if p_value is not None and change is not None:
        verdict = "same"
        # the direction of the test (the logarithms' means) and of the medians agree
        shift = statistics.fmean(map(math.log, after)) - statistics.fmean(map(math.log, before))
        big = abs(math.log1p(change)) >= math.log1p(policy.min_change)
        agree = change != 0 and shift != 0 and (change > 0) == (shift > 0)
        if p_value <= policy.significance and big and agree:
            verdict = "worse" if (change > 0) == (BAD_DIRECTION[metric] == "up") else "better"
    return Change(point, metric, side_a, side_b, change, p_value, verdict)
