"""Aggregation, knee and recommendation on hand-made Results (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cxlab.analysis.knees import find_knees
from cxlab.analysis.labels import concurrency, workers_text
from cxlab.analysis.outcome import TrialOutcome, classify
from cxlab.analysis.stats import stats
from cxlab.analysis.summary import Summary, summarize
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab.local.backend import local_status


def result(
    workers: int, wall: float, cpu: float = 0.1, rss: int = 50 * 2**20, failed: int = 0
) -> dict[str, Any]:
    return {
        "workers": workers, "wallSeconds": wall, "cpuUserSeconds": cpu, "cpuSystemSeconds": 0.0,
        "cpuPercent": 100 * cpu / wall, "peakRssBytes": rss, "baselineRssBytes": 20 * 2**20,
        "efficiency": 0.1 / wall, "throughputPerSecond": 100 / wall, "tasksFailed": failed,
        "voluntaryContextSwitches": 10, "involuntaryContextSwitches": 1,
        "latencySeconds": {"p50": 0.1, "p90": 0.1, "p99": 0.1, "max": 0.1}, "cpus": [1],
    }  # fmt: skip


def outcome(
    model: str, workers: int, wall: float, rep: int = 1, rtt: float | None = 0.1, **kw: Any
) -> TrialOutcome:
    trial = Trial(0, model, workers, 0 if model == "goroutines" else None, rtt, rep)
    return TrialOutcome(trial, result(workers or 100, wall, **kw))


def experiment_status(trials: list[Trial], outcomes: list[TrialOutcome]) -> dict[str, Any]:
    """The local backend's status of these outcomes."""
    experiment = parse_experiment(
        {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
         "metadata": {"name": "x"}, "spec": {"workload": {"type": "sleep", "tasks": 10,
         "rtt": "100ms"}, "models": [{"model": "asyncio"}]}}
    )  # fmt: skip
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return local_status(experiment, trials, outcomes, set(), None, moment).document()


def test_stats() -> None:
    assert stats([1.0]).document() == {"mean": 1.0, "median": 1.0, "stddev": 0.0, "cv": 0.0}
    two = stats([1.0, 3.0])
    assert two.mean == 2.0 and two.stddev == pytest.approx(1.41421, rel=1e-4)
    assert two.cv == pytest.approx(0.7071, rel=1e-3) and two.ci95 is None


def test_repetitions_are_aggregated_per_point() -> None:
    summary = summarize([outcome("threads", 10, 1.0, 1), outcome("threads", 10, 1.2, 2)], 0.1)
    [point] = summary.points
    assert point.repetitions == 2 and point.wall_seconds.mean == pytest.approx(1.1)
    assert point.wall_seconds.cv > 0


def test_knee_is_the_fewest_workers_within_tolerance_of_the_best() -> None:
    # The seed's shape: wall falls as ceil(tasks/workers) x RTT, then flattens.
    outcomes = [
        outcome("threads", 10, 1.00),
        outcome("threads", 50, 0.21),
        outcome("threads", 100, 0.105),
        outcome("threads", 200, 0.100),
    ]
    summary = summarize(outcomes, 0.10)
    [knee] = summary.knees
    assert knee.workers == 100 and knee.best_wall_seconds == pytest.approx(0.1)
    assert find_knees(summary.points, 2.0)[0].workers == 50  # a looser tolerance


def test_failed_tasks_disqualify_a_point() -> None:
    outcomes = [outcome("threads", 10, 1.0), outcome("threads", 100, 0.1, failed=3)]
    [knee] = summarize(outcomes, 0.1).knees
    assert knee.workers == 10


def test_recommendation_is_the_cheapest_of_the_fastest() -> None:
    outcomes = [
        outcome("threads", 0, 0.105, cpu=0.5, rss=90 * 2**20),
        outcome("asyncio", 0, 0.104, cpu=0.1, rss=30 * 2**20),
        outcome("goroutines", 0, 0.100, cpu=0.2, rss=10 * 2**20),
        outcome("sequential", 0, 10.0, cpu=0.01),
    ]
    [pick] = summarize(outcomes, 0.10).recommendations
    assert pick.model == "asyncio"
    assert pick.text.startswith("RTT 100ms: asyncio with one worker per task")
    assert (
        "the cheapest of 3 within 10% of the fastest (goroutines (GOMAXPROCS default), 0.1 s)"
        in pick.text
    )


def test_status_phases() -> None:
    trials = [Trial(i, "asyncio", 0, None, 0.1, 1) for i in range(2)]
    ok = TrialOutcome(trials[0], result(1, 0.1))
    assert experiment_status(trials, [])["phase"] == "Pending"
    running = experiment_status(trials, [ok])
    assert running["phase"] == "Running" and "summary" not in running
    failed = TrialOutcome(trials[1], None, "runner exited 1: boom")
    done = experiment_status(trials, [ok, failed])
    assert done["phase"] == "Failed" and done["progress"]["trialsFailed"] == 1
    assert done["trials"][1] == {
        "name": trials[1].name, "model": "asyncio", "variant": "asyncio", "workers": 0,
        "gomaxprocs": None, "rttSeconds": 0.1, "repetition": 1, "phase": "Failed",
        "message": "runner exited 1: boom", "metricsScraped": False,
    }  # fmt: skip
    assert experiment_status(trials, [ok, ok])["phase"] == "Succeeded"


def test_terminal_summary_shows_failed_points_and_trials() -> None:
    from cxlab.table import render_summary

    trials = [Trial(0, "threads", 10, None, 0.1, 1), Trial(1, "threads", 20, None, 0.1, 1)]
    outcomes = [TrialOutcome(trials[0], result(10, 1.0)), TrialOutcome(trials[1], None, "boom")]
    status = experiment_status(trials, outcomes)
    text = render_summary({"metadata": {"name": "x"}, "status": status})
    assert "x: Failed — 2/2 trials, 1 failed" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("threads")]
    assert rows[0][:4] == ["threads", "10", "100ms", "1"]
    assert rows[1][:5] == ["threads", "20", "100ms", "0", "failed"]
    assert f"  {trials[1].name}: boom" in text


@pytest.mark.parametrize(
    ("repetitions", "legend"),
    [
        (2, "95% CI: of the mean wall time, from 3 repetitions on (this experiment ran 2);"),
        (3, "95% CI: of the mean wall time over 3 repetitions;"),
    ],
)
def test_the_legend_names_the_repetitions_the_experiment_ran(repetitions: int, legend: str) -> None:
    from cxlab.table import render_summary

    trials = [Trial(0, "threads", 10, None, 0.1, rep) for rep in range(1, repetitions + 1)]
    outcomes = [TrialOutcome(t, result(10, 1.0 + t.repetition / 100)) for t in trials]
    text = render_summary(
        {"metadata": {"name": "x"}, "status": experiment_status(trials, outcomes)}
    )
    assert legend in text


def test_a_compact_summary_whose_config_map_is_gone_still_shows_the_recommendation() -> None:
    from cxlab.experiments.results_store import compact_summary
    from cxlab.table import render_summary

    trials = [Trial(0, "threads", 10, None, 0.1, 1), Trial(1, "threads", 20, None, 0.1, 1)]
    outcomes = [TrialOutcome(trials[0], result(10, 1.0)), TrialOutcome(trials[1], None, "boom")]
    status = experiment_status(trials, outcomes)
    status["summary"] = compact_summary(Summary.read(status["summary"]), "x").document()
    text = render_summary({"metadata": {"name": "x"}, "status": status})
    assert "No points or knees: they are in ConfigMap x-summary, not in this document" in text
    assert "cxlab summary cx/x reads them" in text
    assert status["summary"]["recommendations"][0]["text"] in text
    assert f"  {trials[1].name}: boom" in text


def test_a_workload_without_rtt_gets_one_overall_recommendation() -> None:
    outcomes = [  # the GIL seed: the cpu workload has no RTT
        outcome("sequential", 1, 0.96, rtt=None, cpu=0.95),
        outcome("threads", 2, 0.91, rtt=None, cpu=0.90),
        outcome("processes", 2, 0.43, rtt=None, cpu=0.86),
    ]
    [pick] = summarize(outcomes, 0.10).recommendations
    assert pick.rtt_seconds is None and pick.model == "processes"
    assert pick.text.startswith("Overall: processes with 2 workers — 0.43 s wall")


@pytest.mark.parametrize(
    ("requested", "cpus", "pinned"),
    [
        ([{1}], [1], True), ([{1}], [0, 1], False), ([{1}], [0], False), (1, [1], True),
        (1, [0, 1], False), (None, [0, 1], False),
    ],
)  # fmt: skip
def test_one_classification_judges_pinning_on_both_backends(
    requested: list[set[int]] | int | None, cpus: list[int], pinned: bool
) -> None:
    # sets: the local backend knows each Pod's cores; an int: on a cluster only how many;
    # None: a fraction of a CPU, never pinned
    trial = Trial(0, "asyncio", 10, None, 0.1, 1)
    outcome = classify(trial, [result(10, 0.1) | {"cpus": cpus}], requested)
    assert outcome.succeeded and (outcome.unpinned is None) == pinned


@pytest.mark.parametrize("pinning", ["required", "preferred"])
def test_an_unpinned_trial_counts_only_when_pinning_is_preferred(pinning: str) -> None:
    trials = [Trial(i, "asyncio", 10, None, 0.1, rep) for i, rep in enumerate((1, 2))]
    outcomes = [
        classify(trials[0], [result(10, 0.1)], 1),
        classify(trials[1], [result(10, 0.5) | {"cpus": [0, 1]}], 1),  # shared cores
    ]
    (point,) = summarize(outcomes, 0.1, pinning).points
    if pinning == "required":
        assert point.repetitions == 1 and point.unpinned_trials == 1
        assert point.wall_seconds.mean == 0.1 and point.failed_trials == 0
    else:
        assert point.repetitions == 2 and point.unpinned_trials is None
    status = experiment_status(trials, outcomes)  # the local backend; pinning: required
    assert [e.get("pinned") for e in status["trials"]] == [True, False]
    assert status["trials"][1]["phase"] == "Succeeded"
    assert status["trials"][1]["message"].startswith("not pinned: asked for 1 exclusive CPU")
    pinned = next(c for c in status["conditions"] if c["type"] == "Pinned")
    assert pinned["status"] == "False" and "left out of the knees" in pinned["message"]


def test_one_run_shows_n_1_not_a_spread_of_zero() -> None:
    from cxlab.report.tables import points_table as html_points
    from cxlab.table import points_table

    once = summarize([outcome("threads", 10, 1.0, 1)], 0.1)
    text = points_table(once.points)
    assert "n=1" in text and "±" not in text and "0.0%" not in text
    rows = html_points(once.points, once).split("<tbody>")[1]
    assert '<td class="num">n=1</td>' in rows and "0.0%" not in rows
    twice = summarize([outcome("threads", 10, 1.0, 1), outcome("threads", 10, 1.2, 2)], 0.1)
    row = points_table(twice.points).splitlines()[2].split()
    # the median, no interval from two runs (it says how many), and their CV
    assert row[4:7] == ["1.100", "n=2", "12.9%"] and "n=1" not in points_table(twice.points)


def test_knees_and_recommendations_count_pods_times_workers() -> None:
    # 1 Pod x 20 workers and 3 Pods x 10 workers are as fast: 20 workers in all is the knee,
    # not the 10 of each of three Pods
    one = Trial(0, "asyncio", 20, None, 0.1, 1)
    three = Trial(1, "asyncio", 10, None, 0.1, 1, pods=3)
    merged = result(10, 1.0) | {"pods": 3, "workersStarted": 30}
    summary = summarize([TrialOutcome(one, result(20, 1.0)), TrialOutcome(three, merged)], 0.1)
    [knee] = summary.knees
    assert (knee.pods, knee.workers) == (1, 20)
    points = {p.pods: p for p in summary.points}
    assert points[3].workers == 10 and concurrency(points[3]) == 30
    assert workers_text(points[3]) == "3 Pods \u00d7 10 workers"  # 30 started: none missing
    [pick] = summary.recommendations
    assert pick.pods == 1 and "with 20 workers" in pick.text
