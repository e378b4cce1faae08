"""spec.objectives judged (cxlab.analysis.objectives): each metric read from a Result, the
three verdicts from the 95 % interval against published t quantiles, the repetitions that would
decide, the scopes, the condition, and the trials abortOnFail skips."""

from __future__ import annotations

import json
import math
import statistics
from datetime import UTC, datetime
from typing import Any

import pytest

from cxlab.analysis.objectives import (
    BROKEN,
    INCONCLUSIVE,
    MET,
    Bound,
    judge,
    judge_objectives,
    repetitions_needed,
    skipped_trials,
    summed_up,
    value_of,
)
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.summary import summarize
from cxlab.cli.exits import GRAVITY, exit_status
from cxlab.conditions import condition_of
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec, Objective
from cxlab.experiments.status import ExperimentStatus
from cxlab.local.backend import local_status
from cxlab.schedules.history import history_entry

MIB = 2**20
# Two-sided 95 % Student t quantiles as published (NIST/SEMATECH e-Handbook of Statistical
# Methods, 1.3.6.7.2, upper critical values at 0.025): df 1, 2, 4, 9.
PUBLISHED_T975 = {1: 12.706, 2: 4.303, 4: 2.776, 9: 2.262}


def result(**fields: Any) -> dict[str, Any]:
    """A Result with the fields the objectives read; `fields` override."""
    base = {
        "workers": 10, "tasks": 100, "tasksOk": 100, "tasksFailed": 0, "wallSeconds": 1.0,
        "cpuUserSeconds": 0.3, "cpuSystemSeconds": 0.1, "cpuPercent": 40.0,
        "peakRssBytes": 50 * MIB, "baselineRssBytes": 20 * MIB, "efficiency": 0.9,
        "throughputPerSecond": 100.0, "voluntaryContextSwitches": 1,
        "involuntaryContextSwitches": 1, "startSkewSeconds": None, "arrival": None,
        "latencySeconds": {"p50": 0.1, "p90": 0.15, "p99": 0.2, "max": 0.3}, "cpus": [0],
    }  # fmt: skip
    return base | fields


def objective(**fields: Any) -> Objective:
    return Objective.model_validate(fields)


def spec(**fields: Any) -> ExperimentSpec:
    body = {
        "workload": {"type": "sleep", "tasks": 100, "rtt": "100ms"},
        "models": [{"model": "threads", "workers": [1, 2, 4, 8]}],
    } | fields
    return ExperimentSpec.model_validate(body)


# ---- each metric, read from a Result ----


@pytest.mark.parametrize(
    ("fields", "changes", "expected"),
    [
        ({"latency": {"max": "1s"}}, {}, 0.2),  # p99 by default
        ({"latency": {"percentile": "p50", "max": "1s"}}, {}, 0.1),
        ({"latency": {"percentile": "p90", "max": "1s"}}, {}, 0.15),
        ({"latency": {"percentile": "max", "max": "1s"}}, {}, 0.3),
        ({"failureRatio": {"max": 0.1}}, {"tasksOk": 90, "tasksFailed": 10}, 0.1),
        ({"throughput": {"min": 1}}, {}, 100.0),
        ({"efficiency": {"min": 0.5}}, {}, 0.9),
        ({"cpuPerTask": {"max": "10ms"}}, {}, 0.004),  # (0.3 + 0.1) s over 100 tasks
        ({"peakRss": {"max": "64Mi"}}, {}, 50 * MIB),
        ({"startSkew": {"max": "10ms"}}, {"startSkewSeconds": 0.002}, 0.002),
        ({"dropped": {"max": 0}}, {"arrival": {"dropped": 7}}, 7.0),
    ],
)
def test_each_metric_is_read_from_the_result(
    fields: dict[str, Any], changes: dict[str, Any], expected: float
) -> None:
    assert value_of(objective(**fields), result(**changes)) == pytest.approx(expected)


def test_metrics_a_trial_does_not_have_are_none_not_zero() -> None:
    assert value_of(objective(startSkew={"max": "1ms"}), result()) is None  # one Pod
    assert value_of(objective(efficiency={"min": 0.5}), result(efficiency=None)) is None
    assert value_of(objective(dropped={"max": 0}), result()) is None


# ---- the verdict of one point ----

AT_MOST = Bound(1.0, True, "latency p99", "seconds")
AT_LEAST = Bound(1.0, False, "throughput", "rate")


@pytest.mark.parametrize("n", sorted(PUBLISHED_T975))
def test_the_interval_is_the_published_t_interval(n: int) -> None:
    # n + 1 values alternating around 0.5 with a known standard deviation: the interval's half
    # width must be the published t(0.975, n) times sd / sqrt(n + 1).
    values = [0.5 + (0.01 if i % 2 else -0.01) for i in range(n + 1)]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    judged = judge(values, AT_MOST)
    assert judged.high is not None and judged.low is not None
    half = PUBLISHED_T975[n] * sd / math.sqrt(n + 1)
    assert (judged.high - judged.low) / 2 == pytest.approx(half, rel=1e-3)


@pytest.mark.parametrize(
    ("values", "bound", "verdict"),
    [
        ([0.5, 0.6, 0.55], AT_MOST, MET),  # interval well below 1
        ([1.5, 1.6, 1.55], AT_MOST, BROKEN),  # wholly above
        ([0.9, 1.1], AT_MOST, INCONCLUSIVE),  # straddles
        ([1.5, 1.6, 1.55], AT_LEAST, MET),
        ([0.5, 0.6, 0.55], AT_LEAST, BROKEN),
        ([0.95, 1.05, 1.0], AT_LEAST, INCONCLUSIVE),
        ([1.0, 1.0], AT_MOST, MET),  # on the bound, without spread: it holds
        ([2.0], AT_MOST, BROKEN),  # one repetition: its value decides
        ([0.5], AT_MOST, MET),
        ([], AT_MOST, INCONCLUSIVE),  # every trial failed
    ],
)
def test_three_verdicts(values: list[float], bound: Bound, verdict: str) -> None:
    assert judge(values, bound).verdict == verdict


def test_a_breach_by_one_value_of_several_to_come_is_not_yet_sure() -> None:
    assert judge([2.0], AT_MOST, one_decides=False).verdict == INCONCLUSIVE


def with_moments(mean: float, sd: float, n: int) -> list[float]:
    """n values with exactly this mean and sample standard deviation."""
    z = [i - (n - 1) / 2 for i in range(n)]
    scale = math.sqrt(sum(v * v for v in z) / (n - 1))
    return [mean + sd * v / scale for v in z]


def test_the_repetitions_needed_would_decide_and_one_fewer_would_not() -> None:
    # mean 260 ms, sd 20 ms, bound 250 ms: t(n-1) 20 / sqrt(n) < 10 first at n = 18
    # (t(17) = 2.110: 0.497 < 0.5; t(16) = 2.120: 0.514), the published quantiles.
    assert repetitions_needed(0.260, 0.020, 0.250) == 18
    judged = judge([0.9, 1.06], AT_MOST)
    assert judged.verdict == INCONCLUSIVE and judged.needed is not None
    sd = statistics.stdev([0.9, 1.06])
    assert judge(with_moments(0.98, sd, judged.needed), AT_MOST).verdict == MET
    assert judge(with_moments(0.98, sd, judged.needed - 1), AT_MOST).verdict == INCONCLUSIVE


def test_a_mean_on_the_bound_is_never_decided() -> None:
    assert repetitions_needed(1.0, 0.1, 1.0) is None


# ---- objectives over an experiment's points ----


def outcomes_for(
    experiment: ExperimentSpec, p99: dict[int, list[float]], model: str = "threads"
) -> list[TrialOutcome]:
    """Every planned trial with a Result whose p99 is p99[workers][repetition - 1]."""
    found = []
    for trial in plan_trials(experiment):
        if trial.model != model:
            continue
        latency = p99[trial.workers][trial.repetition - 1]
        found.append(
            TrialOutcome(
                trial,
                result(latencySeconds={"p50": 0.1, "p90": 0.1, "p99": latency, "max": latency}),
            )
        )
    return found


P99 = {1: [0.10, 0.11, 0.12], 2: [0.20, 0.21, 0.22], 4: [0.40, 0.41, 0.42], 8: [0.8, 0.81, 0.82]}


def verdicts(experiment: ExperimentSpec, outcomes: list[TrialOutcome]) -> list[Any]:
    summary = summarize(outcomes, experiment.tolerance, experiment.pinning)
    return judge_objectives(experiment, outcomes, summary)


def test_every_point_counts_and_the_message_names_value_interval_and_bound() -> None:
    experiment = spec(repetitions=3, objectives=[{"latency": {"max": "300ms"}}])
    [judged] = verdicts(experiment, outcomes_for(experiment, P99))
    assert (judged.verdict, judged.met, judged.broken, judged.inconclusive) == (BROKEN, 2, 2, 0)
    assert [p.workers for p in judged.points] == [4, 8, 1, 2]  # broken first
    assert "broken at 2 of 4 point(s), first threads, 4 workers, RTT 100ms: 410ms [385ms, " in (
        judged.message
    )
    assert "bound ≤ 300ms" in judged.message


def test_scope_by_models_and_workers_and_the_recommended_point() -> None:
    experiment = spec(
        repetitions=3,
        objectives=[
            {"latency": {"max": "300ms"}, "workers": [1, 2]},
            {"latency": {"max": "150ms"}, "scope": "recommended"},
            {"latency": {"max": "300ms"}, "models": ["threads"], "workers": [8]},
        ],
    )
    narrowed, recommended, eight = verdicts(experiment, outcomes_for(experiment, P99))
    assert (narrowed.verdict, narrowed.met) == (MET, 2)
    # wall times are equal, so the recommendation is the cheapest: all cost the same, then
    # fewest workers, 1, whose p99 is 110 ms.
    assert [(p.workers, recommended.verdict) for p in recommended.points] == [(1, MET)]
    assert (eight.verdict, [p.workers for p in eight.points]) == (BROKEN, [8])


def test_the_condition_sums_up_the_objectives() -> None:
    experiment = spec(
        repetitions=2,
        objectives=[{"latency": {"max": "1s"}}, {"latency": {"max": "210ms"}, "workers": [2]}],
    )
    met, edge = verdicts(experiment, outcomes_for(experiment, P99))
    assert (met.verdict, edge.verdict) == (MET, INCONCLUSIVE)
    assert edge.points[0].repetitions_needed is not None
    assert "repetitions would decide it" in edge.message
    assert summed_up([met]) == (True, "AllObjectivesMet", met.message)
    assert summed_up([met, edge])[:2] == (None, "Inconclusive")
    broken = met.model_copy(update={"verdict": BROKEN})
    assert summed_up([broken, edge])[:2] == (False, "ObjectiveBroken")
    assert summed_up([])[:2] == (True, "NoObjectives")


GATE = {
    "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
    "metadata": {"name": "gate-1"},
    "spec": {"workload": {"type": "sleep", "tasks": 100, "rtt": "100ms"},
             "models": [{"model": "threads", "workers": [1, 2, 4, 8]}], "repetitions": 3,
             "objectives": [{"name": "p99", "latency": {"max": "300ms"}}]},
}  # fmt: skip


def finished(document: dict[str, Any]) -> dict[str, Any]:
    """The document with the local backend's status after every trial measured P99."""
    experiment = parse_experiment(document)
    trials = plan_trials(experiment.spec)
    status = local_status(
        experiment, trials, outcomes_for(experiment.spec, P99), set(), None,
        datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    return document | {"status": status.document()}


def test_a_finished_status_has_the_table_and_the_condition() -> None:
    status = ExperimentStatus.read(finished(GATE)["status"])
    condition = condition_of(status.conditions, "ObjectivesMet")
    assert condition is not None and (condition.status, condition.reason) == (
        "False",
        "ObjectiveBroken",
    )
    assert condition.message and condition.message.startswith("p99: broken at 2 of 4")
    assert status.objectives and status.objectives[0].points[0].verdict == BROKEN
    assert status.phase == "Succeeded"  # the phase is whether it ran, not what it measured


# ---- abortOnFail ----


def recorded(experiment: ExperimentSpec, p99: dict[int, list[float]], upto: int) -> list[Any]:
    """The outcomes of the first `upto` trials in run order."""
    done = {t.name for t in plan_trials(experiment)[:upto]}
    return [o for o in outcomes_for(experiment, p99) if o.trial.name in done]


def test_a_broken_point_skips_more_workers_of_its_model_only() -> None:
    experiment = spec(
        models=[{"model": "threads", "workers": [1, 2, 4, 8]}, {"model": "asyncio",
                "workers": [1, 2, 4, 8]}],
        objectives=[{"latency": {"max": "300ms"}, "abortOnFail": True}],
    )  # fmt: skip
    trials = plan_trials(experiment)
    # threads' 4 workers broke (400 ms); asyncio has not run yet
    skipped = skipped_trials(experiment, trials, recorded(experiment, P99, 3))
    assert sorted(skipped) == ["003-threads-w8-rtt100ms-r1"]
    assert skipped["003-threads-w8-rtt100ms-r1"].startswith(
        "objective latency p99 ≤ 300ms broken at threads, 4 workers, RTT 100ms: 400ms"
    )


def test_with_repetitions_to_come_a_single_breach_skips_nothing_until_the_interval_is_sure() -> (
    None
):
    experiment = spec(
        repetitions=3, objectives=[{"latency": {"max": "300ms"}, "abortOnFail": True}]
    )
    trials = plan_trials(experiment)
    assert skipped_trials(experiment, trials, recorded(experiment, P99, 4)) == {}  # one rep each
    # after two repetitions of 4 workers (400, 410 ms: interval [336, 474] ms, wholly above)
    after = skipped_trials(experiment, trials, recorded(experiment, P99, 7))
    assert sorted(after) == ["007-threads-w8-rtt100ms-r2", "011-threads-w8-rtt100ms-r3"]


def test_arrivals_skip_higher_rates_at_the_same_workers() -> None:
    experiment = ExperimentSpec.model_validate(
        {
            "workload": {"type": "sleep", "rtt": "10ms",
                         "arrival": {"ratesPerSecond": [100, 200, 400], "duration": "2s"}},
            "models": [{"model": "asyncio", "workers": [4, 8]}],
            "objectives": [{"latency": {"max": "50ms"}, "abortOnFail": True}],
        }
    )  # fmt: skip
    trials = plan_trials(experiment)
    slow = {4: 0.08, 8: 0.02}  # 4 workers at 100/s already miss 50 ms; 8 workers hold
    outcomes = []
    for t in trials[:2]:
        latency = {"p50": 0.01, "p90": 0.01, "p99": slow[t.workers], "max": 0.1}
        outcomes.append(TrialOutcome(t, result(latencySeconds=latency)))
    skipped = skipped_trials(experiment, trials, outcomes)
    assert sorted(skipped) == ["002-asyncio-w4-rtt10ms-a200-r1", "004-asyncio-w4-rtt10ms-a400-r1"]


def test_only_trials_in_the_objectives_scope_are_skipped() -> None:
    experiment = spec(objectives=[{"latency": {"max": "300ms"}, "abortOnFail": True,
                                   "workers": [1, 2, 4]}])  # fmt: skip
    assert skipped_trials(experiment, plan_trials(experiment), recorded(experiment, P99, 3)) == {}


def test_without_abort_on_fail_nothing_is_skipped() -> None:
    experiment = spec(objectives=[{"latency": {"max": "300ms"}}])
    assert skipped_trials(experiment, plan_trials(experiment), recorded(experiment, P99, 3)) == {}


def test_skipped_trials_are_neither_failed_nor_points_of_the_verdict() -> None:
    experiment = spec(objectives=[{"latency": {"max": "300ms"}, "abortOnFail": True}])
    trials = plan_trials(experiment)
    outcomes = recorded(experiment, P99, 3)
    why = skipped_trials(experiment, trials, outcomes)
    outcomes += [TrialOutcome(t, None, skipped=why[t.name]) for t in trials if t.name in why]
    [judged] = verdicts(experiment, outcomes)
    assert (judged.verdict, judged.met + judged.broken, judged.skipped_trials) == (BROKEN, 3, 1)
    assert judged.inconclusive == 0  # a point not run is not one that could not be told
    summary = summarize(outcomes, experiment.tolerance)
    eight = next(p for p in summary.points if p.workers == 8)
    assert (eight.skipped_trials, eight.failed_trials) == (1, 0)


def test_a_schedules_history_entry_keeps_the_runs_verdict() -> None:
    entry = history_entry(finished(GATE))
    assert entry.objectives == BROKEN
    assert entry.objectives_message and entry.objectives_message.startswith("p99: broken at 2")
    spec = {k: v for k, v in GATE["spec"].items() if k != "objectives"}
    assert history_entry(finished({**GATE, "spec": spec})).objectives is None


def test_one_counted_repetition_of_several_asked_for_decides_nothing() -> None:
    # three repetitions asked for; two measured a saturated generator and are left out, as
    # everywhere: the one left is no verdict, however far past the bound
    experiment = spec(repetitions=3, objectives=[{"latency": {"max": "300ms"}}])
    saturated = {"generatorSaturated": True, "saturation": "lag p99 20ms over 10ms", "dropped": 0}
    outcomes = []
    for trial in plan_trials(experiment):
        if trial.workers != 1:
            continue
        arrival = saturated if trial.repetition > 1 else None
        latency = {"p50": 0.5, "p90": 0.5, "p99": 0.9, "max": 0.9}
        outcomes.append(TrialOutcome(trial, result(arrival=arrival, latencySeconds=latency)))
    [judged] = verdicts(experiment, outcomes)
    assert (judged.verdict, judged.inconclusive) == (INCONCLUSIVE, 1)
    assert "1 repetition(s) counted, 2 saturated: too few for an interval" in judged.message


@pytest.mark.parametrize(
    ("phase", "verdict", "code"),
    [
        ("Succeeded", None, 0),  # a status before objectives existed
        ("Succeeded", "True", 0),
        ("Succeeded", "False", 3),
        ("Failed", "False", 3),  # broken, whatever else happened
        ("Succeeded", "Unknown", 4),
        ("Failed", "Unknown", 1),  # a failed trial first: more repetitions would not help
        ("Failed", "True", 1),
    ],
)
def test_exit_statuses_of_run_and_wait(phase: str, verdict: str | None, code: int) -> None:
    conditions = [] if verdict is None else [{"type": "ObjectivesMet", "status": verdict}]
    status = ExperimentStatus.read({"phase": phase, "conditions": conditions})
    assert exit_status(status) == code


def test_several_experiments_exit_with_the_gravest() -> None:
    # 0 < inconclusive < a failed trial < broken
    assert [max(codes, key=GRAVITY.index) for codes in ([0, 4], [4, 1], [1, 3], [0, 0])] == [
        4, 1, 3, 0,
    ]  # fmt: skip


def test_the_table_keeps_fifty_rows_and_whole_counts() -> None:
    experiment = spec(
        workload={"type": "sleep", "tasks": 100, "rtts": ["1ms", "2ms", "3ms"]},
        models=[{"model": "threads", "workers": list(range(1, 33))}],
        objectives=[{"latency": {"max": "150ms"}}],
    )
    outcomes = []
    for t in plan_trials(experiment):  # a third of the points at 200 ms: broken
        latency = {"p50": 0.1, "p90": 0.1, "p99": 0.1 * (t.index % 3), "max": 1.0}
        outcomes.append(TrialOutcome(t, result(latencySeconds=latency)))
    [judged] = verdicts(experiment, outcomes)
    assert (judged.met, judged.broken, len(judged.points)) == (64, 32, 50)
    assert [p.verdict for p in judged.points[:32]] == [BROKEN] * 32  # all the broken ones kept
    # sixteen such tables stay a fifth of a MiB in status
    size = len(json.dumps(judged.document()))
    assert 16 * size < 0.25 * 2**20, size
