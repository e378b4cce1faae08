"""Whether the newest run of a schedule regressed against the runs before it.

Each (point, metric) of the newest succeeded run is compared with a baseline: up to
`baseline_runs` succeeded runs before it, never reaching before an acknowledged run. A
regression needs both:

1. magnitude beyond what was seen: the newest median is worse, in the metric's bad direction,
   than the WORST baseline run's median by more than `min_relative_change` of the baseline
   median, and so is each of its repetitions;
2. significance: a one-sided prediction t test of the newest median against the baseline
   runs' medians, t = (x - mean) / (sd * sqrt(1 + 1/k)) on k - 1 degrees of freedom, gives
   p < `significance`. With fewer than two baseline runs the test cannot run, and nothing is
   reported: a single run cannot show how much runs differ, so no alarm without a test.
   Baseline runs that are all equal make any change past them certain (p = 0).

Why not E-divisive (Apache Otava / Hunter): it locates change points in long series and needs
permutations for its significance; a schedule keeps about 30 runs and often has 2 to 10, and
the only question here is whether the newest run is worse than the recent ones. Hunter's second
stage (a t test between the segments plus a minimum magnitude) is kept, with the split fixed
before the newest run; Orion's per-metric direction and relative threshold are kept too.

Why the run, not the repetition, is the unit: repetitions of one run share its node, load and
neighbours, and runs differ more than repetitions do. A Welch test of the newest run's
repetitions against the baseline's pooled repetitions sees only the newest run's within-run
spread and none of its own run-level shift: on synthetic histories with 5 % run-to-run and 2 %
within-run noise, 3 repetitions, it alarmed on 7 to 18 % of unchanged ones. The runs' medians
carry the run-to-run spread on both sides.

Why "beyond the worst run by the minimum change, in every repetition" rather than "outside the
baseline's range and the minimum change from its median": an unchanged run is the worst of
k + 1 one time in k + 1, so the range alone filters little, and a run barely past the worst one,
or with a repetition back among the baseline, looks like one already seen. With 5 baseline runs
this cuts false alarms three- to fourfold (to 0.4 %) for about 3 points of detection; with 10 it
costs more (84 % of +25 % steps found instead of 95 %), the side to err on when an alarm asks a
person to look. The price of few runs stays: with 5 baseline runs the t test has 4 degrees of
freedom, so a +25 % step against 5 % run-to-run noise is found about 4 times in 5.
tests/test_regression.py measures these rates.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cxlab.stats import welch_t_test

# Which way each metric of a history entry's points gets worse.
BAD_DIRECTION: dict[str, Literal["up", "down"]] = {
    "wallSeconds": "up",
    "throughputPerSecond": "down",
    "cpuSecondsPerTask": "up",
    "latencyP99Seconds": "up",
    "peakRssBytes": "up",
}

# A Kubernetes condition message is capped by the API server at 32 KiB; keep it readable.
MAX_SUMMARY = 1000


@dataclass(frozen=True)
class Policy:
    """When a change between runs counts as a regression (see the module docstring)."""

    min_relative_change: float = 0.10
    significance: float = 0.01
    baseline_runs: int = 5
    metrics: tuple[str, ...] = tuple(BAD_DIRECTION)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.metrics) - set(BAD_DIRECTION))
        if unknown:
            raise ValueError(f"no direction known for metrics {unknown}")
        if not 0 < self.significance < 1:
            raise ValueError(f"significance must be in (0, 1), not {self.significance}")
        if self.min_relative_change < 0 or self.baseline_runs < 0:
            raise ValueError("min_relative_change and baseline_runs cannot be negative")


@dataclass(frozen=True)
class Regression:
    """One metric of one point that got worse in the newest run."""

    run: str
    point: str
    metric: str
    before: float  # baseline median: the median of the baseline runs' medians
    after: float  # the newest run's median
    change: float  # (after - before) / before, signed
    p_value: float
    baseline: tuple[str, ...]  # names of the baseline runs

    def message(self) -> str:
        runs = len(self.baseline)
        return (
            f"{self.metric} of {self.point}: {_show(self.metric, self.before)} → "
            f"{_show(self.metric, self.after)} ({100 * self.change:+.1f} %, "
            f"p {_show_p(self.p_value)}, against {runs} run{'s' * (runs != 1)})"
        )


def baseline_of(
    history: Sequence[Mapping[str, Any]], acknowledged: str | None, runs: int
) -> tuple[Mapping[str, Any] | None, list[Mapping[str, Any]]]:
    """The newest succeeded entry and its baseline: up to `runs` succeeded entries before it,
    oldest first, none before the `acknowledged` run (which may be one of them) and none
    flagged `regressed` (but the acknowledged one). Acknowledging the newest run leaves no
    baseline; a name not in the history is ignored."""
    positions = [i for i, entry in enumerate(history) if entry.get("phase") == "Succeeded"]
    if not positions:
        return None, []
    *earlier, newest = positions
    names = [entry.get("run") for entry in history]
    # A run found regressed stays out of later baselines until acknowledged: a regression
    # that persists keeps alarming instead of becoming the norm it is compared with.
    earlier = [i for i in earlier if not history[i].get("regressed") or names[i] == acknowledged]
    if acknowledged is not None and acknowledged in names:
        start = len(names) - 1 - names[::-1].index(acknowledged)
        earlier = [i for i in earlier if i >= start] if start < newest else []
    return history[newest], [history[i] for i in earlier[max(0, len(earlier) - runs) :]]


def regressions(
    history: Sequence[Mapping[str, Any]],
    policy: Policy = Policy(),
    acknowledged: str | None = None,
) -> list[Regression]:
    """Every (point, metric) of the newest succeeded run that regressed against its baseline,
    largest |change| first. Points are matched by their "point" key; a point or metric that
    the baseline runs lack is skipped, and so is one missing from the newest run.

    A run the caller flagged `regressed` stays out of the next runs' baselines, so a lasting
    regression is reported run after run until someone acknowledges it."""
    newest, baseline = baseline_of(history, acknowledged, policy.baseline_runs)
    if newest is None:
        return []
    before_points = [(str(entry.get("run")), _points(entry)) for entry in baseline]
    found = []
    for key, point in _points(newest).items():
        for metric in policy.metrics:
            after = _number(point.get(metric))
            if after is None:
                continue
            medians, names = [], []
            for name, points in before_points:
                value = _number(points.get(key, {}).get(metric))
                if value is not None:
                    medians.append(value)
                    names.append(name)
            regression = _regressed(after, _samples(point, metric, after), medians, metric, policy)
            if regression is not None:
                change, p = regression
                before = float(statistics.median(medians))
                found.append(
                    Regression(
                        str(newest.get("run")), key, metric, before, after, change, p, tuple(names)
                    )
                )
    return sorted(found, key=lambda r: (-abs(r.change), r.point, r.metric))


def flagged(
    history: Sequence[Mapping[str, Any]], policy: Policy = Policy(), acknowledged: str | None = None
) -> list[dict[str, Any]]:
    """The history with every succeeded run flagged `regressed` as it was when it was the
    newest (what the operator records run by run): for a history read back from files."""
    out: list[dict[str, Any]] = []
    for entry in history:
        out.append({k: v for k, v in entry.items() if k != "regressed"})
        if entry.get("phase") == "Succeeded" and regressions(out, policy, acknowledged):
            out[-1]["regressed"] = True
    return out


def summary_line(found: Sequence[Regression]) -> str:
    """For a condition message: the worst regression, and how many more; empty for none."""
    if not found:
        return ""
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    head = found[0].message()
    room = MAX_SUMMARY - 1 - len(more)
    if len(head) > room:
        head = head[: room - 1] + "…"
    return head + more


def _regressed(
    after: float, samples: Sequence[float], medians: Sequence[float], metric: str, policy: Policy
) -> tuple[float, float] | None:
    """(change, p) when `after` passes both gates against the baseline runs' `medians`."""
    if len(medians) < 2:
        return None
    before = float(statistics.median(medians))
    if before <= 0:  # a relative change needs a positive baseline
        return None
    bad = BAD_DIRECTION[metric]
    sign = 1.0 if bad == "up" else -1.0
    worst = max(medians) if bad == "up" else min(medians)
    edge = worst + sign * policy.min_relative_change * before
    if any(sign * (value - edge) <= 0 for value in (after, *samples)):
        return None
    tested = welch_t_test([after], medians, bad)
    if tested is None or tested[1] >= policy.significance:
        return None
    return (after - before) / before, tested[1]


def _points(entry: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """An entry's points by their key (a point without repetitions has no metrics to match)."""
    return {
        str(point["point"]): point
        for point in entry.get("points") or ()
        if isinstance(point, Mapping) and "point" in point
    }


def _samples(point: Mapping[str, Any], metric: str, median: float) -> list[float]:
    """The point's repetitions of a metric: its samples, or its median alone when n == 1."""
    samples = point.get("samples")
    raw = samples.get(metric) if isinstance(samples, Mapping) else None
    values = [v for v in map(_number, raw if isinstance(raw, list) else ()) if v is not None]
    return values or [median]


def _number(value: Any) -> float | None:
    """A finite number from a JSON value; None for a missing or malformed one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _sig3(value: float) -> str:
    """Three significant digits, never in exponent notation."""
    rounded = float(f"{value:.3g}")  # 9.996 is 10.0, not 10.00
    if rounded == 0:
        return "0"
    decimals = max(0, 2 - math.floor(math.log10(abs(rounded))))
    return f"{value:.{decimals}f}"


def _show(metric: str, value: float) -> str:
    if metric == "peakRssBytes":
        return f"{_sig3(value / 2**20)} MiB"
    if metric == "throughputPerSecond":
        return f"{_sig3(value)}/s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{_sig3(value / scale)} {unit}"
    return f"{_sig3(value / 1e-9)} ns"


def _show_p(p: float) -> str:
    return f"= {p:.2g}" if p >= 1e-4 else "< 0.0001"
