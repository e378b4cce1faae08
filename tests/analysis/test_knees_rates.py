"""An arrival run's summary (docs/open-loop.md): points per offered rate, saturated trials left
out and counted, the knee in the rate (the objective's, or p99's flat part), the recommendation
and the status line — on hand-made Results whose answer is known by construction."""

from __future__ import annotations

from typing import Any

import pytest

from cxlab.analysis.knees import LatencyObjective
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.recommend import best_line
from cxlab.analysis.summary import summarize
from cxlab.experiments.plan import Trial
from cxlab_contract import histogram


def arrival_result(
    rate: float, p99: float, *, dropped: int = 0, saturated: bool = False, cpu: float = 20.0,
    service: float = 0.05,
) -> dict[str, Any]:  # fmt: skip
    waits = histogram.build([max(0.0, p99 - service)] * 10)
    return {
        "workers": 100, "wallSeconds": 10.0, "cpuUserSeconds": cpu / 10, "cpuSystemSeconds": 0.0,
        "cpuPercent": cpu, "peakRssBytes": 50 * 2**20, "baselineRssBytes": 20 * 2**20,
        "efficiency": None, "throughputPerSecond": rate, "tasksFailed": 0,
        "voluntaryContextSwitches": 10, "involuntaryContextSwitches": 1, "cpus": [1],
        "latencySeconds": {"p50": 0.05, "p90": 0.05, "p99": p99, "max": p99},
        "arrival": {
            "achievedRatePerSecond": rate, "dropped": dropped, "maxQueue": 0,
            "generatorSaturated": saturated,
            "saturation": "lag p99 40 ms over the bound 10 ms" if saturated else None,
            "waitHistogram": waits, "serviceHistogram": histogram.build([service] * 10),
            "maxLagSeconds": 0.001,
        },
    }  # fmt: skip


def at(model: str, rate: float, p99: float, workers: int = 0, **kw: Any) -> TrialOutcome:
    trial = Trial(0, model, workers, None, 0.05, 1, 1, rate)
    return TrialOutcome(trial, arrival_result(rate, p99, **kw))  # type: ignore[arg-type]


def test_the_knee_is_the_largest_rate_on_p99s_flat_part() -> None:
    # flat: within 10 % of a task's own 50 ms, plus 1 ms of lag (56 ms); 2,000/s is the last
    outcomes = [at("asyncio", 500, 0.052), at("asyncio", 1000, 0.055), at("asyncio", 2000, 0.0559),
                at("asyncio", 4000, 0.300)]  # fmt: skip
    summary = summarize(outcomes, 0.10)
    [knee] = summary.knees
    assert knee.rate_per_second == 2000 and not knee.highest_measured
    assert "within 10% of a task's own 50 ms" in knee.criterion
    assert [p.rate_per_second for p in summary.points] == [500, 1000, 2000, 4000]


def test_a_queue_at_the_one_rate_measured_is_no_flat_part() -> None:
    # 50 workers at 2,000/s of 50 ms tasks: p99 30 s, all of it waiting; measured alone
    [knee] = summarize([at("threads", 2000, 30.0, workers=50)], 0.10).knees
    assert knee.rate_per_second is None


def test_a_rate_that_held_past_one_that_did_not_is_no_knee() -> None:
    # every rate up to the knee must hold: a fluke at 4,000 after a miss at 2,000 does not count
    outcomes = [at("asyncio", 1000, 0.052), at("asyncio", 2000, 0.2), at("asyncio", 4000, 0.053)]
    [knee] = summarize(outcomes, 0.10).knees
    assert knee.rate_per_second == 1000


def test_the_objective_decides_where_there_is_one() -> None:
    outcomes = [at("asyncio", 1000, 0.052), at("asyncio", 2000, 0.090), at("asyncio", 4000, 0.2)]
    objective = LatencyObjective("p99", 0.1)
    [knee] = summarize(outcomes, 0.10, objective=objective).knees
    assert knee.rate_per_second == 2000 and knee.criterion == "p99 ≤ 100ms"
    [flat] = summarize(outcomes, 0.10).knees
    assert flat.rate_per_second == 1000


def test_drops_and_saturated_generators_do_not_hold() -> None:
    outcomes = [at("threads", 1000, 0.051, workers=50), at("threads", 2000, 0.051, workers=50,
                dropped=700), at("goroutines", 1000, 0.051), at("goroutines", 2000, 0.051,
                saturated=True)]  # fmt: skip
    summary = summarize(outcomes, 0.10)
    knees = {k.variant: k.rate_per_second for k in summary.knees}
    assert knees == {"threads": 1000, "goroutines": 1000}
    saturated = next(p for p in summary.points if p.saturated_trials)
    assert saturated.repetitions == 0 and saturated.failed_trials == 0
    assert "lag p99" in saturated.saturation


def test_the_recommendation_holds_the_largest_rate_for_the_least_cpu() -> None:
    outcomes = [
        at("asyncio", 1000, 0.052, cpu=30), at("asyncio", 2000, 0.053, cpu=60),
        at("goroutines", 1000, 0.051, cpu=5), at("goroutines", 2000, 0.051, cpu=9),
        at("threads", 1000, 0.052, workers=50), at("threads", 2000, 3.0, workers=50),
    ]  # fmt: skip
    summary = summarize(outcomes, 0.10)
    [pick] = summary.recommendations
    assert pick.variant == "goroutines" and pick.rate_per_second == 2000
    assert "holds 2000/s or more (the highest rate measured)" in pick.text
    assert best_line(pick).startswith("goroutines, one worker per task (2000/s at p99 51 ms")


def test_when_no_configuration_holds_its_lowest_rate_the_recommendation_says_so() -> None:
    summary = summarize([at("asyncio", 1000, 0.05, dropped=3)], 0.10)
    [pick] = summary.recommendations
    assert pick.rate_per_second is None and "no configuration held" in pick.text
    assert best_line(pick) == "no configuration held its lowest rate"


@pytest.mark.parametrize("percentile", ["p50", "p90"])
def test_the_objectives_percentile_is_the_one_compared(percentile: str) -> None:
    # p50 and p90 are 50 ms in every run; p99 breaks 100 ms from 2,000/s on
    outcomes = [at("asyncio", 1000, 0.06), at("asyncio", 2000, 0.2)]
    [knee] = summarize(outcomes, 0.1, objective=LatencyObjective(percentile, 0.1)).knees
    assert knee.rate_per_second == 2000 and knee.highest_measured
