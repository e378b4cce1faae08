"""Measured points → Pods and cores for a target load (status.capacityPlan): per model, how
many Pods of the experiment's size, each with how many workers, carry `spec.capacity.target`,
and the cheapest model that meets its latency objective. Pure: the operator and the local
backend plan alike. docs/capacity-plan.md explains it with a worked example.

One trial is one Pod with k = `spec.resources.cpu` pinned cores and `spec.resources.memory`.

Points: `group_points` under the experiment's pinning, at the plan's RTT (`target.rtt`, else
the largest RTT of the matrix: the slowest backend, the conservative case; workloads without
an RTT have one), with at least one counted Result, no failed task and no dropped arrival in
any of them. Per point, medians over its repetitions (so one outlier does not move the plan),
per Pod (a trial of several Pods shares its rate, tasks and memory among them):

    X   = throughputPerSecond                  tasks/s one Pod sustained
    Q   = latencySeconds[percentile]           the objective's percentile (p50, p90 or p99)
    S   = the time a task holds its worker, as a distribution: the histogram (latencyHistogram;
          an arrival run's serviceHistogram, without its wait) of the repetition whose mean
          is the median
    T   = E[S] = histogram sum / count         the mean, as Little's law needs (not p50)
    c   = (cpuUserSeconds + cpuSystemSeconds) / tasks      CPU seconds per task
    m   = peakRssBytes

A point meets the objective when Q <= max. Its usable rate per Pod keeps the Pod's CPUs at the
target utilisation U, and the Pod no faster than it was measured (so S holds):

    r   = min(X, U * k / c)                    (no CPU cap when c = 0)

Per model (variant): of its points that meet the objective, the one with the largest r (tie:
fewer workers). For the target rate R, Pods and workers are sized for queueing
(cxlab.analysis.queueing: tasks arrive at random at λ = R / pods per Pod):

    pods          = the fewest, from ceil(R / r) up, for which some worker count per Pod keeps
                    P(wait) <= maxWaitProbability and the percentile of wait + service
                    within the objective (sequential has one worker, so only Pods can grow)
    workersPerPod = the fewest such workers
    cores         = pods * k
    memoryBytes   = pods * m                   the peak at the measured workers
    expectedLatencySeconds     the objective's percentile of wait + service, predicted
    expectedOccupancy          λ·T / workersPerPod
    expectedWaitProbability    Erlang C;  expectedMeanWaitSeconds: Allen-Cunneen
    expectedCpuUtilization = λ * c / k

The basis is "measured" for one Pod (it runs at or below a load that was measured) and
"extrapolated" for more: one trial is one Pod, so more Pods assume that Pods add linearly, and
the note says so. A model with no point meeting the objective, or none measured, says why.

The choice: of the models that meet the objective, the fewest cores, then the least memory,
then the spec's order."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import yaml

from cxlab.analysis.labels import workers_label
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.queueing import Queue, Service, smallest_workers
from cxlab.analysis.summary import PointRuns, group_points
from cxlab.experiments.plan import Trial
from cxlab.experiments.spec import CapacityTarget, ExperimentSpec
from cxlab.shape import Maybe, Shape, nullable
from cxlab_contract import runner_contract
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.figures import significant
from cxlab_contract.histogram import count as histogram_count
from cxlab_contract.histogram import quantile
from cxlab_contract.result import Result

# Kubernetes' documented limit of one cluster: a plan past it is no plan (and its byte
# counts would leave the int64 the apiserver stores).
MAX_PODS = 150_000
# The multiplication sign of "12 Pods x 1 CPU", escaped: ruff takes it written out for an x.
TIMES = "\u00d7"
Percentile = Literal["p50", "p90", "p99"]
FRACTION: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
MOST_WORKERS: int = runner_contract().limits["workers"].max
Basis = Literal["measured", "extrapolated", "verified", "refuted"]


class PlanTarget(Shape):
    """The load the plan is for, from spec.capacity.target."""

    rate_per_second: float
    """Tasks per second the whole fleet must sustain."""
    percentile: Literal["p50", "p90", "p99"]
    """The latency percentile of the objective."""
    latency_seconds: float
    """The most that percentile may be, in seconds."""
    cpu_utilization: float
    """The share of each Pod's CPUs the plan may use."""
    max_wait_probability: Maybe[float] = None
    """The most of the tasks that may wait for a worker (absent from plans made before it
    was asked for)."""


class ModelPlan(Shape):
    """One model's plan: the Pods it needs for the target, or why it cannot meet it."""

    variant: str
    """The model as measured, e.g. goroutines (GOMAXPROCS 1)."""
    model: str
    """The concurrency model."""
    meets: bool
    """Whether it can carry the target rate within the latency objective."""
    workers: Maybe[int] = None
    """Workers of the measured point the plan is built on (one Pod, one trial)."""
    workers_per_pod: Maybe[int] = None
    """Workers each Pod should run: the fewest for which, with tasks arriving at random, few
    wait (maxWaitProbability) and the objective holds with the wait in the latency."""
    pods: Maybe[int] = None
    """Pods needed for the target rate."""
    cores_per_pod: Maybe[int] = None
    """Whole CPUs per Pod: spec.resources.cpu, as measured."""
    cores: Maybe[int] = None
    """CPUs of all Pods together."""
    memory_bytes: Maybe[int] = None
    """Memory of all Pods together: each at the peak measured at the point's workers."""
    rate_per_pod: Maybe[float] = None
    """Tasks per second one Pod may carry: its measured throughput, capped so its CPUs stay at
    the target utilisation."""
    holding_time_seconds: Maybe[float] = None
    """T: the mean time a task holds its worker at the point (Little's law's, not p50)."""
    expected_latency_seconds: Maybe[float] = None
    """The objective's percentile of wait plus service at the target, predicted from the
    measured service times."""
    expected_occupancy: Maybe[float] = None
    """The share of the time a Pod's workers are busy at the target (rate per Pod times T over
    workersPerPod)."""
    expected_wait_probability: Maybe[float] = None
    """The share of tasks that find every worker busy (Erlang C)."""
    expected_mean_wait_seconds: Maybe[float] = None
    """The mean wait for a worker over all tasks (Allen-Cunneen's M/G/c approximation)."""
    expected_cpu_utilization: Maybe[float] = None
    """The share of a Pod's CPUs used at ratePerPod (at the target each Pod carries
    rate / pods, at most that)."""
    basis: Maybe[Basis] = None
    """measured: one Pod at or below a measured load; extrapolated: several Pods from
    measurements of one, assuming Pods add linearly; verified or refuted: the plan was run
    (the chosen model's)."""
    note: Maybe[str] = None
    """What the numbers rest on."""
    reason: Maybe[str] = None
    """Why the model cannot meet the objective (meets: false)."""
    searched_rate_per_second: Maybe[float] = None
    """The largest rate one Pod held in its rate search (spec.search.rate): the plan's
    points include its probes."""
    search: Maybe[list[Probe]] = None
    """The rate search's probes, in the order they ran."""


class Probe(Shape):
    """One probe of a rate search: a Pod at a rate, and whether the objective held."""

    trial: str
    """The probe's trial (in status.trials)."""
    rate_per_second: float
    """Tasks per second offered to its Pod."""
    holds: bool
    """The objective met with the wait counted, none dropped or failed, the generator on
    time."""
    latency_seconds: Maybe[float] = None
    """The objective's percentile as measured."""


class Verification(Shape):
    """One run of a plan: its Pods and workers at the target rate, tasks arriving at random,
    and what it measured against the objective."""

    attempt: int
    """1 for the plan as made; each later attempt has one more Pod."""
    trial: str
    """The verification trial (in status.trials)."""
    pods: int
    """Pods run."""
    workers_per_pod: int
    """Workers each Pod ran."""
    rate_per_second: float
    """Tasks per second offered to all Pods together."""
    percentile: Literal["p50", "p90", "p99"]
    """The objective's percentile."""
    objective_seconds: float
    """The objective: the most that percentile may be."""
    holds: bool
    """Whether the plan held: every arrival on time, none dropped or failed, the objective
    met with the wait for a worker counted."""
    achieved_rate_per_second: Maybe[float] = None
    """Arrivals issued per second, all Pods together."""
    latency_seconds: Maybe[float] = None
    """The objective's percentile as measured, from each task's arrival."""
    mean_wait_seconds: Maybe[float] = None
    """The mean wait for a worker."""
    wait_p99_seconds: Maybe[float] = None
    """The p99 of the wait for a worker."""
    dropped: Maybe[int] = None
    """Arrivals dropped (none is, as tasks queue)."""
    generator_saturated: Maybe[bool] = None
    """The runner could not issue the arrivals on time: it measured itself, not the plan."""
    summary: Maybe[str] = None
    """What it measured, in one line."""
    shortfall: Maybe[str] = None
    """What fell short, when the plan did not hold."""


class CapacityPlan(Shape):
    """Pods and cores for spec.capacity.target, per model, and the cheapest model that meets
    the latency objective."""

    target: PlanTarget
    """The target load, as planned for."""
    rtt_seconds: float | None = nullable()
    """The RTT whose measurements the plan uses; null for workloads without one."""
    models: list[ModelPlan]
    """Every model of the spec, in its order."""
    choice: Maybe[str] = None
    """The chosen model's variant: of those that meet the objective, the fewest cores, then
    the least memory. Unset when none meets it."""
    pods: Maybe[int] = None
    """Pods of the choice."""
    cores: Maybe[int] = None
    """CPUs of the choice, all Pods together."""
    memory_bytes: Maybe[int] = None
    """Memory of the choice, all Pods together."""
    basis: Maybe[Basis] = None
    """Whether the choice rests on a measured load of one Pod, is extrapolated to several, or
    was run and held (verified) or fell short (refuted)."""
    display: str
    """The choice in short, e.g. "12 Pods \u00d7 1 CPU, asyncio"."""
    message: str
    """The choice in one line, with what it rests on; or why no model meets the objective."""
    verification: Maybe[list[Verification]] = None
    """The plan run (spec.capacity.verify), attempt by attempt: the last is the plan shown."""
    unverified: Maybe[str] = None
    """Why the plan was not run although spec.capacity.verify asked for it (or, refuted, why
    its next attempt could not run)."""
    manifest: Maybe[str] = None
    """The choice as a Deployment fragment to paste (YAML): replicas, each Pod's CPU and memory
    requests and limits as measured, and its workers as the CONCURRENCY variable."""


@dataclass(frozen=True)
class _Point:
    """One point's medians over its counted repetitions."""

    workers: int  # as run: the spec's 0 resolved to one worker per task
    throughput: float  # X, tasks/s
    latency: float  # Q, at the objective's percentile
    service: Service  # S, its mean T
    cpu_per_task: float  # c, CPU seconds
    memory: int  # m, bytes
    searched: float | None = None  # a rate search's probe: the rate it offered


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def _measured(results: list[Result], percentile: Percentile) -> _Point:
    """Per Pod: a trial of several Pods (a merged Result) has its rate, tasks and memory
    shared by its Pods (workers are per Pod already)."""
    pods = int(results[0].get("pods", 1))
    # The repetition whose mean is the median (the upper one of an even count): merging them
    # all would let one slow repetition's tail into the plan.
    services = sorted((_service(r) for r in results), key=lambda service: service.mean)
    return _Point(
        workers=int(results[0]["workers"]),
        throughput=_median([r["throughputPerSecond"] / pods for r in results]),
        latency=_median([r["latencySeconds"][percentile] for r in results]),
        service=services[len(services) // 2],
        cpu_per_task=_median(
            [(r["cpuUserSeconds"] + r["cpuSystemSeconds"]) / r["tasks"] for r in results]
        ),
        memory=round(_median([r["peakRssBytes"] / pods for r in results])),
    )


def _service(result: Result) -> Service:
    """The time tasks held a worker: an arrival run's service apart from its wait."""
    arrival = result.get("arrival")
    return Service.of_histogram(
        arrival["serviceHistogram"] if arrival else result["latencyHistogram"]
    )


def _whole(result: Result) -> bool:
    """Every task ran and succeeded: none failed, no arrival was dropped."""
    arrival = result.get("arrival")
    return result["tasksFailed"] == 0 and not (arrival and arrival["dropped"])


def _ceil(value: float) -> int:
    # Rounded first: 3 * (1/3) must not become 4 Pods through a float's last digit.
    return math.ceil(round(value, 9))


def _rate_text(rate: float) -> str:
    return f"{rate:,.3f}".rstrip("0").rstrip(".")


def _at_rtt(trial: Trial, rtt: float | None) -> bool:
    if rtt is None or trial.rtt_seconds is None:
        return rtt is None and trial.rtt_seconds is None
    return math.isclose(trial.rtt_seconds, rtt)


def plan_rtt(spec: ExperimentSpec) -> float | None:
    target = spec.capacity.target if spec.capacity else None
    if target and target.rtt:
        return parse_duration(target.rtt)
    rtts = [r for r in spec.workload.rtt_seconds() if r is not None]
    return max(rtts) if rtts else None


def _variants(spec: ExperimentSpec) -> list[tuple[str, str]]:
    """(variant, model) in the spec's order, named as the trials name them."""
    return [
        (Trial(0, entry.model, 0, gomaxprocs, None, 1).variant, entry.model)
        for entry in spec.models
        for gomaxprocs in entry.gomaxprocs_axis()
    ]


class _Planner:
    def __init__(self, spec: ExperimentSpec, target: CapacityTarget) -> None:
        cores = spec.resources.whole_cpus
        assert cores is not None, "the spec refuses a capacity plan for a fraction of a CPU"
        self.cores_per_pod = cores
        self.rate = target.rate_per_second
        self.utilization = target.cpu_utilization
        self.percentile = target.latency.percentile
        self.fraction = FRACTION[self.percentile]
        self.objective = parse_duration(target.latency.max)
        self.max_wait_probability = target.max_wait_probability
        self.objective_text = f"{self.percentile} ≤ {format_duration(self.objective)}"

    def usable_rate(self, point: _Point) -> float:
        """r = min(X, U * k / c): the CPU cap keeps a Pod at the target utilisation."""
        if point.cpu_per_task == 0:
            return point.throughput
        return min(point.throughput, self.utilization * self.cores_per_pod / point.cpu_per_task)

    @staticmethod
    def unmeasured(groups: list[PointRuns], where: str) -> str:
        """Why a model has no point to plan from."""
        if any(g.results for g in groups):
            return f"every point measured{where} had failed tasks or dropped arrivals"
        failed, unpinned = sum(g.failed for g in groups), sum(g.unpinned for g in groups)
        why = []
        if failed:
            why.append(f"{failed} trial(s) failed")
        if unpinned:
            why.append(f"{unpinned} not pinned (left out under pinning: required)")
        return f"no trial{where} has a Result" + (f" ({', '.join(why)})" if why else "")

    def model_plan(
        self, variant: str, model: str, groups: list[PointRuns], where: str, min_pods: int = 1
    ) -> ModelPlan:
        usable = [g for g in groups if g.results and all(_whole(r) for r in g.results)]
        points = [
            # A probe's workers as the spec gives them: 0 is one per arrival, not those it ran.
            replace(
                _measured(g.results, self.percentile),
                searched=g.trial.rate,
                workers=g.trial.workers,
            )
            if g.trial.probe
            else _measured(g.results, self.percentile)
            for g in usable
        ]
        if not points:
            reason = self.unmeasured(groups, where)
            return ModelPlan(variant=variant, model=model, meets=False, reason=reason)
        meeting = [p for p in points if p.latency <= self.objective]
        if not meeting:
            best = min(points, key=lambda p: (p.latency, p.workers))
            reason = (
                f"best {self.percentile} {format_duration(best.latency)} at "
                f"{workers_label(model, best.workers)} > {format_duration(self.objective)}"
            )
            return ModelPlan(variant=variant, model=model, meets=False, reason=reason)
        sized = [(p, self.size(model, p, min_pods)) for p in meeting]
        planned = [(p, pods_queue) for p, pods_queue in sized if pods_queue is not None]
        if not planned:
            best = max(meeting, key=lambda p: (self.usable_rate(p), -p.workers))
            return ModelPlan(
                variant=variant, model=model, meets=False, reason=self.unsized(model, best)
            )
        # The fewest Pods, then workers; of equals, the point measured at the higher rate,
        # then with fewer workers.
        point, (pods, queue) = min(
            planned,
            key=lambda pq: (pq[1][0], pq[1][1].workers, -self.usable_rate(pq[0]), pq[0].workers),
        )
        rate_per_pod = self.usable_rate(point)
        basis, note = self.basis(model, pods, point, rate_per_pod)
        return ModelPlan(
            variant=variant, model=model, meets=True, workers=point.workers,
            workers_per_pod=queue.workers, pods=pods, cores_per_pod=self.cores_per_pod,
            cores=pods * self.cores_per_pod, memory_bytes=pods * point.memory,
            rate_per_pod=round(rate_per_pod, 3),
            holding_time_seconds=significant(point.service.mean),
            expected_latency_seconds=significant(queue.latency),
            expected_occupancy=round(queue.occupancy, 3),
            expected_wait_probability=round(queue.wait_probability, 4),
            expected_mean_wait_seconds=significant(queue.mean_wait),
            expected_cpu_utilization=round(
                self.rate / pods * point.cpu_per_task / self.cores_per_pod, 3
            ),
            basis=basis, note=note,
        )  # fmt: skip

    def size(self, model: str, point: _Point, min_pods: int = 1) -> tuple[int, Queue] | None:
        """The fewest Pods (from ceil(R / r), or min_pods) and, for them, the fewest workers
        per Pod whose queue keeps the wait and the objective; None when no Pod count up to
        MAX_PODS does."""
        rate_per_pod = self.usable_rate(point)
        if rate_per_pod <= 0:  # a throughput rounded to 0: a day-long task
            return None
        most = 1 if model == "sequential" else MOST_WORKERS

        def sized(pods: int) -> Queue | None:
            return smallest_workers(
                self.rate / pods, point.service, self.fraction, self.objective,
                self.max_wait_probability, most,
            )  # fmt: skip

        low = max(_ceil(self.rate / rate_per_pod), min_pods)
        if low > MAX_PODS:
            return None
        if (queue := sized(low)) is not None:
            return low, queue
        if (queue := sized(MAX_PODS)) is None:
            return None
        # More Pods only lighten each one's queue: the fewest that suffice, by bisection.
        high = MAX_PODS
        while high - low > 1:
            middle = (low + high) // 2
            if (found := sized(middle)) is not None:
                high, queue = middle, found
            else:
                low = middle
        return high, queue

    def unsized(self, model: str, point: _Point) -> str:
        """Why no Pod count carries the target with the point's service times."""
        rate_per_pod = self.usable_rate(point)
        if rate_per_pod <= 0 or _ceil(self.rate / rate_per_pod) > MAX_PODS:
            return (
                f"needs more than {MAX_PODS:,} Pods ({_rate_text(rate_per_pod)} tasks/s each), "
                f"the most Kubernetes supports in one cluster"
            )
        return (
            f"no number of workers and Pods up to {MAX_PODS:,} keeps {self.objective_text} "
            f"with the wait for a worker counted and at most "
            f"{self.max_wait_probability:.0%} of tasks waiting (measured "
            f"{self.percentile} {format_duration(point.latency)} at "
            f"{workers_label(model, point.workers)})"
        )

    def basis(self, model: str, pods: int, point: _Point, rate_per_pod: float) -> tuple[Basis, str]:
        basis: Basis
        workers = workers_label(model, point.workers)
        if pods == 1:
            basis = "measured"
            note = f"one Pod at or below the load measured at {workers}"
            if point.searched is not None:
                note = (
                    f"one Pod at or below the {_rate_text(point.searched)} tasks/s its rate "
                    f"search held at {workers}"
                )
        else:
            basis = "extrapolated"
            note = (
                f"{pods} Pods from measurements of one Pod, assuming Pods add linearly "
                f"(one trial is one Pod)"
            )
        if rate_per_pod < point.throughput:
            note += (
                f"; {_rate_text(rate_per_pod)} tasks/s per Pod keeps its CPUs at "
                f"{self.utilization:.0%} (measured {_rate_text(point.throughput)} tasks/s)"
            )
        return basis, note


def capacity_plan(
    spec: ExperimentSpec, outcomes: Sequence[TrialOutcome], unverified: str | None = None
) -> CapacityPlan | None:
    """status.capacityPlan; None when the spec asks for no capacity plan. The sweep's
    outcomes plan; a verification's (trial.verify) say whether the plan held, and the plan
    shown is the last one run. `unverified`: why the plan was not run, when it was asked to
    be."""
    if spec.capacity is None:
        return None
    # the matrix and the rate search plan; calibrations measure the environment
    sweep = [o for o in outcomes if not (o.trial.verify or o.trial.calibrate)]
    checks = sorted((o for o in outcomes if o.trial.verify), key=lambda o: o.trial.verify)
    plan = _plan(spec, sweep)
    if plan.choice is None:
        return plan
    if not checks:
        if unverified:
            plan.message += f"; not verified: {unverified}"
            plan.unverified = unverified
        return plan
    verification = [verification_of(spec, o) for o in checks]
    last = verification[-1]
    tried = f" after {len(checks)} attempts" if len(checks) > 1 else ""
    verify = spec.capacity.verify
    if verify and (verify.pods or verify.workers_per_pod):
        # A sizing of the user's was run, not the plan: the plan stands as made.
        plan.verification = verification
        verdict = (
            f"held{tried}: {last.summary}" if last.holds else f"fell short{tried}: {last.shortfall}"
        )
        plan.message += f"; the sizing spec.capacity.verify gives {verdict}"
        return plan
    # The plan as last run: the first choice with the Pods of the last attempt.
    plan = _plan(spec, sweep, forced=(plan.choice, checks[-1].trial.pods))
    plan.verification = verification
    plan.basis = "verified" if last.holds else "refuted"
    plan.display += f" ({plan.basis})"
    if last.holds:
        plan.message += f"; verified{tried}: {last.summary}"
    else:
        plan.message += f"; refuted{tried}: {last.shortfall}"
        if unverified:  # the next attempt could not run here
            plan.message += f"; {unverified}"
            plan.unverified = unverified
    for model in plan.models:
        if model.variant == plan.choice:
            model.basis = plan.basis
    return plan


def first_choice(spec: ExperimentSpec, sweep: Sequence[TrialOutcome]) -> ModelPlan | None:
    """The plan a verification runs first: the chosen model's, from the sweep alone."""
    plan = _plan(spec, sweep)
    return next((m for m in plan.models if m.variant == plan.choice), None)


def attempt_plan(
    spec: ExperimentSpec, sweep: Sequence[TrialOutcome], attempt: int
) -> ModelPlan | None:
    """The plan the verification's attempt runs: the first choice with attempt - 1 more Pods
    (each re-sized for its share of the rate); None when there is no choice."""
    first = first_choice(spec, sweep)
    if first is None or first.pods is None:
        return None
    plan = _plan(spec, sweep, forced=(first.variant, first.pods + attempt - 1))
    return next((m for m in plan.models if m.variant == plan.choice), None)


def verification_of(spec: ExperimentSpec, outcome: TrialOutcome) -> Verification:
    """Whether a verification trial held the objective at the rate: every arrival issued on
    time (the generator not saturated), none dropped or failed, and the objective's percentile
    of latency, wait included, within it."""
    assert spec.capacity is not None
    target, trial = spec.capacity.target, outcome.trial
    percentile, objective = target.latency.percentile, parse_duration(target.latency.max)
    figures = Verification(
        attempt=trial.verify, trial=trial.name, pods=trial.pods,
        workers_per_pod=trial.workers, rate_per_second=round(trial.rate or 0.0, 3),
        percentile=percentile, objective_seconds=significant(objective), holds=False,
    )  # fmt: skip
    result = outcome.result
    if result is None or outcome.error:
        figures.shortfall = f"the trial failed: {outcome.error or 'no Result'}"
        return figures
    arrival = result.get("arrival")
    latency = result["latencySeconds"][percentile]
    figures.latency_seconds = significant(latency)
    short = []
    if arrival is not None:
        waits = arrival["waitHistogram"]
        figures.achieved_rate_per_second = round(arrival["achievedRatePerSecond"], 3)
        figures.mean_wait_seconds = significant(waits["sum"] / max(1, histogram_count(waits)))
        figures.wait_p99_seconds = significant(quantile(waits, 0.99))
        figures.dropped = arrival["dropped"]
        figures.generator_saturated = arrival["generatorSaturated"]
        if arrival["generatorSaturated"]:
            short.append(
                f"the generator could not keep the rate ({arrival['saturation'] or 'saturated'})"
            )
        if arrival["dropped"]:
            short.append(f"{arrival['dropped']} arrivals dropped")
    if result["tasksFailed"]:
        short.append(f"{result['tasksFailed']} tasks failed")
    if latency > objective:
        short.append(
            f"{percentile} {format_duration(latency)} > {format_duration(objective)}"
            + (
                f" (waits: mean {format_duration(figures.mean_wait_seconds)}, p99 "
                f"{format_duration(figures.wait_p99_seconds or 0.0)})"
                if figures.mean_wait_seconds is not None
                else ""
            )
        )
    figures.holds = not short
    pods = f"{trial.pods} Pod{'s' if trial.pods != 1 else ''} x {trial.workers} workers"
    figures.summary = (
        f"{pods} at {_rate_text(trial.rate or 0.0)} tasks/s measured {percentile} "
        f"{format_duration(latency)} ≤ {format_duration(objective)}"
    )
    if short:
        figures.shortfall = f"{pods} at {_rate_text(trial.rate or 0.0)} tasks/s: " + "; ".join(
            short
        )
    return figures


def _searched_or_all(groups: list[PointRuns]) -> list[PointRuns]:
    """A model's rate search's points when it has any with a Result (the rates it sustained
    as arrivals, not a closed burst's throughput), else all its points."""
    searched = [g for g in groups if g.trial.probe and g.results]
    return searched or groups


def _probe(spec: ExperimentSpec, outcome: TrialOutcome) -> Probe:
    held = verification_of(spec, outcome)
    return Probe(
        trial=outcome.trial.name, rate_per_second=held.rate_per_second, holds=held.holds,
        latency_seconds=held.latency_seconds,
    )  # fmt: skip


def _plan(
    spec: ExperimentSpec, sweep: Sequence[TrialOutcome], forced: tuple[str, int] | None = None
) -> CapacityPlan:
    """The plan from the sweep; `forced`: this variant is the choice, with at least these
    Pods (a verification's later attempt)."""
    assert spec.capacity is not None
    target = spec.capacity.target
    planner = _Planner(spec, target)
    rtt = plan_rtt(spec)
    where = f" at RTT {format_duration(rtt)}" if rtt is not None else ""
    groups = [g for g in group_points(sweep, spec.pinning) if _at_rtt(g.trial, rtt)]
    models = [
        planner.model_plan(
            variant, model, _searched_or_all([g for g in groups if g.trial.variant == variant]),
            where, min_pods=forced[1] if forced and forced[0] == variant else 1,
        )
        for variant, model in _variants(spec)
    ]  # fmt: skip
    for model_plan in models:
        probes = [o for o in sweep if o.trial.probe and o.trial.variant == model_plan.variant]
        if probes:
            found = [_probe(spec, o) for o in sorted(probes, key=lambda o: o.trial.probe)]
            model_plan.search = found
            model_plan.searched_rate_per_second = max(
                (p.rate_per_second for p in found if p.holds), default=None
            )
    plan_target = PlanTarget(
        rate_per_second=round(target.rate_per_second, 3), percentile=target.latency.percentile,
        latency_seconds=significant(planner.objective),
        cpu_utilization=round(target.cpu_utilization, 3),
        max_wait_probability=round(target.max_wait_probability, 4),
    )  # fmt: skip
    meeting = [(index, m) for index, m in enumerate(models) if m.meets]
    if forced:
        meeting = [(index, m) for index, m in meeting if m.variant == forced[0]]
    if not meeting:
        display = f"no model meets {planner.objective_text}"
        reasons = "; ".join(f"{m.variant}: {m.reason}" for m in models)
        message = f"{display} for {_rate_text(planner.rate)} tasks/s{where}: {reasons}"
        return CapacityPlan(
            target=plan_target, rtt_seconds=rtt, models=models, display=display, message=message
        )
    _, choice = min(meeting, key=lambda im: (im[1].cores or 0, im[1].memory_bytes or 0, im[0]))
    pods, cpu, variant = choice.pods or 0, planner.cores_per_pod, choice.variant
    shown = f"{pods} Pod{'s' if pods != 1 else ''} {TIMES} {cpu} CPU"
    workers = choice.workers_per_pod or 0
    rtt_text = f" (RTT {format_duration(rtt)})" if rtt is not None else ""
    message = (
        f"{variant}: {shown} ({workers} worker{'s' if workers != 1 else ''} per Pod) for "
        f"{_rate_text(planner.rate)} tasks/s at {planner.objective_text}{rtt_text}, "
        f"expected {planner.percentile} "
        f"{format_duration(choice.expected_latency_seconds or 0.0)} with "
        f"{choice.expected_wait_probability or 0:.0%} of tasks waiting "
        f"{format_duration(choice.expected_mean_wait_seconds or 0.0)} on average at "
        f"{choice.expected_occupancy or 0:.0%} occupancy; "
        f"{choice.basis}: {choice.note}"
    )
    return CapacityPlan(
        target=plan_target, rtt_seconds=rtt, models=models, choice=variant, pods=pods,
        cores=choice.cores, memory_bytes=choice.memory_bytes, basis=choice.basis,
        display=f"{shown}, {variant}", message=message,
        manifest=_manifest(spec, choice, f"{_rate_text(planner.rate)} tasks/s at "
                           f"{planner.objective_text}"),
    )  # fmt: skip


def _manifest(spec: ExperimentSpec, choice: ModelPlan, target: str) -> str:
    """A Deployment fragment of the choice: the Pod as measured (requests = limits, the trial's
    Guaranteed QoS), so many of them, each with the planned workers."""
    pod_resources = {"cpu": str(spec.resources.cpu), "memory": spec.resources.memory}
    fragment = {
        "spec": {
            "replicas": choice.pods,
            "template": {"spec": {"containers": [{
                "name": "app",
                "resources": {"requests": pod_resources, "limits": dict(pod_resources)},
                "env": [{"name": "CONCURRENCY", "value": str(choice.workers_per_pod)}],
            }]}},
        }
    }  # fmt: skip
    head = (
        f"# cxlab capacity plan: {choice.variant}, {choice.pods} Pod"
        f"{'s' if choice.pods != 1 else ''} for {target}.\n"
        f"# Paste into your Deployment (rename the container); CONCURRENCY is the workers (or\n"
        f"# threads, or connections) each Pod should run: {choice.workers_per_pod}.\n"
    )
    return head + yaml.safe_dump(fragment, sort_keys=False)
