"""A service plan's verification (followups.trials_of, folded in by cxlab.analysis.service_plan):
a whole experiment driven trial by trial against a simulated gunicorn (helpers.service_world)
whose verifications hold exactly when the exact M/D/c of each replica keeps the objective at
their replicas."""

from __future__ import annotations

import math

from helpers.mdc_exact import fewest_replicas
from helpers.service_world import OBJECTIVE, RATE, SERVICE, plan_of, run, spec_of, world

from cxlab.analysis.outcome import TrialOutcome
from cxlab.experiments.plan import Trial
from cxlab.experiments.service_run import copy_indexes, copy_variants
from cxlab.experiments.spec import ExperimentSpec


def test_the_plan_runs_as_its_own_copy_and_holds_as_the_exact_m_d_c_says() -> None:
    spec = spec_of({"duration": "20s", "fewer": True})
    done, unverified = run(spec, world())
    checks = [o.trial for o in done if o.trial.verify]
    # the plan's 3 replicas of sync-4 (the exact M/D/4 of 150/s over them holds; 2 do not),
    # then one fewer: its copies are the 5th and the 7th, past the 4 variants
    assert [(t.verify, t.service_replicas) for t in checks] == [(1, 3), (4, 2)]
    assert fewest_replicas(RATE, SERVICE, 4, 0.99, OBJECTIVE) == 3
    assert [t.service_variant for t in checks] == [5, 8]
    assert copy_indexes(spec) == list(range(1, 9))
    copy = copy_variants(spec, checks)[5]
    assert (copy.name, copy.replicas, copy.cpu, copy.args) == (
        "sync-4-cpu0.25-r3", 3, 0.25, ("--workers", "4"),
    )  # fmt: skip
    # at 150/s from probes one asyncio Pod offered up to 170/s: one generator Pod
    assert all(t.pods == 1 and t.rate_per_second == RATE for t in checks)
    assert unverified is None
    plan = plan_of(spec, done)
    assert (plan.choice, plan.replicas, plan.basis) == ("sync-4-cpu0.25", 3, "verified")
    assert plan.verification is not None and plan.verification[0].replicas == 3
    assert plan.fewer is not None and not plan.fewer.holds and plan.fewer.replicas == 2
    assert "2 replicas fell short" in plan.message and "the fewest" in plan.message


def test_refuted_the_next_attempt_has_a_replica_more_and_the_plan_shown_is_it() -> None:
    spec = spec_of({"duration": "20s", "fewer": True})
    slower = 1.3  # 69 ms a request under the whole rate: 3 replicas are too few
    needed = fewest_replicas(RATE, SERVICE * slower, 4, 0.99, OBJECTIVE)
    assert needed == 4
    done, _ = run(spec, world(slower))
    checks = [o.trial for o in done if o.trial.verify]
    assert [(t.verify, t.service_replicas) for t in checks] == [(1, 3), (2, 4)]  # none fewer
    plan = plan_of(spec, done)
    assert (plan.replicas, plan.basis) == (4, "verified")
    assert "verified after 2 attempts" in plan.message
    assert plan.deployment_patch is not None and "replicas: 4" in plan.deployment_patch
    assert plan.autoscaler is not None and "minReplicas: 4" in plan.autoscaler
    [four] = [v for v in plan.variants if v.variant == plan.choice]
    assert four.replicas == 4 and four.basis == "verified"


def test_refuted_at_every_attempt_the_plan_says_so_with_the_last() -> None:
    spec = spec_of({"duration": "20s", "maxAttempts": 2})
    done, _ = run(spec, world(2.0))
    plan = plan_of(spec, done)
    assert plan.basis == "refuted" and plan.replicas == 4
    assert plan.verification is not None and len(plan.verification) == 2
    assert "refuted after 2 attempts: 4 replicas, " in plan.message


def test_the_generator_pods_cover_the_rate_at_what_one_offered() -> None:
    # 600/s: no probe offered more than 1.1 x the 2 replicas' 154/s from one Pod, so the
    # verification runs as many Pods as that rate a Pod takes (search.rate.maxPods at most)
    spec = spec_of({"duration": "5s"}, rate=600)
    done, _ = run(spec, world())
    [first, *_] = [o.trial for o in done if o.trial.verify]
    probes = [o for o in done if o.trial.probe and o.trial.model == "asyncio"]
    fastest = max(o.trial.rate_per_second or 0.0 for o in probes)
    assert first.pods == math.ceil(600 / fastest)
    assert first.pods > 1


def test_the_generator_pods_hold_every_request_in_flight_at_the_objective() -> None:
    # 4 workers a Pod: 150/s answered within 200 ms keeps up to 30 in flight (Little's law),
    # 8 Pods' worth, of which search.rate.maxPods (4) at most
    spec = spec_of({"duration": "5s"}, workers=4)
    done, _ = run(spec, world())
    [first, *_] = [o.trial for o in done if o.trial.verify]
    assert (first.workers, first.pods) == (4, 4)


def test_a_verification_its_generator_could_not_keep_neither_refutes_nor_retries() -> None:
    spec = spec_of({"duration": "20s", "fewer": True})
    simulated = world()

    def saturated(spec: ExperimentSpec, trial: Trial) -> TrialOutcome:
        outcome = simulated(spec, trial)
        if trial.verify and outcome.result is not None:
            outcome.result["arrival"] |= {"generatorSaturated": True, "saturation": "lag"}
        return outcome

    done, unverified = run(spec, saturated)
    assert [o.trial.service_replicas for o in done if o.trial.verify] == [3]  # no second
    assert unverified is not None and "measured the generator, not the plan" in unverified
    plan = plan_of(spec, done)
    assert plan.basis == "measured" and plan.replicas == 3
    assert plan.unverified is not None and "not verified" in plan.message
