"""Whether the newest run of a schedule regressed against the runs before it.

Each metric of the newest succeeded run is compared with a baseline: up to `baseline_runs`
succeeded runs before it, never reaching before an acknowledged run. Everything is done on the
logarithm of the values, signed so that up is worse (log wall time, minus log throughput):
run-to-run variation of timings is multiplicative and skewed (lognormal), and on the log scale
it is symmetric, so the tests keep their nominal rates.

One metric, several points (a template's matrix). A run's noise is partly shared by all its
points (a slower node, a busy neighbour) and partly each point's own. With three points or
more, each value is split, per metric, into the point's baseline mean, the run's shift (the
median over the points of how far each is from its baseline mean) and the point's residual,
a two-way (run x point) decomposition. Two kinds of hypotheses are then tested:

- the run as a whole: its shift against the baseline runs' shifts, a prediction t test,
  t = (s - mean) / (sd * sqrt(1 + 1/k)) on k - 1 degrees of freedom, k baseline runs;
- each point: its residual against that point's baseline residuals, the same prediction test
  with the residual variance moderated towards the metric's median residual variance over the
  points, with equal weight (Smyth's moderated t, limma, with a prior of k - 1 degrees of
  freedom: 2(k - 1) in all). Shared noise leaves the residuals, so a point that moved on its own
  stands out of a noisy run; the moderation gives five baseline runs the power of eight without
  trusting the other points' spread more than the point's own (a point three times noisier
  than the rest keeps its false alarms bounded, tests/schedules/test_regression.py).

With fewer than three points there is nothing to split: each point's value is tested on its
own (k - 1 degrees of freedom). With fewer than two baseline runs nothing is tested: a single
run cannot show how much runs differ. Baseline runs that are all equal make any change past
them certain (p = 0).

A finding needs both:
1. magnitude: the change it tests (the run's shift, or the point's residual and its whole
   change) is at least `min_relative_change` in the bad direction;
2. significance after correction: every p-value of the run, all points x metrics and the run
   shifts, is adjusted together by Benjamini-Yekutieli, and a finding needs an adjusted p at
   most `significance`. BY controls the false discovery rate under any dependence between the
   tests (Benjamini & Yekutieli 2001, theorem 1.3): metrics of one point, and points of one
   run, are correlated in ways nothing here models. When nothing changed, every discovery is
   false, so at most `significance` of unchanged runs raise any alarm.

`make bench-regression` prints the false-alarm and detection rates over simulated histories
(docs/schedules.md quotes them) beside an oracle that knows the noise exactly: at 10 %
run-to-run noise of each point on its own, a +25 % step is 2.2 standard deviations, which no
test finds often at a 1 % rate across 100 hypotheses. Shared noise is what the decomposition
removes.

Why not E-divisive (Apache Otava / Hunter): it locates change points in long series and needs
permutations for its significance; a schedule keeps about 30 runs and often has 2 to 10, and
the only question here is whether the newest run is worse than the recent ones. Hunter's second
stage (a t test between the segments plus a minimum magnitude) is kept, with the split fixed
before the newest run; Orion's per-metric direction and relative threshold are kept too.

Why the run, not the repetition, is the unit: repetitions of one run share its node, load and
neighbours, and runs differ more than repetitions do; the runs' medians carry the run-to-run
spread on both sides.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from cxlab.analysis.stats import student_t_sf
from cxlab.experiments.status import Calibration, Environment, Phase
from cxlab.schedules.history import HistoryEntry, HistoryPoint

# Which way each metric of a history entry's points gets worse.
BAD_DIRECTION: dict[str, Literal["up", "down"]] = {
    "wallSeconds": "up",
    "throughputPerSecond": "down",
    "cpuSecondsPerTask": "up",
    "latencyP99Seconds": "up",
    "peakRssBytes": "up",
    # a service variant's (cxlab.schedules.history.service_points)
    "capacityPerCore": "down",
    "plannedReplicas": "up",
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


# The `point` of a finding about the run as a whole.
EVERY_POINT = "every point"
# Points needed to tell a run's shared shift from a point's own change.
MIN_POINTS_TO_SPLIT = 3


@dataclass(frozen=True)
class Regression:
    """One metric of one point (or of every point, `scope` "run") that got worse in the newest
    run."""

    run: str
    point: str
    metric: str
    before: float  # baseline median: the median of the baseline runs' medians
    after: float  # the newest run's median
    change: float  # (after - before) / before, signed
    p_value: float  # adjusted (Benjamini-Yekutieli) over every hypothesis of the run
    baseline: tuple[str, ...]  # names of the baseline runs
    scope: Literal["point", "run"] = "point"
    cause: Literal["code", "environment"] = "code"  # environment: its calibration moved too

    def finding(self) -> str:
        """e.g. "wallSeconds 1.00 s → 2.01 s (+101.0 %, p < 0.0001)"."""
        return (
            f"{self.metric} {_show(self.metric, self.before)} → "
            f"{_show(self.metric, self.after)} ({100 * self.change:+.1f} %, "
            f"p {_show_p(self.p_value)})"
        )

    def message(self) -> str:
        runs = len(self.baseline)
        return (
            f"{self.metric} of {self.point}: {_show(self.metric, self.before)} → "
            f"{_show(self.metric, self.after)} ({100 * self.change:+.1f} %, "
            f"p {_show_p(self.p_value)}, against {runs} run{'s' * (runs != 1)})"
        )


def baseline_of(
    history: Sequence[HistoryEntry], acknowledged: str | None, runs: int
) -> tuple[HistoryEntry | None, list[HistoryEntry]]:
    """The newest succeeded entry and its baseline: up to `runs` succeeded entries before it,
    oldest first, none before the `acknowledged` run (which may be one of them) and none
    flagged `regressed` (but the acknowledged one). Acknowledging the newest run leaves no
    baseline; a name not in the history is ignored."""
    positions = [i for i, entry in enumerate(history) if entry.phase == Phase.SUCCEEDED]
    if not positions:
        return None, []
    *earlier, newest = positions
    names = [entry.run for entry in history]
    # A run found regressed stays out of later baselines until acknowledged: a regression
    # that persists keeps alarming instead of becoming the norm it is compared with.
    earlier = [i for i in earlier if not history[i].regressed or names[i] == acknowledged]
    if acknowledged is not None and acknowledged in names:
        start = len(names) - 1 - names[::-1].index(acknowledged)
        earlier = [i for i in earlier if i >= start] if start < newest else []
    return history[newest], [history[i] for i in earlier[max(0, len(earlier) - runs) :]]


def regressions(
    history: Sequence[HistoryEntry],
    policy: Policy = Policy(),
    acknowledged: str | None = None,
) -> list[Regression]:
    """Every finding of the newest succeeded run against its baseline, largest |change| first.
    Points are matched by their "point" key; a point or metric that fewer than two baseline
    runs have is not tested, and neither is one missing from the newest run.

    A run the caller flagged `regressed` stays out of the next runs' baselines, so a lasting
    regression is reported run after run until someone acknowledges it."""
    newest, baseline = baseline_of(history, acknowledged, policy.baseline_runs)
    if newest is None:
        return []
    before = [(entry.run, _points(entry)) for entry in baseline]
    after = _points(newest)
    tested = [t for metric in policy.metrics for t in _tested(metric, after, before, policy)]
    adjusted = benjamini_yekutieli([t.p for t in tested])
    cause: Literal["code", "environment"] = (
        "environment" if environment_change(newest, baseline, policy).moved else "code"
    )
    found = [
        Regression(newest.run, t.point, t.metric, t.before, t.after, t.change,
                   p, t.baseline, t.scope, cause)
        for t, p in zip(tested, adjusted, strict=True)
        if t.big and p <= policy.significance
    ]  # fmt: skip
    return sorted(found, key=lambda r: (-abs(r.change), r.point, r.metric))


# A history entry's calibration figures (environment.calibration), each worse upwards, as
# named in a message.
CALIBRATION: dict[str, Callable[[Calibration], float | None]] = {
    "CPU loop": lambda c: c.cpu_loop_seconds,
    "1 ms sleep": lambda c: c.sleep_seconds,
}
# The fingerprint's fields (environment), as named in a message.
FINGERPRINT: dict[str, Callable[[Environment], str | None]] = {
    "node": lambda e: e.node, "CPU": lambda e: e.cpu_model, "kernel": lambda e: e.kernel,
    "CPU manager": lambda e: e.cpu_manager_policy, "runner image": lambda e: e.runner_image,
    "cxlab": lambda e: e.cxlab_version,
}  # fmt: skip


@dataclass(frozen=True)
class EnvironmentChange:
    """How the newest run's environment differs from its baseline's."""

    moved: tuple[str, ...] = ()  # calibration figures worse beyond the policy
    changed: tuple[str, ...] = ()  # fingerprint fields unlike the newest baseline run's

    def text(self) -> str:
        """e.g. "environment: CPU loop 101 ms → 131 ms (+29.7 %); node a → b"; empty if none."""
        parts = [*self.moved, *self.changed]
        return "environment: " + "; ".join(parts) if parts else ""


def _calibrated(
    environment: Environment | None, figure: Callable[[Calibration], float | None]
) -> float | None:
    calibration = environment.calibration if environment is not None else None
    return None if calibration is None else _positive(figure(calibration))


def _known(environment: Environment | None) -> bool:
    return environment is not None and environment != Environment()


def environment_change(
    newest: HistoryEntry, baseline: Sequence[HistoryEntry], policy: Policy
) -> EnvironmentChange:
    """Whether the calibration moved with the newest run: each figure tested as a point's
    metric is (log scale, prediction test against the baseline runs that have it, the
    minimum change, the figures' p-values adjusted together), and which fingerprint fields
    differ from those of the newest baseline run that has a fingerprint."""
    mine = newest.environment
    theirs = [e.environment for e in baseline]
    tested = []
    for name, figure in CALIBRATION.items():
        after = _calibrated(mine, figure)
        before = [v for env in theirs if (v := _calibrated(env, figure)) is not None]
        if after is None or len(before) < 2:
            continue
        logs = [math.log(v) for v in before]
        difference = math.log(after) - statistics.fmean(logs)
        p = _prediction_p(difference, _variance(logs), len(logs), len(logs) - 1.0)
        median = float(statistics.median(before))
        shown = (f"{name} {_show('wallSeconds', median)} → {_show('wallSeconds', after)} "
                 f"({100 * (after / median - 1):+.1f} %)")  # fmt: skip
        tested.append((shown, p, difference >= math.log1p(policy.min_relative_change)))
    adjusted = benjamini_yekutieli([p for _, p, _ in tested])
    moved = tuple(shown for (shown, _, big), p in zip(tested, adjusted, strict=True)
                  if big and p <= policy.significance)  # fmt: skip
    last = next((env for env in reversed(theirs) if _known(env)), None)
    changed = tuple(
        f"{name} {field(last)} → {field(mine)}"
        for name, field in FINGERPRINT.items()
        if mine is not None and _known(mine) and last is not None and field(last) != field(mine)
    )
    return EnvironmentChange(moved, changed)


def newest_environment_change(
    history: Sequence[HistoryEntry], policy: Policy = Policy(), acknowledged: str | None = None
) -> EnvironmentChange:
    """environment_change of the newest succeeded run against the baseline regressions() uses."""
    newest, baseline = baseline_of(history, acknowledged, policy.baseline_runs)
    return EnvironmentChange() if newest is None else environment_change(newest, baseline, policy)


def flagged(
    history: Sequence[HistoryEntry], policy: Policy = Policy(), acknowledged: str | None = None
) -> list[HistoryEntry]:
    """The history with every succeeded run flagged `regressed` as it was when it was the
    newest (what the operator records run by run): for a history read back from files."""
    out: list[HistoryEntry] = []
    for entry in history:
        out.append(entry.model_copy(update={"regressed": None}))
        if entry.phase == Phase.SUCCEEDED and regressions(out, policy, acknowledged):
            out[-1] = out[-1].model_copy(update={"regressed": True})
    return out


def by_point(found: Sequence[Regression]) -> dict[str, list[Regression]]:
    """Findings grouped by point, the points in the order of their worst finding (the run as
    a whole, EVERY_POINT, among them)."""
    groups: dict[str, list[Regression]] = {}
    for regression in found:
        groups.setdefault(regression.point, []).append(regression)
    return groups


def summary_line(found: Sequence[Regression]) -> str:
    """For the Regressed event and condition: every finding, grouped by point, e.g.
    "asyncio w=100: wallSeconds 1.00 s → 1.26 s (+26.0 %, p = 0.0021), latencyP99Seconds …;
    every point: … (against 5 runs)"; what does not fit in MAX_SUMMARY is counted. Empty for
    none."""
    if not found:
        return ""
    runs = len(found[0].baseline)
    tail = f" (against {runs} run{'s' * (runs != 1)})"
    room = MAX_SUMMARY - len(tail) - len("; and 999 more")
    shown, told = "", 0
    for point, group in by_point(found).items():
        part = f"{'; ' if shown else ''}{point}: " + ", ".join(r.finding() for r in group)
        if len(shown) + len(part) > room:
            if not shown:  # one point's findings beyond the room: cut, and say so
                shown, told = part[: room - 1] + "…", len(group)
            break
        shown, told = shown + part, told + len(group)
    more = f"; and {len(found) - told} more" if told < len(found) else ""
    return shown + more + tail


def benjamini_yekutieli(p_values: Sequence[float]) -> list[float]:
    """Adjusted p-values, in the order given: p(i) * m * c(m) / i made monotone from the
    largest down, c(m) = 1 + 1/2 + ... + 1/m, capped at 1. Rejecting those at most q keeps the
    false discovery rate at most q under any dependence."""
    m = len(p_values)
    if not m:
        return []
    harmonic = sum(1 / i for i in range(1, m + 1))
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p_values[i] * m * harmonic / rank)
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class _Tested:
    """One hypothesis before correction; `big` when its change passes the magnitude gate."""

    point: str
    metric: str
    before: float
    after: float
    change: float
    p: float
    big: bool
    baseline: tuple[str, ...]
    scope: Literal["point", "run"]


def _tested(
    metric: str,
    newest: Mapping[str, HistoryPoint],
    baseline: Sequence[tuple[str, Mapping[str, HistoryPoint]]],
    policy: Policy,
) -> list[_Tested]:
    """The hypotheses of one metric: each point's, and with enough points the run's shift."""
    sign = 1.0 if BAD_DIRECTION[metric] == "up" else -1.0
    rows: dict[str, tuple[float, dict[str, float]]] = {}  # point: (newest, {run: value})
    for key, point in newest.items():
        after = _positive(point.value(metric))
        base = {name: v for name, points in baseline
                if (v := _positive(_value(points.get(key), metric))) is not None}  # fmt: skip
        if after is not None and len(base) >= 2:
            rows[key] = after, base
    if not rows:
        return []
    # deviations from each point's baseline mean, on the signed log scale (up is worse)
    deviation: dict[str, tuple[float, dict[str, float]]] = {}
    for key, (after, base) in rows.items():
        logs = {name: sign * math.log(v) for name, v in base.items()}
        mean = statistics.fmean(logs.values())
        deviation[key] = sign * math.log(after) - mean, {n: x - mean for n, x in logs.items()}
    split = len(rows) >= MIN_POINTS_TO_SPLIT
    shift_new, shifts = _shifts(deviation) if split else (0.0, {})
    residual = {key: (new - shift_new, {n: x - shifts.get(n, 0.0) for n, x in base.items()})
                for key, (new, base) in deviation.items()}  # fmt: skip
    variances = {key: _variance(base.values()) for key, (_, base) in residual.items()}
    prior = statistics.median(variances.values()) if split else None
    least = math.log1p(policy.min_relative_change)
    out = []
    for key, (new, base) in residual.items():
        after, values = rows[key]
        n = len(base)
        variance, df = variances[key], n - 1.0
        if prior is not None:  # moderated: the metric's typical spread, as much as the own
            variance, df = (variance + prior) / 2, 2 * df
        before = float(statistics.median(values.values()))
        out.append(_Tested(
            key, metric, before, after, after / before - 1, _prediction_p(new, variance, n, df),
            new >= least and deviation[key][0] >= least, tuple(values), "point",
        ))  # fmt: skip
    if split and len(shifts) >= 2:
        mean = statistics.fmean(shifts.values())
        variance = _variance(shifts.values())
        delta = shift_new - mean
        before = float(statistics.median(statistics.median(b.values()) for _, b in rows.values()))
        after = float(statistics.median(a for a, _ in rows.values()))
        out.append(_Tested(
            EVERY_POINT, metric, before, after, math.exp(sign * delta) - 1,
            _prediction_p(delta, variance, len(shifts), len(shifts) - 1.0), delta >= least,
            tuple(shifts), "run",
        ))  # fmt: skip
    return out


def _shifts(
    deviation: Mapping[str, tuple[float, Mapping[str, float]]],
) -> tuple[float, dict[str, float]]:
    """Each run's shift: the median over the points of their deviations (the newest's first)."""
    newest = statistics.median(new for new, _ in deviation.values())
    runs: dict[str, list[float]] = {}
    for _, base in deviation.values():
        for name, x in base.items():
            runs.setdefault(name, []).append(x)
    return newest, {name: statistics.median(xs) for name, xs in runs.items()}


def _variance(values: Iterable[float]) -> float:
    """The sample variance in floats (statistics.variance's exact fractions cost 60 % of a
    check of 20 points, and these are logarithms of measurements)."""
    xs = list(values)
    mean = math.fsum(xs) / len(xs)
    return math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def _prediction_p(difference: float, variance: float, n: int, df: float) -> float:
    """One-sided p that one more draw lies `difference` above the mean of n with `variance`."""
    if variance <= 0:  # no spread: a change past the baseline is certain
        return 0.0 if difference > 0 else 1.0
    return student_t_sf(difference / math.sqrt(variance * (1 + 1 / n)), df)


def _points(entry: HistoryEntry) -> dict[str, HistoryPoint]:
    """An entry's points by their key (a point without repetitions has no metrics to match)."""
    return {point.point: point for point in entry.points or ()}


def _value(point: HistoryPoint | None, metric: str) -> float | None:
    return None if point is None else point.value(metric)


def _positive(value: float | None) -> float | None:
    """A value the log scale can take (a zero throughput has no ratio to compare, nor has a
    value that is not finite)."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


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
    if metric == "capacityPerCore":
        return f"{_sig3(value)}/s per core"
    if metric == "plannedReplicas":
        return f"{value:g} replicas"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{_sig3(value / scale)} {unit}"
    return f"{_sig3(value / 1e-9)} ns"


def _show_p(p: float) -> str:
    return f"= {p:.2g}" if p >= 1e-4 else "< 0.0001"
