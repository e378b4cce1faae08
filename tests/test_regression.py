"""Regressions across the runs of a schedule: the t distribution and Welch's test they rest on,
each gate of the detector on its own, acknowledgement, and the false-alarm rate and detection
power on synthetic histories of an unchanged experiment."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping
from typing import Any

import pytest

from cxlab.schedules.regression import (
    BAD_DIRECTION,
    Policy,
    Regression,
    baseline_of,
    flagged,
    regressions,
    summary_line,
)
from cxlab.stats import student_t_sf, welch_t_test

POINT = "asyncio w=1000 rtt=100ms"
MIB = 2**20


def entry(
    run: str,
    metrics: Mapping[str, list[float]] | None = None,
    *,
    points: Mapping[str, Mapping[str, list[float]]] | None = None,
    phase: str = "Succeeded",
) -> dict[str, Any]:
    """A history entry from each repetition's value per metric, of POINT or of `points`."""
    built = []
    for key, values in (points or {POINT: metrics or {}}).items():
        n = len(next(iter(values.values()), []))
        point: dict[str, Any] = {"point": key, "model": key.split()[0], "n": n}
        point |= {metric: statistics.median(reps) for metric, reps in values.items()}
        if n > 1:
            point["samples"] = {metric: list(reps) for metric, reps in values.items()}
        built.append(point)
    return {
        "run": run,
        "scheduledTime": "2026-11-23T18:00:00Z",
        "phase": phase,
        "points": built,
    }


def walls(*runs: list[float]) -> list[dict[str, Any]]:
    """A history of succeeded runs named run-0, run-1, …: each run's wall-time repetitions."""
    return [entry(f"run-{i}", {"wallSeconds": reps}) for i, reps in enumerate(runs)]


# Five runs of a stable point: medians 1.00, 1.02, 0.99, 1.01, 1.00 (within 1 %).
STABLE = [[1.00, 1.01, 0.99], [1.02, 1.03, 1.01], [0.99, 1.00, 0.98], [1.01, 1.00, 1.02],
          [1.00, 0.99, 1.01]]  # fmt: skip


# --- the t distribution and Welch's test ------------------------------------------------------


def _t_density(x: float, df: float) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))


def _sf_by_simpson(t: float, df: float, steps: int = 20_000) -> float:
    """P(T > t) as 1/2 minus the integral of the density from 0 to t, by Simpson's rule:
    a computation independent of the incomplete beta function."""
    h = t / steps
    inner = sum((4 if i % 2 else 2) * _t_density(i * h, df) for i in range(1, steps))
    return 0.5 - (_t_density(0, df) + inner + _t_density(t, df)) * h / 3


@pytest.mark.parametrize(
    ("t", "df", "sf"),
    [
        (2.0, 10, 0.036694017385370),  # tables: 0.036694
        (1.0, 1, 0.25),  # Cauchy: 1/2 - atan(1)/π
        (0.0, 3, 0.5),
        (-2.0, 10, 1 - 0.036694017385370),
        (1e-7, 1e5, 0.5 - 1e-7 / math.sqrt(2 * math.pi)),  # near the normal, t² << df
    ],
)
def test_student_t_sf_known_values(t: float, df: float, sf: float) -> None:
    assert student_t_sf(t, df) == pytest.approx(sf, abs=1e-10)


@pytest.mark.parametrize("t", [-25.0, -3.0, -0.4, 0.001, 0.3, 1.0, 2.5, 7.0, 40.0, 1e3])
def test_student_t_sf_matches_the_closed_forms_of_one_and_two_degrees_of_freedom(t: float) -> None:
    assert student_t_sf(t, 1) == pytest.approx(0.5 - math.atan(t) / math.pi, abs=1e-13)
    assert student_t_sf(t, 2) == pytest.approx(0.5 - t / (2 * math.sqrt(t * t + 2)), abs=1e-13)


@pytest.mark.parametrize(
    ("t", "df"), [(3.5, 4.3), (0.7, 2.5), (2.2, 7.9), (5.0, 1.6), (1.3, 23.4), (4.0, 60.0)]
)
def test_student_t_sf_matches_numeric_integration_at_fractional_degrees_of_freedom(
    t: float, df: float
) -> None:
    assert student_t_sf(t, df) == pytest.approx(_sf_by_simpson(t, df), abs=1e-10)


def test_student_t_sf_refuses_no_degrees_of_freedom() -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        student_t_sf(1.0, 0)
    assert student_t_sf(math.inf, 3) == 0.0 and student_t_sf(-math.inf, 3) == 1.0


def test_welch_t_test_against_its_formula() -> None:
    new, base = [1.30, 1.42, 1.35], [1.00, 1.10, 0.95, 1.05, 1.02, 0.98]
    vn, vb = statistics.variance(new) / 3, statistics.variance(base) / 6
    t = (statistics.fmean(new) - statistics.fmean(base)) / math.sqrt(vn + vb)
    df = (vn + vb) ** 2 / (vn**2 / 2 + vb**2 / 5)  # Welch-Satterthwaite
    assert 3 < df < 4, "a fractional df, as Welch's test makes"
    up = welch_t_test(new, base, "up")
    assert up == pytest.approx((t, _sf_by_simpson(t, df)), abs=1e-10)
    # the other direction: t flips sign, p is the other tail
    assert welch_t_test(new, base, "down") == pytest.approx((-t, 1 - up[1]), abs=1e-12)


def test_one_new_value_is_tested_against_the_prediction_interval() -> None:
    base = [1.0, 1.1, 0.9, 1.05, 0.95]
    t = (1.4 - 1.0) / (statistics.stdev(base) * math.sqrt(1 + 1 / 5))
    assert welch_t_test([1.4], base, "up") == pytest.approx((t, _sf_by_simpson(t, 4)), abs=1e-10)
    assert welch_t_test([1.4], base, "down") == pytest.approx((-t, 1 - _sf_by_simpson(t, 4)))


@pytest.mark.parametrize(
    ("new", "base"),
    [
        ([2.0], [1.0]),
        ([2.0, 2.1], [1.0]),
        ([], [1.0, 1.1]),
        ([1.0], [1.0, 1.0]),
        ([1.0] * 2, [1.0] * 2),
    ],
)
def test_welch_t_test_does_not_run_without_two_base_values_or_a_difference(
    new: list[float], base: list[float]
) -> None:
    assert welch_t_test(new, base, "up") is None


def test_without_any_spread_a_difference_is_certain() -> None:
    assert welch_t_test([2.0], [1.0, 1.0], "up") == (math.inf, 0.0)
    assert welch_t_test([2.0, 2.0], [1.0, 1.0], "down") == (-math.inf, 1.0)


def test_the_prediction_test_holds_its_false_positive_rate() -> None:
    """Six normal draws: the sixth against the first five at p < 0.05, one time in twenty."""
    rng = random.Random(11)
    trials = 20_000
    hits = 0
    for _ in range(trials):
        draws = [rng.gauss(10, 1) for _ in range(6)]
        tested = welch_t_test(draws[5:], draws[:5], "up")
        hits += tested is not None and tested[1] < 0.05
    assert hits / trials == pytest.approx(0.05, abs=0.005)


# --- what is reported -------------------------------------------------------------------------


def wall_and_throughput(*runs: list[float]) -> list[dict[str, Any]]:
    """Like walls(), with each repetition's throughput for 800 tasks."""
    return [
        entry(f"run-{i}", {"wallSeconds": reps, "throughputPerSecond": [800 / w for w in reps]})
        for i, reps in enumerate(runs)
    ]


def test_a_doubled_rtt_is_a_regression_of_wall_time_and_throughput() -> None:
    found = regressions(wall_and_throughput(*STABLE, [2.01, 2.03, 1.99]))  # RTT 100 → 200 ms
    assert [(r.metric, r.run, r.point) for r in found] == [
        ("wallSeconds", "run-5", POINT),  # +101 % comes before throughput's -50 %
        ("throughputPerSecond", "run-5", POINT),
    ]
    wall, throughput = found
    assert wall.before == 1.00 and wall.after == 2.01 and wall.change == pytest.approx(1.01)
    assert (wall.change, wall.p_value) == (
        pytest.approx(1.01),
        welch_t_test([2.01], [1.00, 1.02, 0.99, 1.01, 1.00], "up")[1],  # type: ignore[index]
    )
    assert wall.p_value < 1e-4 and wall.baseline == ("run-0", "run-1", "run-2", "run-3", "run-4")
    assert throughput.after == pytest.approx(800 / 2.01) and throughput.change < -0.45
    assert wall.message() == (
        f"wallSeconds of {POINT}: 1.00 s → 2.01 s (+101.0 %, p < 0.0001, against 5 runs)"
    )


def test_only_the_bad_direction_counts() -> None:
    fast = [0.50, 0.51, 0.49]  # twice as fast, and twice the throughput
    assert regressions(wall_and_throughput(*STABLE, fast)) == []
    assert {m for m in BAD_DIRECTION if BAD_DIRECTION[m] == "down"} == {"throughputPerSecond"}


def test_a_small_significant_change_is_not_reported() -> None:
    tight = [[1.000, 1.001, 0.999]] * 3 + [[1.001, 1.002, 1.000], [0.999, 1.000, 0.998]]
    history = walls(*tight, [1.05, 1.051, 1.049])  # +5 %, far outside so tight a baseline
    assert regressions(history) == []
    [found] = regressions(history, Policy(min_relative_change=0.03))
    assert found.p_value < 1e-4, "it was the magnitude that kept quiet, not the test"


def test_a_large_change_against_a_noisy_baseline_is_not_reported() -> None:
    noisy = [[1.0], [1.5], [0.8], [1.3], [0.9]]  # runs differ by up to 70 %
    history = walls(*noisy, [1.9])  # +90 % against the median, beyond the worst run by 40 %
    assert regressions(history) == []
    [found] = regressions(history, Policy(significance=0.05))
    assert found.change == pytest.approx(0.9) and 0.01 < found.p_value < 0.05


def test_a_run_like_one_already_seen_is_not_reported() -> None:
    seen = [[1.00], [1.00], [1.01], [0.99], [1.30]]  # one slow run already in the baseline
    assert regressions(walls(*seen, [1.30])) == []


def test_a_run_just_past_the_worst_baseline_run_is_not_reported() -> None:
    # Beyond the range and +12 % with p ≈ 0.002, but only 8 % past the worst run (1.04).
    baseline = [[1.00], [1.00], [1.00], [1.00], [1.04]]
    tested = welch_t_test([1.12], [1.00] * 4 + [1.04], "up")
    assert tested is not None and tested[1] < 0.01
    assert regressions(walls(*baseline, [1.12])) == []
    assert [r.after for r in regressions(walls(*baseline, [1.16]))] == [1.16]


def test_a_run_with_a_repetition_like_the_baseline_is_not_reported() -> None:
    assert regressions(walls(*STABLE, [1.30, 1.31, 1.05])) == []  # median 1.30, one at 1.05
    assert [r.after for r in regressions(walls(*STABLE, [1.30, 1.31, 1.29]))] == [1.30]


@pytest.mark.parametrize(
    "baseline",
    [[[1.0]], [[1.0, 1.01, 0.99]]],  # one run: how much runs differ is unknown
    ids=["one run of one repetition", "one run of three repetitions"],
)
def test_a_baseline_of_one_run_reports_nothing(baseline: list[list[float]]) -> None:
    assert regressions(walls(*baseline, [2.0, 2.01, 1.99])) == []
    assert regressions(walls(*baseline, [1.01], [2.0, 2.01, 1.99])) != [], "two runs are enough"


def test_points_and_metrics_the_baseline_lacks_are_skipped() -> None:
    asyncio, threads = "asyncio w=10 rtt=100ms", "threads w=10 rtt=100ms"
    old = {asyncio: {"wallSeconds": [1.0]}}
    history = [
        entry("run-0", points=old),
        entry("run-1", points={**old, threads: {"wallSeconds": [1.0]}}),
        entry("run-2", points={**old, threads: {"wallSeconds": [1.02]}}),
        entry("run-3", points={
            asyncio: {"wallSeconds": [3.0], "peakRssBytes": [900 * MIB]},
            threads: {"wallSeconds": [3.0]},
            "new w=1": {"wallSeconds": [3.0]},
        }),
    ]  # fmt: skip
    found = regressions(history)  # neither peakRssBytes nor "new w=1" has a baseline
    assert [(r.point, r.metric, r.baseline) for r in found] == [
        (asyncio, "wallSeconds", ("run-0", "run-1", "run-2")),
        (threads, "wallSeconds", ("run-1", "run-2")),
    ]
    assert found[0].p_value == 0.0, "three identical runs: any change beyond them is certain"


def test_a_point_without_repetitions_is_skipped() -> None:
    history = walls(*STABLE)
    history.append({"run": "run-5", "phase": "Succeeded", "points": [{"point": POINT, "n": 0}]})
    assert regressions(history) == []


def test_the_largest_change_comes_first() -> None:
    newest = {"a w=1": 1.5, "b w=1": 3.0, "c w=1": 2.0}
    stable = [
        entry(f"run-{i}", points={key: {"wallSeconds": reps} for key in newest})
        for i, reps in enumerate(STABLE)
    ]
    last = entry("run-5", points={key: {"wallSeconds": [wall] * 3} for key, wall in newest.items()})
    assert [r.point for r in regressions([*stable, last])] == ["b w=1", "c w=1", "a w=1"]


def test_the_metrics_of_the_policy_are_the_ones_tested() -> None:
    history = walls(*STABLE, [2.0, 2.0, 2.0])
    assert regressions(history, Policy(metrics=("throughputPerSecond",))) == []
    with pytest.raises(ValueError, match="no direction known"):
        Policy(metrics=("wall",))


# --- which runs are compared --------------------------------------------------------------------


def test_failed_runs_are_neither_baseline_nor_newest() -> None:
    history = walls(*STABLE, [2.0, 2.01, 1.99])
    history.insert(2, entry("failed-mid", {"wallSeconds": [9.0]}, phase="Failed"))
    history.append(entry("failed-last", {"wallSeconds": [1.0]}, phase="Failed"))
    newest, baseline = baseline_of(history, None, 5)
    assert newest is not None and newest["run"] == "run-5"
    assert [e["run"] for e in baseline] == ["run-0", "run-1", "run-2", "run-3", "run-4"]
    [found] = regressions(history)
    assert found.run == "run-5" and "failed-mid" not in found.baseline


def test_the_baseline_is_the_runs_newest_before_the_newest() -> None:
    history = walls(*([[1.0]] * 8))
    newest, baseline = baseline_of(history, None, 3)
    assert newest is history[-1] and [e["run"] for e in baseline] == ["run-4", "run-5", "run-6"]
    assert baseline_of([], None, 5) == (None, [])
    assert baseline_of(history[:1], None, 5) == (history[0], [])
    assert baseline_of(history, None, 0) == (history[-1], [])


def test_acknowledging_a_run_starts_the_baseline_there() -> None:
    # Faster after a known change at run-5; the newest is back to the old times.
    faster = [[0.50, 0.51, 0.49], [0.51, 0.50, 0.52], [0.49, 0.50, 0.51]]
    history = walls(*STABLE, *faster, [1.00, 1.01, 0.99])
    assert regressions(history) == [], "the old runs in the baseline look like the newest"
    [found] = regressions(history, acknowledged="run-5")
    assert found.baseline == ("run-5", "run-6", "run-7") and found.change == pytest.approx(1.0)
    assert [e["run"] for e in baseline_of(history, "run-5", 5)[1]] == ["run-5", "run-6", "run-7"]
    # a name not in the history is ignored (the caller reports it)
    assert baseline_of(history, "run-99", 5) == baseline_of(history, None, 5)


def test_acknowledging_the_newest_run_clears_its_regression() -> None:
    history = walls(*STABLE, [2.0, 2.01, 1.99])
    assert regressions(history) != []
    assert regressions(history, acknowledged="run-5") == []
    assert baseline_of(history, "run-5", 5) == (history[-1], [])


# --- messages ---------------------------------------------------------------------------------


def _regression(metric: str, before: float, after: float, point: str = POINT) -> Regression:
    change = after / before - 1
    return Regression("run-5", point, metric, before, after, change, 0.0004, ("run-0", "run-1"))


@pytest.mark.parametrize(
    ("metric", "before", "after", "shown"),
    [
        ("wallSeconds", 1.23, 1.52, "1.23 s → 1.52 s (+23.6 %"),
        ("wallSeconds", 9.996, 12.5, "10.0 s → 12.5 s (+25.1 %"),
        ("wallSeconds", 843.0, 1234.5, "843 s → 1234 s (+46.4 %"),
        ("latencyP99Seconds", 0.104, 0.2071, "104 ms → 207 ms (+99.1 %"),
        ("cpuSecondsPerTask", 0.00004, 0.0000452, "40.0 µs → 45.2 µs (+13.0 %"),
        ("throughputPerSecond", 8130.1, 6502.5, "8130/s → 6502/s (-20.0 %"),
        ("peakRssBytes", 50 * MIB, 64.25 * MIB, "50.0 MiB → 64.2 MiB (+28.5 %"),
    ],
)
def test_a_message_shows_units(metric: str, before: float, after: float, shown: str) -> None:
    message = _regression(metric, before, after).message()
    assert message == f"{metric} of {POINT}: {shown}, p = 0.0004, against 2 runs)"


def test_the_summary_line_names_the_worst_and_counts_the_rest() -> None:
    worst, other = _regression("wallSeconds", 1.0, 2.0), _regression("wallSeconds", 1.0, 1.5)
    assert summary_line([]) == ""
    assert summary_line([worst]) == worst.message()
    assert summary_line([worst, other, other]) == worst.message() + " and 2 more"
    long = summary_line([_regression("wallSeconds", 1.0, 2.0, "x" * 2000), other])
    assert len(long) < 1000 and long.endswith("… and 1 more")


# --- false alarms and detection on synthetic histories ----------------------------------------

TEMPLATE = {
    "wallSeconds": 1.2,
    "throughputPerSecond": 8000.0,
    "cpuSecondsPerTask": 4e-5,
    "latencyP99Seconds": 0.104,
    "peakRssBytes": 50.0 * MIB,
}


def synthetic(
    rng: random.Random,
    runs: int,
    reps: int,
    step: float = 0.0,
    shared: bool = True,
    spread: float = 0.05,
) -> list[dict[str, Any]]:
    """A history of an unchanged experiment, one point and five metrics: each run shifted by
    a lognormal factor (sigma 0.05, ~5 % run to run; one per run, or one per run and metric
    when not `shared`), each repetition by another (sigma 0.02). `step` makes the last run
    that much worse in every metric (throughput divided by 1 + step)."""
    history = []
    for run in range(runs):
        shift = rng.lognormvariate(0, spread)
        values = {}
        for metric, typical in TEMPLATE.items():
            factor = shift if shared else rng.lognormvariate(0, spread)
            if run == runs - 1:
                factor *= 1 + step
            if BAD_DIRECTION[metric] == "down":
                factor = 1 / factor
            values[metric] = [typical * factor * rng.lognormvariate(0, 0.02) for _ in range(reps)]
        history.append(entry(f"nightly-{run}", values))
    return history


def rate(
    runs: int,
    reps: int,
    step: float = 0.0,
    shared: bool = True,
    spread: float = 0.05,
    trials: int = 2000,
) -> float:
    """How often anything is reported on the last run, over `trials` seeded histories."""
    rng = random.Random(f"{runs} {reps} {step} {shared} {spread}")
    policy = Policy(baseline_runs=runs - 1)
    histories = (synthetic(rng, runs, reps, step, shared, spread) for _ in range(trials))
    return sum(bool(regressions(history, policy)) for history in histories) / trials


@pytest.mark.parametrize(
    ("runs", "reps", "shared", "spread", "most"),
    [
        (6, 3, True, 0.05, 0.01),  # measured over 10,000 histories: 0.4 %
        # One repetition: the metrics' own noise is not averaged, they agree less with each
        # other, so the five tests alarm more often together: 1.1 %.
        (6, 1, True, 0.05, 0.02),
        # Each metric shifted on its own, five independent tests: 0.9 and 2.1 %.
        (6, 3, False, 0.05, 0.02),
        (6, 1, False, 0.05, 0.03),
        (11, 3, True, 0.05, 0.01),  # 0.15 %
        (11, 1, True, 0.05, 0.01),  # 0.6 %
        # Runs 15 % apart (a p99 latency, say): beyond the minimum change every other run, so
        # only the t test holds them back, at its 1 % for each metric: 1.9 % (7 % without it),
        # and 7 % when the five metrics vary apart (26 % without it).
        (6, 3, True, 0.15, 0.03),
        (6, 3, False, 0.15, 0.10),
    ],
)
def test_false_alarms_on_an_unchanged_experiment(
    runs: int, reps: int, shared: bool, spread: float, most: float
) -> None:
    measured = rate(runs, reps, shared=shared, spread=spread)
    print(
        f"false alarms: {runs} runs of {reps} repetitions, {spread:.0%} run to run, "
        f"shared {shared}: {measured:.2%}"
    )
    assert measured < most


@pytest.mark.parametrize(
    ("runs", "reps", "shared", "least"),
    [
        # With 5 baseline runs the t test has 4 degrees of freedom: 79 and 82 % over 10,000.
        (6, 3, True, 0.75),
        (6, 1, True, 0.75),
        (6, 3, False, 0.95),  # 99 %: five metrics each shifted on its own, five chances
        (11, 3, True, 0.80),  # 84 %: the repetitions must all be past the worst of 10 runs
        (11, 1, True, 0.85),  # 91 %
    ],
)
def test_a_25_percent_step_is_detected(runs: int, reps: int, shared: bool, least: float) -> None:
    measured = rate(runs, reps, step=0.25, shared=shared)
    print(f"+25 % detected: {runs} runs of {reps} repetitions, shared {shared}: {measured:.1%}")
    assert measured >= least


def test_a_lasting_regression_keeps_alarming_until_it_is_acknowledged() -> None:
    slow = [2.01, 2.03, 1.99]
    history = flagged(walls(*STABLE, slow, slow, slow))
    # each slow run is judged against the stable ones: a flagged run joins no baseline
    assert [bool(e.get("regressed")) for e in history] == [False] * 5 + [True] * 3
    assert all("run-5" not in r.baseline for r in regressions(history))
    # accepted as the new normal: later slow runs compare with it, and are not regressions
    assert regressions(flagged(walls(*STABLE, slow, slow, slow), acknowledged="run-5"),
                       acknowledged="run-5") == []  # fmt: skip
