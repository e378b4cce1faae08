"""Every trial of an experiment: the sweep (plan_trials), the calibration trials when the spec
asks for them (plan.calibration_trials), then the trials its outcomes call for — each
model's rate search, probe by probe, then a capacity plan's verification, attempt by attempt.
Pure, and a function of what is recorded: after a crash the same entries give the same
trials, so none runs twice.

Rate search (spec.search.rate), model by model: a probe at `start`; while probes hold, the
next doubles the highest that held, while none has, it halves the lowest that failed; once
one held and one above it failed, it bisects them until they are within `precision`, or
`maxProbes` ran. The model's searched rate is the highest that held.

Verification (spec.capacity.verify): once every sweep trial has ended, the plan's choice runs
as one trial of its Pods, each with its workers, at the target rate (plan.trial_spec); if it
falls short and attempts are left, the next attempt runs the choice with one more Pod."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cxlab.analysis.objectives import skipped_trials
from cxlab.analysis.planning import attempt_plan
from cxlab.analysis.sizing import plan_rtt
from cxlab.analysis.verification import verification_of
from cxlab.experiments.plan import Trial, calibration_trials, plan_trials, trial_spec
from cxlab.experiments.record import outcomes_of
from cxlab.experiments.spec import (
    MAX_PROCESS_WORKERS,
    MAX_RESULTS,
    ExperimentSpec,
    RateSearchSpec,
)
from cxlab.experiments.status import TrialEntry
from cxlab_contract import runner_contract
from cxlab_contract.durations import parse_duration

_LIMITS = runner_contract().limits
# A processes probe's pool when its workers list has only 0 (a fork per arrival is refused).
PROCESS_PROBE_WORKERS = 64
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
) -> Planned | None:
    """The experiment once `ended` is recorded beside `recorded` (status's entries): while
    trials are left, `trials` as they stand; once every one has ended, what their outcomes
    call for next (trials_of), from the full entries (`full`, with their Results). None: they
    are needed and were not read — compact entries whose Results are kept elsewhere (a
    cluster's ConfigMaps), or a verification that must be fitted to Nodes (`fits`)."""
    if len(recorded) + len(ended) < len(trials):
        return Planned(list(trials), [*recorded.values(), *ended], unverified)
    verifying = spec.capacity is not None and spec.capacity.verifying is not None
    if full is None and (verifying or any(e.results_in for e in recorded.values())):
        return None
    entries = [*(recorded if full is None else full).values(), *ended]
    followed = trials_of(spec, entries, fits)
    return Planned(followed.trials, entries, followed.unverified, followed=True)


def trials_of(
    spec: ExperimentSpec, entries: Sequence[TrialEntry], fits: Fits | None = None
) -> Trials:
    """The sweep, and the probes and verification attempts its recorded outcomes call for.
    `entries` must hold their Results (the full entries) once the sweep has ended."""
    sweep = plan_trials(spec)
    verify = spec.capacity.verifying if spec.capacity else None
    searching = spec.search is not None and spec.search.rate is not None
    recorded = {e.name: e for e in entries}
    planning = spec.capacity is not None and bool(verify or searching)
    if any(t.name not in recorded for t in sweep):
        return Trials(sweep, skipped=skipped_trials(spec, sweep, outcomes_of(sweep, entries)))
    if not (planning or spec.calibration):
        return Trials(sweep)
    trials = list(sweep)
    if spec.calibration:  # one at a time, after the matrix and before what follows
        for trial in calibration_trials(len(trials)):
            trials.append(trial)
            if trial.name not in recorded:
                return Trials(trials)
    if spec.capacity is None or not planning:
        return Trials(trials)
    rate = spec.capacity.target.rate_per_second
    if spec.search is not None and spec.search.rate is not None:
        for variant in variants(spec):
            probes = _search(spec, spec.search.rate, variant, len(trials), recorded)
            trials += probes
            if probes and probes[-1].name not in recorded:  # a probe runs: wait for it
                return Trials(trials)
    if verify is None:
        return Trials(trials)
    outcomes = outcomes_of(trials, entries)
    for attempt in range(1, verify.max_attempts + 1):
        plan = attempt_plan(spec, outcomes, attempt)
        if plan is None:  # no model meets the objective: nothing to run
            return Trials(trials)
        gomaxprocs = next(
            v.gomaxprocs for v in variants(spec)
            if Trial(0, v.model, 0, v.gomaxprocs, None, 1).variant == plan.variant
        )  # fmt: skip
        # The sizing asked for, when verify gives one, else the plan's; each attempt a Pod more.
        pods = (verify.pods + attempt - 1) if verify.pods else (plan.pods or 1)
        workers = verify.workers_per_pod or plan.workers_per_pod or 1
        trial = Trial(
            len(trials), plan.model, workers, gomaxprocs, plan_rtt(spec), 1, pods, rate,
            verify=attempt,
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


@dataclass(frozen=True)
class Variant:
    """A model as the search probes it: its GOMAXPROCS, and its workers per probe."""

    model: str
    gomaxprocs: int | None
    workers: int


def variants(spec: ExperimentSpec) -> list[Variant]:
    """Each model of the spec, in its order, with the workers its probes run: one for
    sequential; a worker per arrival (0) where its workers list has it, except processes
    (a fork per arrival); else its largest."""
    found = []
    for entry in spec.models:
        nonzero = [w for w in entry.workers if w > 0]
        if entry.model == "sequential":
            workers = 1
        elif 0 in entry.workers and entry.model != "processes":
            workers = 0
        else:
            workers = max(nonzero, default=PROCESS_PROBE_WORKERS)
        found += [Variant(entry.model, g, workers) for g in entry.gomaxprocs_axis()]
    return found


def _search(
    spec: ExperimentSpec, search: RateSearchSpec, variant: Variant, first: int,
    recorded: dict[str, TrialEntry],
) -> list[Trial]:  # fmt: skip
    """The variant's probes so far: those recorded, and the next one if the search goes on."""
    probes: list[Trial] = []
    held: list[float] = []
    failed: list[float] = []
    rate: float | None = float(search.start)
    while rate is not None and len(probes) < search.max_probes:
        probe = Trial(
            first + len(probes), variant.model, variant.workers, variant.gomaxprocs,
            plan_rtt(spec), 1, 1, rate, probe=len(probes) + 1,
        )  # fmt: skip
        if cannot_probe(spec, probe):
            break
        probes.append(probe)
        entry = recorded.get(probe.name)
        if entry is None:
            break
        [outcome] = outcomes_of([probe], [entry])
        (held if verification_of(spec, outcome).holds else failed).append(rate)
        rate = next_rate(held, failed, search.precision, search.max)
    return probes


def next_rate(
    held: list[float], failed: list[float], precision: float, most: float | None = None
) -> float | None:
    """The next probe's rate, None when the search has found its rate (to 3 figures); it
    doubles up to `most` at the most (search.rate.max), and a rate held there ends it."""
    low = max(held, default=None)
    if most is not None and low is not None and low >= most:
        return None  # it held where it may go at the most
    above = [f for f in failed if low is None or f > low]
    high = min(above, default=None)
    if high is None:
        assert low is not None
        return _figures(low * 2) if most is None else min(_figures(low * 2), float(most))
    if low is None:
        return _figures(high / 2)
    if (high - low) / low <= precision:
        return None
    middle = _figures((low + high) / 2)
    return middle if low < middle < high else None


def _figures(rate: float) -> float:
    return float(f"{rate:.3g}")


def cannot_probe(spec: ExperimentSpec, trial: Trial) -> str | None:
    """Why no runner runs this probe (past a runner's rate or tasks): the search ends."""
    workload = trial_spec(spec, trial).workload
    assert workload.arrival is not None
    arrivals = (trial.rate_per_second or 0.0) * parse_duration(workload.arrival.duration or "0s")
    if (trial.rate_per_second or 0.0) > _LIMITS["rate"].max or arrivals > _LIMITS["tasks"].max:
        return "past what a runner issues"
    if (trial.rate_per_second or 0.0) < 1 / parse_duration(workload.arrival.duration or "1s"):
        return "under one arrival in the probe's duration"
    return None
