"""The trials after the sweep (cxlab.experiments.followups): a rate search's probes
(spec.search.rate) and a capacity plan's verification (spec.capacity.verify), how each runs
(plan.trial_spec), and what the plan says after them (the searched rate; verified or
refuted)."""

from __future__ import annotations

import itertools
from typing import Any

from helpers.followups import checked, entries, experiment, sweep_outcomes
from helpers.pods import NOW
from helpers.results import CONSTANT, result

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.planning import capacity_plan
from cxlab.experiments.followups import after, trials_of
from cxlab.experiments.plan import Trial, plan_trials, runner_command
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.service_run import Copies, CopyView, plan_copies
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ServiceVariantStatus
from cxlab.report.capacity import capacity_section


def test_the_verification_runs_once_the_sweep_has_ended_as_the_plan_says() -> None:
    spec = experiment({"duration": "30s"})
    outcomes = sweep_outcomes(spec)
    assert trials_of(spec, entries(outcomes[:-1])).trials == plan_trials(spec)[:]
    followed = trials_of(spec, entries(outcomes))
    [check] = [t for t in followed.trials if t.verify]
    # The plan: 2 Pods x 6 workers for 60 tasks/s; the trial after the sweep's one
    assert (check.index, check.pods, check.workers, check.rate_per_second, check.verify) == (
        1,
        2,
        6,
        60.0,
        1,
    )
    assert check.name == "001-v1-asyncio-n2-w6-rtt100ms-a60-r1"
    argv = runner_command(spec, check, experiment="verify", pod=1)
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert (flags["--arrival"], flags["--rate"], flags["--on-busy"]) == ("poisson", "30", "queue")
    assert (flags["--duration"], flags["--warmup"], flags["--workers"]) == ("30s", "3s", "6")
    assert "--tasks" not in argv
    # Not asked for: the sweep alone.
    assert trials_of(experiment(), entries(outcomes)).trials == plan_trials(experiment())


def test_a_plan_that_holds_is_verified_and_one_that_falls_short_gets_a_pod_more() -> None:
    spec = experiment({"maxAttempts": 2})
    outcomes = sweep_outcomes(spec)
    [first] = [t for t in trials_of(spec, entries(outcomes)).trials if t.verify]
    held = capacity_plan(spec, [*outcomes, checked(first, p99=0.14)])
    # Held: nothing more runs.
    assert trials_of(spec, entries([*outcomes, checked(first, p99=0.14)])).trials[-1] == first
    assert held is not None and held.basis == "verified" and held.pods == 2
    assert held.verification and held.verification[0].holds
    assert "; verified: 2 Pods x 6 workers at 60 tasks/s measured p99 140ms ≤ 250ms" in held.message
    # Past the objective: refuted, and a second attempt with 3 Pods, each re-sized.
    short = checked(first, p99=0.4, waits=0.2)
    followed = trials_of(spec, entries([*outcomes, short]))
    second = followed.trials[-1]
    assert (second.verify, second.pods, second.index) == (2, 3, 2)
    refuted = capacity_plan(spec, [*outcomes, short])
    assert refuted is not None and refuted.basis == "refuted"
    assert refuted.verification and "p99 400ms > 250ms (waits: mean 200ms" in (
        refuted.verification[0].shortfall or ""
    )
    # The second holds: the plan shown is the one run, 3 Pods.
    final = capacity_plan(spec, [*outcomes, short, checked(second, p99=0.12)])
    assert final is not None and (final.basis, final.pods, final.cores) == ("verified", 3, 3)
    assert "verified after 2 attempts" in final.message
    # A second attempt that cannot run here: refuted, and the plan says why it stopped.
    stopped = capacity_plan(spec, [*outcomes, short], "attempt 2: 3 Pods do not fit")
    assert stopped is not None and stopped.unverified == "attempt 2: 3 Pods do not fit"
    assert stopped.message.endswith("; attempt 2: 3 Pods do not fit")
    # No attempts left after the second falls short: nothing more runs.
    again = checked(second, p99=0.5)
    assert trials_of(spec, entries([*outcomes, short, again])).trials[-1] == second


def test_dropped_arrivals_a_saturated_generator_or_a_failed_trial_refute() -> None:
    spec = experiment({"maxAttempts": 1})
    outcomes = sweep_outcomes(spec)
    [first] = [t for t in trials_of(spec, entries(outcomes)).trials if t.verify]
    for outcome, why in [
        (checked(first, p99=0.12, dropped=4), "4 arrivals dropped"),
        (TrialOutcome(first, None, "OOMKilled"), "the trial failed: OOMKilled"),
    ]:
        plan = capacity_plan(spec, [*outcomes, outcome])
        assert plan is not None and plan.basis == "refuted", why
        assert why in (plan.verification or [])[0].shortfall  # type: ignore[operator]
    saturated = checked(first, p99=0.12)
    assert saturated.result is not None and saturated.result["arrival"] is not None
    saturated.result["arrival"] |= {"generatorSaturated": True, "saturation": "lag p99 40ms"}
    plan = capacity_plan(spec, [*outcomes, saturated])
    assert plan is not None and "could not keep the rate (lag p99 40ms)" in plan.message


def test_a_sizing_of_the_users_is_run_instead_and_the_plan_stands() -> None:
    spec = experiment({"maxAttempts": 1, "pods": 1, "workersPerPod": 5})
    outcomes = sweep_outcomes(spec)
    [check] = [t for t in trials_of(spec, entries(outcomes)).trials if t.verify]
    assert (check.pods, check.workers) == (1, 5)
    plan = capacity_plan(spec, [*outcomes, checked(check, p99=3.0, waits=2.8)])
    assert plan is not None and plan.basis == "extrapolated" and plan.pods == 2
    assert "the sizing spec.capacity.verify gives fell short: 1 Pod x 5 workers" in plan.message


def test_what_cannot_be_verified_says_why() -> None:
    # A backend whose cores do not hold the plan's Pods
    spec = experiment({})
    outcomes = sweep_outcomes(spec)
    followed = trials_of(spec, entries(outcomes), lambda trial: f"{trial.pods} Pods do not fit")
    assert followed.trials == plan_trials(spec) and followed.unverified == "2 Pods do not fit"
    plan = capacity_plan(spec, outcomes, followed.unverified)
    assert plan is not None and plan.unverified == "2 Pods do not fit"
    assert plan.message.endswith("; not verified: 2 Pods do not fit")
    # Arrivals past what a runner issues in the duration
    huge = experiment({"duration": "24h"}, ratePerSecond=1e6)
    measured = result(4, x=1e6, p99=0.1, p50=0.1, cpu_per_task=1e-9, service=CONSTANT)
    sweep = [TrialOutcome(t, measured) for t in plan_trials(huge)]
    assert "more than a runner issues" in (trials_of(huge, entries(sweep)).unverified or "")


def searching(max_probes: int = 4, repeats: int = 1, **verify: Any) -> ExperimentSpec:
    """The experiment above with a rate search (each rate probed once unless `repeats`)."""
    spec = experiment(verify or None)
    document = {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
                "metadata": {"name": "search"}, "spec": {
                    **spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
                    "search": {"rate": {"start": 20, "duration": "5s", "maxProbes": max_probes,
                                        "repeats": repeats}},
                }}  # fmt: skip
    return parse_experiment(document).spec


def probe_result(trial: Trial) -> TrialOutcome:
    """A probe of 100 ms tasks: the objective (250 ms) holds up to 45 tasks/s, not above."""
    rate = trial.rate_per_second or 0.0
    return checked(trial, p99=0.12 if rate <= 45 else 0.9, waits=0.0 if rate <= 45 else 0.5)


def test_a_rate_search_runs_probe_by_probe_then_the_plan_uses_the_rate_it_found() -> None:
    spec = searching(4)
    # A closed burst of 4 workers ran 100 tasks/s: more than the Pod sustains as arrivals.
    burst = result(4, x=100, p99=0.1, p50=0.1, cpu_per_task=50e-6, service=CONSTANT)
    outcomes = [TrialOutcome(t, burst) for t in plan_trials(spec)]
    ran: list[TrialOutcome] = []
    while True:
        trials = trials_of(spec, entries([*outcomes, *ran])).trials
        waiting = [t for t in trials if t.name not in {o.trial.name for o in [*outcomes, *ran]}]
        if not waiting:
            break
        [next_trial] = waiting  # one at a time, each from the ones before
        ran.append(probe_result(next_trial))
    probes = [o.trial for o in ran]
    # 20 held, 40 held, 80 failed, 60 failed: 4 probes, the most allowed; 40 is the rate
    assert [(t.probe, t.rate_per_second, t.pods, t.workers) for t in probes] == [
        (1, 20.0, 1, 4), (2, 40.0, 1, 4), (3, 80.0, 1, 4), (4, 60.0, 1, 4),
    ]  # fmt: skip
    assert probes[0].name == "001-s1-asyncio-w4-rtt100ms-a20-r1"
    plan = capacity_plan(spec, [*outcomes, *ran])
    assert plan is not None
    [model] = plan.models
    assert model.searched_rate_per_second == 40.0 and [p.holds for p in model.search or []] == [
        True, True, False, False,
    ]  # fmt: skip
    # 60 tasks/s from the probe that held 40 per Pod, not the burst's 100: 2 Pods
    assert (model.rate_per_pod, model.pods, model.basis) == (40.0, 2, "extrapolated")
    # and the plan says where each Pod's rate comes from
    assert model.note is not None and "one Pod's rate search held 40 tasks/s" in model.note


def searched_once(spec: ExperimentSpec) -> tuple[list[TrialOutcome], Trial, Trial]:
    """The sweep and a search of one probe recorded: (their outcomes, the probe, the
    verification trial they call for)."""
    outcomes = sweep_outcomes(spec)
    [probe] = [t for t in trials_of(spec, entries(outcomes)).trials if t.probe]
    done = [*outcomes, probe_result(probe)]
    [check] = [t for t in trials_of(spec, entries(done)).trials if t.verify]
    return done, probe, check


def test_the_verification_follows_the_search() -> None:
    _, _, check = searched_once(searching(1, maxAttempts=1))
    assert check.index == 2 and check.rate_per_second == 60.0


def test_the_report_shows_the_probes_the_verification_and_the_fragment() -> None:
    spec = searching(1, maxAttempts=1)
    done, probe, check = searched_once(spec)
    page = capacity_section(capacity_plan(spec, [*done, checked(check, p99=0.4, waits=0.2)]))
    assert "<h2>Capacity plan</h2>" in page and "(refuted)" in page
    assert "Rate search" in page and probe.name in page and "held" in page
    assert "Verification" in page and "p99 400ms &gt; 250ms" in page
    assert "As a Deployment" in page and "replicas: 3" in page  # 60/s from the 20 that held
    assert capacity_section(None) == ""


def test_after_the_sweep_a_verification_is_planned_only_with_the_nodes_it_must_fit_on() -> None:
    """Once the sweep's last trial ends, what follows is planned from the full entries and,
    for a verification, the Nodes (`fits`): without them, after() asks for them (None) rather
    than plan a verification no check of the cluster has passed."""
    spec = experiment({})
    sweep = plan_trials(spec)
    ended = entries(sweep_outcomes(spec))
    ask = {"full": None, "fits": None, "unverified": None}
    assert after(spec, sweep, {}, ended, **ask) is None
    left = after(spec, [*sweep, *sweep], {}, ended, **ask)
    assert left is not None and not left.followed and left.trials == [*sweep, *sweep]
    too_big = after(spec, sweep, {}, ended, full={}, fits=lambda t: "too big", unverified=None)
    assert too_big is not None and too_big.followed and too_big.unverified == "too big"
    assert too_big.trials == sweep
    planned = after(spec, sweep, {}, ended, full={}, fits=lambda t: None, unverified=None)
    assert planned is not None and planned.followed and planned.unverified is None
    assert [t.verify for t in planned.trials] == [0, 1] and planned.entries == ended


def served_search(repetitions: int = 1) -> ExperimentSpec:
    """Two variants of a Deployment, each searched with two rates probed once."""
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "variants"},
        "spec": {
            "service": {"deployment": "api", "variants": {"named": [{"name": "a"}, {"name": "b"}]}},
            "workload": {"type": "http", "target": {"service": {"name": "api", "port": 80}},
                         "arrival": {"ratePerSecond": 20, "duration": "5s"}},
            "models": [{"model": "asyncio", "workers": [64]}], "repetitions": repetitions,
            "search": {"rate": {"start": 20, "duration": "5s", "maxProbes": 2, "repeats": 1,
                                "latency": {"max": "250ms"}}},
        },
    }  # fmt: skip
    return parse_experiment(document).spec


def test_each_service_variant_is_searched_right_after_its_own_trials() -> None:
    spec = served_search()
    done: list[TrialOutcome] = []
    order: list[list[str]] = []  # the trials as planned before each one ran
    while True:
        names = {o.trial.name for o in done}
        trials = trials_of(spec, entries(done)).trials
        order.append([t.name for t in trials])
        waiting = [t for t in trials if t.name not in names]
        if not waiting:
            break
        done.append(checked(waiting[0], p99=0.1))  # the first not run: what both backends run
    ran = [o.trial for o in done]
    assert [t.name for t in ran] == [
        "000-sv1-asyncio-w64-a20-r1",
        "002-sv1-s1-asyncio-w64-a20-r1", "003-sv1-s2-asyncio-w64-a40-r1",
        "001-sv2-asyncio-w64-a20-r1",
        "004-sv2-s1-asyncio-w64-a20-r1", "005-sv2-s2-asyncio-w64-a40-r1",
    ]  # fmt: skip
    # every variant's trials together: its service runs once
    assert [t.service_variant for t in ran] == [1, 1, 1, 2, 2, 2]
    assert [t.service for t in ran if t.probe] == ["a", "a", "b", "b"]
    # every planning keeps the names the one before gave: none is renamed or run twice
    for before, later in itertools.pairwise(order):
        assert set(before) <= set(later)


def test_a_variant_whose_trials_all_failed_is_not_searched() -> None:
    spec = served_search()
    [first, second] = plan_trials(spec)
    broken = TrialOutcome(first, None, "service variant a exited before it was ready")
    trials = trials_of(spec, entries([broken])).trials
    assert trials == [first, second]  # no probe of a: b's trial is next


def test_a_variants_copy_stays_while_its_search_goes_on() -> None:
    """The pass in which variant 1's last trial ends plans its first probe (after()), and the
    copies are planned from those trials: variant 1 still runs, its copy is not deleted."""
    spec = served_search()
    sweep = plan_trials(spec)
    ended = entries([checked(sweep[0], p99=0.1)])
    planned = after(spec, sweep, {}, ended, full={}, fits=None, unverified=None)
    assert planned is not None and planned.followed
    assert [t.name for t in planned.trials] == [
        "000-sv1-asyncio-w64-a20-r1", "002-sv1-s1-asyncio-w64-a20-r1",
        "001-sv2-asyncio-w64-a20-r1",
    ]  # fmt: skip
    copies = Copies({1: CopyView(1, 1)}, {1}, [], endpoints={1: 1})
    ready = ServiceVariantStatus(index=1, name="a", copy_name="cx-variants-v1", phase="Ready",
                                 ready_seconds=2.0)  # fmt: skip
    kept = plan_copies(spec, "variants", planned.trials, {sweep[0].name}, copies, [ready], NOW)
    assert kept.current == 1 and kept.ready and kept.delete == []
    # from the trials before the plan (as the gate once was), variant 1 would have ended
    gone = plan_copies(spec, "variants", sweep, {sweep[0].name}, copies, [ready], NOW)
    assert gone.current == 2 and gone.delete == [1]
    # one of a variant's two trials ending changes no plan: nothing is read or planned
    twice = served_search(repetitions=2)
    sweep = plan_trials(twice)
    rest = after(twice, sweep, {}, entries([checked(sweep[0], p99=0.1)]), full=None, fits=None,
                 unverified=None)  # fmt: skip
    assert rest is not None and not rest.followed and rest.trials == sweep


def test_a_probe_arrives_as_workload_arrival_says_with_its_warmup() -> None:
    """A probe keeps workload.arrival's process and workload.warmup (a verification's
    queueing model keeps Poisson); without them, Poisson and a tenth of its duration."""
    spec = served_search()
    document = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    document["workload"]["arrival"]["process"] = "uniform"
    document["workload"]["warmup"] = "2s"
    uniform = parse_experiment({"apiVersion": "cxlab.dev/v1alpha1",
                                "kind": "ConcurrencyExperiment", "metadata": {"name": "u"},
                                "spec": document}).spec  # fmt: skip
    for probing, process, warmup in ((spec, "poisson", "500ms"), (uniform, "uniform", "2s")):
        [_, probe] = trials_of(probing, entries([checked(plan_trials(probing)[0], 0.1)])).trials[:2]
        assert probe.probe == 1
        argv = runner_command(probing, probe, experiment="u", target_url="http://x/")
        flags = dict(zip(argv[3::2], argv[4::2], strict=False))
        assert (flags["--arrival"], flags["--warmup"], flags["--on-busy"]) == (
            process, warmup, "queue")  # fmt: skip
        assert (flags["--duration"], flags["--max-lag"]) == ("5s", "250ms")  # the objective
