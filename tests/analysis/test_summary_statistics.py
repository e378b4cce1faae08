"""Statistics that say how sure they are (issue 11, item 2): medians, 95 % intervals, ties,
noisy points, and the new Result fields in the summary, the terminal tables and the report."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.stats import separable, stats, t975
from cxlab.analysis.summary import Summary, summarize
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab.local.backend import local_status
from cxlab.report.tables import knees_table as html_knees
from cxlab.report.tables import points_table as html_points
from cxlab.table import points_table

MIB = 2**20


def result(
    workers: int, wall: float, cpu: float = 0.1, rss: int = 50 * MIB, **extra: Any
) -> dict[str, Any]:
    """A Result as the summary reads it; `extra` adds the fields of newer Results."""
    return {
        "workers": workers, "wallSeconds": wall, "cpuUserSeconds": cpu, "cpuSystemSeconds": 0.0,
        "cpuPercent": 100 * cpu / wall, "peakRssBytes": rss, "baselineRssBytes": 20 * MIB,
        "efficiency": 0.1 / wall, "throughputPerSecond": 100 / wall, "tasksFailed": 0,
        "voluntaryContextSwitches": 10, "involuntaryContextSwitches": 1,
        "latencySeconds": {"p50": 0.1, "p90": 0.1, "p99": 0.1, "max": 0.1}, "cpus": [1],
    } | extra  # fmt: skip


def runs(
    model: str, workers: int, walls: list[float], cpus: list[float] | None = None, **extra: Any
) -> list[TrialOutcome]:
    """One point's repetitions at RTT 100 ms: a wall time (and CPU seconds) per repetition."""
    cpus = cpus or [0.1] * len(walls)
    gomaxprocs = 0 if model == "goroutines" else None
    return [
        TrialOutcome(
            Trial(0, model, workers, gomaxprocs, 0.1, rep),
            result(workers or 1000, wall, cpu, **extra),
        )
        for rep, (wall, cpu) in enumerate(zip(walls, cpus, strict=True), start=1)
    ]


def terminal_rows(text: str) -> list[dict[str, str]]:
    """The rows of a terminal table by header, cut where its dashed rule says."""
    header, rule, *rows = text.splitlines()
    spans, start = [], 0
    for dashes in rule.split("  "):
        spans.append((start, start + len(dashes)))
        start += len(dashes) + 2
    names = [header[a:b].strip() for a, b in spans]
    return [{n: row[a:b].strip() for n, (a, b) in zip(names, spans, strict=True)} for row in rows]


# --- medians and intervals -----------------------------------------------------------------


def _t_cdf_above_zero(t: float, df: int, steps: int = 4000) -> float:
    """P(0 < T < t) for Student's t, by Simpson's rule on its density."""
    norm = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def density(x: float) -> float:
        return norm * (1 + x * x / df) ** (-(df + 1) / 2)

    h = t / steps
    inner = sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
    return (density(0) + inner + density(t)) * h / 3


@pytest.mark.parametrize("df", range(1, 32))
def test_the_t_table_is_the_975_quantile(df: int) -> None:
    assert _t_cdf_above_zero(t975(df), df) == pytest.approx(0.475, abs=2e-5)


def test_one_degree_of_freedom_is_the_cauchy_quantile_and_none_is_refused() -> None:
    # two repetitions (an objective's verdict): t(0.975, 1) = tan(0.475 pi), not the table's end
    assert t975(1) == pytest.approx(math.tan(0.475 * math.pi), abs=1e-4)
    with pytest.raises(ValueError, match="degree of freedom"):
        t975(0)


def test_an_interval_from_three_repetitions_on_a_known_sample() -> None:
    assert stats([1.0]).ci95 is None and stats([1.0, 2.0]).ci95 is None
    three = stats([11.0, 12.0, 16.0])  # mean 13, sd √7, median 12
    assert three.median == 12.0 and three.mean == 13.0
    half = 4.3027 * math.sqrt(7) / math.sqrt(3)  # t(0.975, 2) sd / √n
    assert three.ci95 == pytest.approx([13.0 - half, 13.0 + half], abs=1e-5)
    five = stats([10.0, 12.0, 14.0, 16.0, 18.0])  # mean 14, sd √10
    assert five.ci95 == pytest.approx([10.0736, 17.9264], abs=1e-4)
    assert stats([0.01, 0.02, 0.2]).ci95[0] == 0.0  # a wall time is never negative


def test_the_summary_keeps_intervals_only_from_three_repetitions() -> None:
    summary = summarize(runs("threads", 10, [1.0, 1.1]) + runs("threads", 20, [1.0, 1.1, 1.2]), 0.1)
    two, three = summary.points
    assert two.wall_seconds.ci95 is None and three.wall_seconds.ci95 is not None
    assert three.wall_seconds.median == 1.1 and three.cpu_seconds.ci95 is not None


def test_one_outlier_does_not_move_the_knee() -> None:
    outcomes = [
        *runs("threads", 10, [1.0, 1.0, 1.0]),
        *runs("threads", 100, [0.105, 0.104, 0.5]),  # one repetition hit a noisy neighbour
        *runs("threads", 200, [0.1, 0.1, 0.1]),
    ]
    [knee] = summarize(outcomes, 0.1).knees
    assert knee.workers == 100 and knee.wall_seconds == 0.105  # by the mean: 200


def test_one_outlier_does_not_move_the_recommendation() -> None:
    outcomes = [
        *runs("goroutines", 0, [0.1, 0.1, 0.1], cpus=[0.2] * 3),
        *runs("threads", 100, [0.105, 0.104, 0.5], cpus=[0.1] * 3),  # cheaper, one outlier
    ]
    [pick] = summarize(outcomes, 0.1).recommendations
    assert pick.model == "threads" and pick.wall_seconds == 0.105


# --- ranking, display and ties ---------------------------------------------------------------


def test_the_recommendation_prints_the_quantity_it_ranks_by() -> None:
    # CPU seconds and CPU % disagree: a ranks first by seconds, b by percent
    outcomes = [
        *runs("threads", 100, [0.100] * 3, cpus=[0.100] * 3),  # 100 %
        *runs("threads", 200, [0.109] * 3, cpus=[0.105] * 3),  # 96 %
    ]
    [pick] = summarize(outcomes, 0.1).recommendations
    assert pick.workers == 100 and pick.cpu_seconds == 0.1
    assert "CPU 0.1 s," in pick.text and "%" not in pick.text.split(";")[0]
    assert pick.tied_with == []  # identical repetitions: zero-width intervals, apart


def test_overlapping_intervals_are_tied_and_the_fewest_workers_is_picked() -> None:
    # Two runs of one experiment: the CPU medians swap places, the intervals overlap.
    first = runs("threads", 2000, [1.5] * 3, cpus=[1.2, 1.1, 1.4]) + runs(
        "threads", 10000, [1.5] * 3, cpus=[1.3, 1.2, 1.4]
    )
    second = runs("threads", 2000, [1.5] * 3, cpus=[1.3, 1.2, 1.4]) + runs(
        "threads", 10000, [1.5] * 3, cpus=[1.2, 1.1, 1.4]
    )
    texts = []
    for outcomes in (first, second):
        summary = summarize(outcomes, 0.1)
        [pick] = summary.recommendations
        html = html_points(summary.points, summary)
        assert html.count('<span class="tag tied">tied</span>') == 1
        assert pick.workers == 2000, "the same answer from both runs"
        assert [(t.variant, t.workers) for t in pick.tied_with] == [("threads", 10000)]
        texts.append(pick.text)
    assert "; tied with threads with 10000 workers (CPU 1.2 s vs 1.3 s, not separable with 3 " \
        "repetitions)" in texts[0]  # fmt: skip
    assert "(CPU 1.3 s vs 1.2 s, not separable with 3 repetitions)" in texts[1]


def test_separated_intervals_are_not_tied() -> None:
    outcomes = runs("threads", 2000, [1.5] * 3, cpus=[1.20, 1.21, 1.22]) + runs(
        "threads", 500, [1.5] * 3, cpus=[1.30, 1.31, 1.32]
    )
    [pick] = summarize(outcomes, 0.1).recommendations
    # the cheaper one wins although it has more workers: the intervals say the gap is real
    assert pick.workers == 2000 and pick.tied_with == [] and "tied" not in pick.text


@pytest.mark.parametrize(("other", "tied"), [(1.05, True), (1.2, False)])
def test_with_fewer_than_three_repetitions_the_tolerance_decides_a_tie(
    other: float, tied: bool
) -> None:
    outcomes = runs("threads", 100, [1.0], cpus=[1.0]) + runs("threads", 50, [1.0], cpus=[other])
    [pick] = summarize(outcomes, 0.1).recommendations
    if tied:  # 5 % apart, one run each: cannot tell, so the fewest workers
        assert pick.workers == 50 and pick.tied_with[0].workers == 100
        assert "not separable with 1 repetition)" in pick.text
    else:
        assert pick.workers == 100 and pick.tied_with == []


def test_several_ties_are_named_up_to_two() -> None:
    outcomes = [o for w, cpu in ((400, 1.0), (300, 1.02), (200, 1.04), (100, 1.06))
                for o in runs("threads", w, [1.0], cpus=[cpu])]  # fmt: skip
    [pick] = summarize(outcomes, 0.1).recommendations
    assert pick.workers == 100 and [t.workers for t in pick.tied_with] == [200, 300, 400]
    assert pick.text.endswith(
        "; tied with threads with 200 workers (CPU 1.04 s), threads with 300 workers (CPU 1.02 s) "
        "and 1 more (CPU 1.06 s here, not separable with 1 repetition)"
    )


def test_memory_decides_where_cpu_cannot() -> None:
    outcomes = runs("threads", 100, [1.0], cpus=[1.0], rss=200 * MIB) + runs(
        "goroutines", 0, [1.0], cpus=[1.02], rss=10 * MIB
    )
    [pick] = summarize(outcomes, 0.1).recommendations
    assert pick.model == "goroutines" and pick.tied_with == []


def test_separable() -> None:
    a, b = stats([1.0, 1.1, 1.2]), stats([1.15, 1.25, 1.35])
    assert not separable(a, b, 0.1) and not separable(b, a, 0.1)
    assert separable(a, stats([2.0, 2.0, 2.0]), 0.1)
    assert not separable(stats([1.0]), stats([1.09]), 0.1)
    assert separable(stats([1.0]), stats([1.11]), 0.1)


# --- noisy points ------------------------------------------------------------------------------


def test_a_point_whose_cv_exceeds_the_tolerance_is_flagged_everywhere() -> None:
    outcomes = runs("threads", 100, [1.0, 1.4, 0.8]) + runs("threads", 200, [5.0, 5.0, 5.0])
    summary = summarize(outcomes, 0.1)
    noisy, steady = summary.points
    assert noisy.noisy and noisy.noisy_quantities == ["wallSeconds"]
    assert noisy.wall_seconds.cv > 0.1
    assert not steady.noisy and steady.noisy_quantities == []
    assert [r["noisy"] for r in terminal_rows(points_table(summary.points))] == ["wall", ""]
    assert '<span class="tag noisy">noisy: wall</span>' in html_points(summary.points, summary)
    assert "(noisy)" in html_knees(summary.knees)
    [pick] = summary.recommendations
    assert pick.noisy and "; noisy: cv of wall 29%, over the 10% tolerance" in pick.text


def test_one_repetition_is_never_noisy() -> None:
    [point] = summarize(runs("threads", 100, [1.0]), 0.01).points
    assert point.noisy is False


def test_status_best_says_noisy_and_tied() -> None:
    experiment = parse_experiment(
        {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
         "metadata": {"name": "x"}, "spec": {"workload": {"type": "sleep", "tasks": 10,
         "rtt": "100ms"}, "models": [{"model": "threads", "workers": [50, 100]}],
         "repetitions": 3}}
    )  # fmt: skip
    outcomes = runs("threads", 50, [1.0, 1.4, 0.8]) + runs("threads", 100, [1.0, 1.0, 1.0])
    trials = [o.trial for o in outcomes]
    status = local_status(
        experiment, trials, outcomes, set(), None, datetime(2026, 1, 1, tzinfo=UTC)
    ).document()
    assert status["best"] == "threads, 50 workers (1 s, noisy, tied with 1 other)"


# --- the new Result fields -----------------------------------------------------------------------


def _new_fields(**changes: Any) -> dict[str, Any]:
    return {
        "peakVmBytes": 8_000 * MIB, "pool": "onDemand", "workersStarted": 1932,
        "taskContextSwitches": {"voluntary": 300, "involuntary": 12}, "syscalls": None,
    } | changes  # fmt: skip


def test_peak_vm_task_switches_and_started_workers_are_shown() -> None:
    summary = summarize(runs("threads", 10000, [2.0, 2.1, 2.2], **_new_fields()), 0.1)
    [point] = summary.points
    assert point.peak_vm_bytes.median == 8_000 * MIB
    assert point.task_context_switches.median == 312.0
    assert point.workers_started == 1932 and point.pool == "onDemand"
    [row] = terminal_rows(points_table(summary.points))
    assert row["workers"] == "10000 (started 1932)"
    names = list(row)
    assert names[names.index("peak MiB") + 1] == "VM MiB" and row["VM MiB"] == "8000"
    assert names[names.index("ctx sw") + 1] == "task ctx sw" and row["task ctx sw"] == "312"
    assert "syscalls" not in row
    html = html_points(summary.points, summary)
    assert '<th class="num">Peak VM</th>' in html and "8,000.0 MiB" in html
    assert "10,000 (started 1,932)" in html and "threads (on-demand pool)" in html
    [pick] = summary.recommendations
    assert pick.text.startswith(
        "RTT 100ms: threads (on-demand pool) with 10000 workers (1932 started) — 2.1 s wall"
    )


def test_results_without_the_new_fields_show_a_dash() -> None:
    summary = summarize(runs("threads", 100, [1.0]), 0.1)
    [point] = summary.points
    assert point.peak_vm_bytes is None and point.task_context_switches is None
    assert point.workers_started is None and point.syscalls is None
    [row] = terminal_rows(points_table(summary.points))
    assert row["VM MiB"] == "—" and row["task ctx sw"] == "—"
    assert '<td class="num">—</td>' in html_points(summary.points, summary)


def test_unavailable_syscalls_say_so_never_zero() -> None:
    unavailable = {"unavailable": "ptrace refused: not permitted in this Pod"}
    counted = {"total": 60_000, "counts": {"futex": 54_446, "read": 10}}
    outcomes = [
        *runs("threads", 2, [1.0], **_new_fields(syscalls=counted)),
        *runs("threads", 4, [1.0], **_new_fields(syscalls=unavailable)),
        *runs("sequential", 1, [2.0], **_new_fields(syscalls={"total": 90, "counts": {"read": 9}})),
    ]
    summary = summarize(outcomes, 0.1)
    two, four, sequential = summary.points
    assert two.syscalls.futex.median == 54_446.0
    assert four.syscalls.document() == unavailable
    assert sequential.syscalls.futex.median == 0.0  # futex is kept whenever made
    rows = terminal_rows(points_table(summary.points))
    shown = [(r["syscalls"], r["futex"]) for r in rows]
    assert shown == [("60000", "54446"), ("unavailable", "unavailable"), ("90", "0")]
    html = html_points(summary.points, summary)
    assert html.count('title="ptrace refused: not permitted in this Pod">unavailable<') == 2
    assert '<th class="num">Futex</th>' in html and "54,446" in html


def test_syscall_columns_are_left_out_when_no_trial_asked() -> None:
    summary = summarize(runs("threads", 2, [1.0], **_new_fields()), 0.1)
    assert "syscalls" not in points_table(summary.points)
    assert "Syscalls" not in html_points(summary.points, summary)


def test_a_summary_written_before_these_fields_still_renders() -> None:
    # a result.json from an older cxlab: means only, no medians, flags or new fields
    document = summarize(runs("threads", 100, [1.0, 1.2, 1.4]), 0.1).document()
    [point] = document["points"]
    for key in ("noisy", "noisyQuantities", "peakVmBytes", "taskContextSwitches", "syscalls",
                "workersStarted", "pool"):  # fmt: skip
        del point[key]
    for value in point.values():
        if isinstance(value, dict):
            value.pop("median", None)
            value.pop("ci95", None)
    point["wallSeconds"]["mean"] = 1.25  # so the mean is told from the median
    summary = Summary.read(document)
    [row] = terminal_rows(points_table(summary.points))
    assert row["wall s"] == "1.250" and row["95% CI"] == "n=3" and row["VM MiB"] == "—"
    assert "1.25 s" in html_points(summary.points, summary)
