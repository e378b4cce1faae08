"""Every trial of an experiment: the sweep (plan_trials), then the trials its outcomes call
for — a capacity plan's verification, attempt by attempt. Pure, and a function of what is
recorded: after a crash the same entries give the same trials, so none runs twice.

Verification (spec.capacity.verify): once every sweep trial has ended, the plan's choice runs
as one trial of its Pods, each with its workers, at the target rate (plan.trial_spec); if it
falls short and attempts are left, the next attempt runs the choice with one more Pod."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cxlab.experiments.capacity_plan import attempt_plan, plan_rtt, verification_of
from cxlab.experiments.plan import Trial, plan_trials, trial_spec
from cxlab.experiments.record import outcomes_of
from cxlab.experiments.spec import MAX_PROCESS_WORKERS, MAX_RESULTS, ExperimentSpec
from cxlab.experiments.status import TrialEntry
from cxlab_contract import runner_contract
from cxlab_contract.durations import parse_duration

_LIMITS = runner_contract().limits
# Why a backend cannot run a trial of this many Pods (None when it can).
Fits = Callable[[Trial], "str | None"]


@dataclass(frozen=True)
class Trials:
    """The experiment's trials as its entries stand, and why a verification asked for will
    not run (None when it runs, or was not asked for)."""

    trials: list[Trial]
    unverified: str | None = None

    @property
    def verifying(self) -> bool:
        """Whether a verification trial is among them."""
        return any(t.verify for t in self.trials)


def trials_of(
    spec: ExperimentSpec, entries: Sequence[TrialEntry], fits: Fits | None = None
) -> Trials:
    """The sweep, and the verification attempts its recorded outcomes call for. `entries`
    must hold their Results (the full entries) once the sweep has ended."""
    sweep = plan_trials(spec)
    verify = spec.capacity.verifying if spec.capacity else None
    recorded = {e.name: e for e in entries}
    if spec.capacity is None or verify is None or any(t.name not in recorded for t in sweep):
        return Trials(sweep)
    rate = spec.capacity.target.rate_per_second
    outcomes = outcomes_of(sweep, entries)
    trials = list(sweep)
    for attempt in range(1, verify.max_attempts + 1):
        plan = attempt_plan(spec, outcomes, attempt)
        if plan is None:  # no model meets the objective: nothing to run
            return Trials(trials)
        gomaxprocs = next(
            (g for entry in spec.models if entry.model == plan.model
             for g in entry.gomaxprocs_axis()
             if Trial(0, plan.model, 0, g, None, 1).variant == plan.variant),
            None,
        )  # fmt: skip
        # The sizing asked for, when verify gives one, else the plan's; each attempt a Pod more.
        pods = (verify.pods + attempt - 1) if verify.pods else (plan.pods or 1)
        workers = verify.workers_per_pod or plan.workers_per_pod or 1
        trial = Trial(
            len(sweep) + attempt - 1, plan.model, workers, gomaxprocs, plan_rtt(spec), 1, pods,
            rate, verify=attempt,
        )  # fmt: skip
        why = cannot_verify(spec, trial) or (fits(trial) if fits else None)
        if why:
            return Trials(trials, why if attempt == 1 else f"attempt {attempt}: {why}")
        trials.append(trial)
        entry = recorded.get(trial.name)
        if entry is None:  # running, or about to
            return Trials(trials)
        [outcome] = outcomes_of([trial], [entry])
        if verification_of(spec, outcome).holds:
            return Trials(trials)
    return Trials(trials)


def cannot_verify(spec: ExperimentSpec, trial: Trial) -> str | None:
    """Why no runner can run this verification, whatever the backend."""
    if trial.model == "locust":
        return "Locust's users are closed loops: they cannot run at a rate"
    if trial.pods > _LIMITS["pods"].max:
        return f"the plan's {trial.pods} Pods are more than one trial runs ({_LIMITS['pods'].max})"
    workload = trial_spec(spec, trial).workload
    assert workload.arrival is not None
    per_pod = (trial.rate or 0.0) / trial.pods
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
