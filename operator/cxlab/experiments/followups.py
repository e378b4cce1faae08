"""Every trial of an experiment: the sweep (plan_trials), the calibration trials when the spec
asks for them (plan.calibration_trials), then the trials its outcomes call for — each
model's rate search, probe by probe (cxlab.experiments.rate_search), then a capacity plan's
verification, attempt by attempt. Pure, and a function of what is recorded: after a crash the
same entries give the same trials, so none runs twice.

Against a service subject the search runs per variant, right after the variant's own sweep
trials and before the next variant's, so that a variant's service (its copy on a cluster)
runs once: the trials are each variant's sweep then its probes. The probes are indexed
after the whole sweep, in the order they run, so every trial keeps its name.

Verification (spec.capacity.verify): once every sweep trial has ended, the plan's choice runs
as one trial of its Pods, each with its workers, at the target rate (plan.trial_spec); if it
falls short and attempts are left, the next attempt runs the choice with one more Pod.
Against a service subject the service's plan is verified: the chosen variant at the planned
replicas as a copy of its own (the copies past the spec's variants, one per attempt), loaded
at the target rate by the client model whose search measured it, with as many generator Pods
as its probes showed the rate needs; refuted, one more replica; held and verify.fewer asked,
one replica fewer."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from cxlab.analysis.objectives import skipped_trials
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.planning import attempt_plan
from cxlab.analysis.rate_search import rate_searches
from cxlab.analysis.service_plan import fewer_attempt, service_plan
from cxlab.analysis.sizing import plan_rtt
from cxlab.analysis.verification import verification_of
from cxlab.experiments.plan import Trial, calibration_trials, plan_trials, trial_spec
from cxlab.experiments.rate_search import grown_pods, probed_models, search_probes
from cxlab.experiments.record import copy_cores, outcomes_of
from cxlab.experiments.spec import MAX_PROCESS_WORKERS, MAX_RESULTS, ExperimentSpec, VerifySpec
from cxlab.experiments.spec.service import MAX_REPLICAS
from cxlab.experiments.status import Phase, ServiceCopyRequest, TrialEntry
from cxlab_contract import runner_contract
from cxlab_contract.durations import parse_duration

_LIMITS = runner_contract().limits
# Why a backend cannot run a trial of this many Pods (None when it can).
Fits = Callable[[Trial], "str | None"]


@dataclass(frozen=True)
class Trials:
    """The experiment's trials as its entries stand, why a verification asked for will not
    run (None when it runs, or was not asked for), and the sweep's trials not yet run that
    abortOnFail skips, with why (cxlab.analysis.objectives)."""

    trials: list[Trial]
    unverified: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Planned:
    """An experiment once a pass's ended trials are recorded: its trials (what status counts
    and the next pass decides on), every ended trial's entry, and why a verification asked
    for does not run. `followed`: the trials were planned from the entries' outcomes (every
    trial had ended: trials_of), and the entries are full (their Results)."""

    trials: list[Trial]
    entries: list[TrialEntry]
    unverified: str | None = None
    followed: bool = False


def after(
    spec: ExperimentSpec,
    trials: Sequence[Trial],
    recorded: Mapping[str, TrialEntry],
    ended: Sequence[TrialEntry],
    *,
    full: Mapping[str, TrialEntry] | None,
    fits: Fits | None,
    unverified: str | None,
    copy: ServiceCopyRequest | None = None,
) -> Planned | None:
    """The experiment once `ended` is recorded beside `recorded` (status's entries): while
    trials are left, `trials` as they stand; once every one has ended, what their outcomes
    call for next (trials_of), from the full entries (`full`, with their Results). None: they
    are needed and were not read — compact entries whose Results are kept elsewhere (a
    cluster's ConfigMaps), or a verification that must be fitted to Nodes (`fits`)."""
    done = {*recorded, *(e.name for e in ended)}
    if not replans(spec, trials, {e.name for e in ended}, done):
        return Planned(list(trials), [*recorded.values(), *ended], unverified)
    verifying = spec.capacity is not None and spec.capacity.verifying is not None
    if full is None and (verifying or any(e.results_in for e in recorded.values())):
        return None
    entries = [*(recorded if full is None else full).values(), *ended]
    followed = trials_of(spec, entries, fits, copy)
    return Planned(followed.trials, entries, followed.unverified, followed=True)


def trials_of(
    spec: ExperimentSpec, entries: Sequence[TrialEntry], fits: Fits | None = None,
    copy: ServiceCopyRequest | None = None,
) -> Trials:  # fmt: skip
    """The sweep, and the probes and verification attempts its recorded outcomes call for.
    `entries` must hold their Results (the full entries) once the sweep has ended.
    copy: what a copy of the user's Deployment requests (status.serviceCopy, on a cluster),
    whose CPU the service's plan reads."""
    sweep = plan_trials(spec)
    verify = spec.capacity.verifying if spec.capacity else None
    recorded = {e.name: e for e in entries}
    if per_variant_search(spec):
        trials, ended = _searched_per_variant(spec, sweep, recorded)
    else:
        trials, ended = list(sweep), all(t.name in recorded for t in sweep)
    if not ended:
        return Trials(trials, skipped=skipped_trials(spec, sweep, outcomes_of(sweep, entries)))
    if not (searching(spec) or verify or spec.calibration):
        return Trials(trials)
    if spec.calibration:  # one at a time, after the matrix and before what follows
        for trial in calibration_trials(len(trials)):
            trials.append(trial)
            if trial.name not in recorded:
                return Trials(trials)
    if searching(spec) and not per_variant_search(spec):
        for model in probed_models(spec):
            probes = search_probes(spec, model, None, len(trials), recorded)
            trials += probes
            if probes and probes[-1].name not in recorded:  # a probe runs: wait for it
                return Trials(trials)
    if verify is None or spec.capacity is None:
        return Trials(trials)
    if spec.service is not None:
        return _service_verified(spec, verify, trials, entries, recorded, fits, copy)
    return _verified(spec, verify, trials, entries, recorded, fits)


def searching(spec: ExperimentSpec) -> bool:
    return spec.search is not None and spec.search.rate is not None


def per_variant_search(spec: ExperimentSpec) -> bool:
    """Whether the rate search runs per service variant, beside its sweep trials."""
    return spec.service is not None and searching(spec)


def _searched_per_variant(
    spec: ExperimentSpec, sweep: list[Trial], recorded: Mapping[str, TrialEntry]
) -> tuple[list[Trial], bool]:
    """Each service variant's sweep trials and then its probes, and whether all have ended.
    A variant none of whose sweep trials succeeded (its service never answered) is not
    searched."""
    assert spec.service is not None
    trials: list[Trial] = []
    ended, index = True, len(sweep)
    for variant in spec.service.variant_list():
        own = [t for t in sweep if t.service_variant == variant.index]
        trials += own
        if not ended:
            continue
        entries = [recorded.get(t.name) for t in own]
        if None in entries:
            ended = False
            continue
        if not any(e and e.phase == Phase.SUCCEEDED for e in entries):
            continue
        for model in probed_models(spec):
            probes = search_probes(spec, model, variant, index, recorded)
            trials += probes
            index += len(probes)
            if probes and probes[-1].name not in recorded:
                ended = False
                break
    return trials, ended


def replans(spec: ExperimentSpec, trials: Sequence[Trial], ended: Collection[str],
            done: Collection[str]) -> bool:  # fmt: skip
    """Whether the trials may change once `ended` (now part of `done`) has ended: every
    trial has ended, or, searching per service variant, those just ended were the last of
    their variant's (its next probe, or the next variant's search, follows)."""
    if len(done) >= len(trials):
        return True
    if not per_variant_search(spec):
        return False
    variants = {t.service_variant for t in trials if t.name in ended}
    return any(all(t.name in done for t in trials if t.service_variant == v) for v in variants)


def outcomes_matter(spec: ExperimentSpec, recorded: Collection[str]) -> bool:
    """Whether the trials as recorded depend on their outcomes (they must be read to plan
    them): the sweep has ended, or, searching per service variant, its first variant's
    sweep trials have."""
    sweep = plan_trials(spec)
    if per_variant_search(spec):
        first = sweep[0].service_variant
        return all(t.name in recorded for t in sweep if t.service_variant == first)
    return all(t.name in recorded for t in sweep)


def _verified(
    spec: ExperimentSpec, verify: VerifySpec, trials: list[Trial],
    entries: Sequence[TrialEntry], recorded: Mapping[str, TrialEntry], fits: Fits | None,
) -> Trials:  # fmt: skip
    """The trials with the verification attempts the plan's outcomes call for."""
    assert spec.capacity is not None
    rate = spec.capacity.target.rate_per_second
    outcomes = outcomes_of(trials, entries)
    for attempt in range(1, verify.max_attempts + 1):
        plan = attempt_plan(spec, outcomes, attempt)
        if plan is None:  # no model meets the objective: nothing to run
            return Trials(trials)
        gomaxprocs = next(
            v.gomaxprocs for v in probed_models(spec)
            if Trial(0, v.model, 0, v.gomaxprocs, None, 1).variant == plan.variant
        )  # fmt: skip
        # The sizing asked for, when verify gives one, else the plan's; each attempt a Pod more.
        pods = (verify.pods + attempt - 1) if verify.pods else (plan.pods or 1)
        workers = verify.workers_per_pod or plan.workers_per_pod or 1
        trial = Trial(
            len(trials), plan.model, workers, gomaxprocs, plan_rtt(spec), 1, pods, rate,
            verify=attempt,
        )  # fmt: skip
        ran = _attempted(trials, recorded, trial, attempt, cannot_verify(spec, trial) or
                         (fits(trial) if fits else None))  # fmt: skip
        if isinstance(ran, Trials):
            return ran
        if verification_of(spec, ran).holds:
            return Trials(trials)
    return Trials(trials)


def _attempted(
    trials: list[Trial], recorded: Mapping[str, TrialEntry], trial: Trial, attempt: int,
    why: str | None,
) -> Trials | TrialOutcome:  # fmt: skip
    """A verification attempt: why it cannot run, or it runs (is added to `trials`) and has
    not ended (the Trials as they stand), or its outcome."""
    if why:
        return Trials(trials, why if attempt == 1 else f"attempt {attempt}: {why}")
    trials.append(trial)
    entry = recorded.get(trial.name)
    if entry is None:  # running, or about to
        return Trials(trials)
    [outcome] = outcomes_of([trial], [entry])
    return outcome


def _service_verified(
    spec: ExperimentSpec, verify: VerifySpec, trials: list[Trial],
    entries: Sequence[TrialEntry], recorded: Mapping[str, TrialEntry], fits: Fits | None,
    copy: ServiceCopyRequest | None,
) -> Trials:  # fmt: skip
    """The trials with the attempts the service's plan calls for: its copy at the planned
    replicas, one more each time the last fell short, and one fewer after it held
    (verify.fewer)."""
    assert spec.service is not None and spec.capacity is not None
    outcomes = outcomes_of(trials, entries)
    searched = [o for o in outcomes if not o.trial.verify]
    plan = service_plan(spec, searched, copy_cores(spec, copy, searched))
    if plan is None or plan.choice is None or plan.replicas is None:
        return Trials(trials)  # no variant meets the objective: nothing to run
    generator = _generator(spec, searched, plan.choice)
    if generator is None:
        return Trials(trials, f"no probe of {plan.choice} measured the service")
    first = len(spec.service.variant_list())

    def attempt_trial(attempt: int, replicas: int) -> Trial:
        return replace(
            generator, index=len(trials), verify=attempt, service_variant=first + attempt,
            service=plan.choice or "", service_replicas=replicas,
        )  # fmt: skip

    held = None
    for attempt in range(1, verify.max_attempts + 1):
        trial = attempt_trial(attempt, plan.replicas + attempt - 1)
        ran = _attempted(trials, recorded, trial, attempt, _cannot_run(spec, trial, fits))
        if isinstance(ran, Trials):
            return ran
        judged = verification_of(spec, ran)
        if judged.holds:
            held = (attempt, trial.service_replicas)
            break
        if judged.generator_saturated:  # it measured the generator: a replica more cannot help
            return Trials(trials, generator_bound(trial))
    if held is None or not verify.fewer or held[0] > 1 or held[1] <= 1:
        return Trials(trials)  # a refuted attempt already ran one fewer
    trial = attempt_trial(fewer_attempt(spec), held[1] - 1)
    if _cannot_run(spec, trial, fits) is None:
        trials.append(trial)
    return Trials(trials)


def generator_bound(trial: Trial) -> str:
    """Why a service plan's verification that its generator could not keep says nothing of
    the plan."""
    return (
        f"its generator, {trial.pods} Pod(s) of {trial.model}, could not keep "
        f"{trial.rate_per_second:g} tasks/s (search.rate.maxPods bounds them): it measured "
        f"the generator, not the plan"
    )


def _cannot_run(spec: ExperimentSpec, trial: Trial, fits: Fits | None) -> str | None:
    if trial.service_replicas > MAX_REPLICAS:
        return (
            f"the plan's {trial.service_replicas} replicas are more than a copy runs "
            f"({MAX_REPLICAS})"
        )
    return cannot_verify(spec, trial) or (fits(trial) if fits else None)


def _generator(spec: ExperimentSpec, outcomes: Sequence[TrialOutcome], choice: str) -> Trial | None:
    """The load of a service plan's verification: the client model whose search of the
    chosen variant measured the most, at the target rate, from as many Pods as the fastest
    a Pod of that model offered in a probe the generator did not bound needs, and as hold
    the requests in flight at the objective (rate x objective) in their workers
    (search.rate.maxPods at most); None when no probe of the variant measured it."""
    assert spec.capacity is not None
    rate = spec.capacity.target.rate_per_second
    by_line = {o.trial.variant: o.trial for o in outcomes if o.trial.probe}
    best: tuple[float, Trial] | None = None
    offered: dict[tuple[str, int | None, int], float] = {}
    variants = {v.index: v for v in spec.service.variant_list()} if spec.service else {}
    for search in rate_searches(spec, outcomes):
        probe = by_line.get(search.variant)
        if probe is None:
            continue
        key = (probe.model, probe.gomaxprocs, probe.workers)
        for found in search.probes:
            if found.measured:
                each = found.rate_per_second / max(1, found.pods)
                offered[key] = max(offered.get(key, 0.0), each)
        variant = variants.get(probe.service_variant)
        if variant is None or variant.base != choice or search.rate_per_second is None:
            continue
        if best is None or search.rate_per_second > best[0]:
            best = (search.rate_per_second, probe)
    if best is None:
        return None
    probe = best[1]
    each = offered.get((probe.model, probe.gomaxprocs, probe.workers)) or rate
    pods = max(1, math.ceil(rate / each * (1 - 1e-9)))
    if probe.workers:  # and workers for every request in flight at the objective (Little)
        objective = parse_duration(spec.capacity.target.latency.max)
        pods = max(pods, math.ceil(rate * objective / probe.workers * (1 - 1e-9)))
    pods = min(pods, grown_pods(spec))
    return Trial(
        0, probe.model, probe.workers, probe.gomaxprocs, probe.rtt_seconds, 1, pods, rate,
    )  # fmt: skip


def cannot_verify(spec: ExperimentSpec, trial: Trial) -> str | None:
    """Why no runner can run this verification, whatever the backend."""
    if trial.model == "locust":
        return "Locust's users are closed loops: they cannot run at a rate"
    if trial.pods > _LIMITS["pods"].max:
        return f"the plan's {trial.pods} Pods are more than one trial runs ({_LIMITS['pods'].max})"
    workload = trial_spec(spec, trial).workload
    assert workload.arrival is not None
    per_pod = (trial.rate_per_second or 0.0) / trial.pods
    arrivals = per_pod * parse_duration(workload.arrival.duration or "0s")
    if per_pod > _LIMITS["rate"].max or arrivals > _LIMITS["tasks"].max:
        return (
            f"{per_pod:,.0f} arrivals/s per Pod for {workload.arrival.duration} is more than a "
            f"runner issues (rate {_LIMITS['rate'].max:,}/s, {_LIMITS['tasks'].max:,} tasks): "
            f"shorten spec.capacity.verify.duration"
        )
    if trial.model == "processes" and trial.workers > MAX_PROCESS_WORKERS:
        return (
            f"{trial.workers} processes per Pod is past what a trial forks ({MAX_PROCESS_WORKERS})"
        )
    if spec.result_count() + trial.pods + (trial.pods > 1) > MAX_RESULTS:
        return f"the experiment would keep more than {MAX_RESULTS} Results"
    return None
