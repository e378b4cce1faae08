"""status.capacityPlan, typed: the load planned for, each model's plan (Pods, workers, what
the queueing model expects of them), its rate search's probes, the plan's verification attempt
by attempt, and the choice. Built by cxlab.analysis.planning; docs/capacity-plan.md explains
the method with a worked example."""

from __future__ import annotations

from typing import Literal

from cxlab.shape import Maybe, Shape, nullable

Percentile = Literal["p50", "p90", "p99"]
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
    """One probe of a rate search: its Pods at a rate, and whether the objective held."""

    trial: str
    """The probe's trial (in status.trials)."""
    rate_per_second: float
    """Tasks per second offered, by all its Pods together."""
    holds: bool
    """The objective met with the wait counted, none dropped or failed, the generator on
    time."""
    latency_seconds: Maybe[float] = None
    """The objective's percentile as measured."""
    shortfall: Maybe[str] = None
    """Why it did not hold."""
    generator_saturated: Maybe[bool] = None
    """The generator could not keep the rate (true; absent when it could)."""
    pods: int = 1
    """The generator Pods that offered the rate together."""
    generator_bound: Maybe[str] = None
    """Against a service subject, why the generator, not the service, bounded a probe that
    broke: it does not count, and its rate runs again with more Pods (search.rate.maxPods)."""
    failed: Maybe[str] = None
    """Its trial ended without a Result (why: a Pod never placed, the runner failed): it
    measured nothing, does not count, and its line's search stopped there."""

    @property
    def measured(self) -> bool:
        """It measured the subject: its trial has a Result and its generator did not bind it
        (the probes a search's bounds count)."""
        return self.generator_bound is None and self.failed is None


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
    replicas: Maybe[int] = None
    """Against a service subject, the replicas of the service's copy it ran against (the
    Pods are then the generator's)."""
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
