"""The ConcurrencyExperiment resource as typed models: the one reading of the YAML a user
`kubectl apply`s, shared by the CLI (local backend) and the operator.

Every rule lives here (its fields' own bounds in cxlab.experiments.fields), with a message
that names the field and says what to change; the CRD schema repeats what the apiserver can
check and a test keeps the two in agreement.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from cxlab.experiments.fields import (
    LIMITS,
    MAX_LIST_ITEMS,
    MAX_TARGET_RATE,
    Affinity,
    ArrivalProcess,
    ArrivalRate,
    Connection,
    Count,
    Cpu,
    DroppedCount,
    Gomaxprocs,
    Hold,
    Image,
    Iterations,
    LabelKey,
    LabelValue,
    LatencyObjective,
    MaxLag,
    Model,
    ObjectiveMemory,
    ObjectiveName,
    ObjectiveTime,
    OnBusy,
    Pods,
    Priority,
    Quantity,
    QueueName,
    QueueTimeout,
    ResponseBytes,
    Rtt,
    RunDuration,
    Seed,
    Share,
    StageDuration,
    Strict,
    Tasks,
    Throughput,
    Tolerations,
    TrialTimeout,
    TtlSeconds,
    Warmup,
    Workers,
    WorkloadType,
    no_repeats,
    unique,
)
from cxlab.experiments.target import TargetSpec
from cxlab_contract.arrivals import RateProfile, Stage
from cxlab_contract.durations import parse_duration

API_VERSION = "cxlab.dev/v1alpha1"
KIND = "ConcurrencyExperiment"

GO_MODELS = ("goroutines",)

# A cluster experiment's status keeps a compact entry per trial (about 0.5 KiB) and its
# Results go to ConfigMaps of 100 trials each (cxlab.experiments.results_store): at 1,000
# trials the status is about 0.5 MiB, a third of etcd's limit on one object. A trial of N > 1
# Pods keeps N + 1 Results (each Pod's and the merged one): MAX_RESULTS counts them, so that
# a chunk of 100 trials stays under the 1 MiB a ConfigMap holds (about 0.6 KiB gzip'd each).
MAX_TRIALS = 1000
MAX_RESULTS = 2000
# Limits that let the apiserver bound the cost of the CRD's validation rules (and
# fields.MAX_LIST_ITEMS).
MAX_MODELS = 7
DEFAULT_RESPONSE_BYTES = 64  # body size the delay target sends when responseBytes is unset
# One OS process per worker: past this a trial measures fork storms, not the model.
MAX_PROCESS_WORKERS = 512
# Plans a verification tries before it says the plan is refuted: each adds a Pod.
MAX_VERIFY_ATTEMPTS = 5
# Probes of one model's rate search: doubling from 1/s past a million takes 20.
MAX_PROBES = 20
# One OS thread per worker: every thread stack is two memory mappings, and the kernel's
# default vm.max_map_count (65530) runs out near 32,000 threads in one process.
MAX_THREAD_WORKERS = 30_000
# Objectives an experiment may gate on (spec.objectives); bounds the CRD rules' cost too.
MAX_OBJECTIVES = 16


class StageSpec(Strict):
    """One stage of a ramping arrival rate (k6's ramping-arrival-rate)."""

    duration: StageDuration
    """How long the rate takes to ramp from the previous stage's target (the first stage's
    from ratePerSecond) to this one's; 0s jumps."""
    target: ArrivalRate
    """Arrivals per second at the stage's end, for the whole trial."""


class ArrivalSpec(Strict):
    """Open-loop load: tasks arrive at a rate for a duration whether or not earlier ones have
    ended, and each task's latency runs from the moment it was due (workloads/CONTRACT.md,
    Duration runs). A trial of N Pods splits the rate: each Pod gets rate / N."""

    rate_per_second: ArrivalRate | None = None
    """Arrivals per second for the whole trial (with stages: the rate the first stage ramps
    from, default 0). Or ratesPerSecond."""
    rates_per_second: (
        Annotated[
            list[ArrivalRate],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            no_repeats("rate"),
        ]
        | None
    ) = None
    """Several rates: a matrix axis, to find the largest rate the latency holds at. Or
    ratePerSecond."""
    duration: RunDuration | None = None
    """How long tasks arrive. Or stages."""
    stages: (
        Annotated[list[StageSpec], Field(min_length=1, max_length=LIMITS["stages"].max)] | None
    ) = None
    """A rate that ramps, stage by stage; the trial lasts their sum. Or duration."""
    process: ArrivalProcess = "poisson"
    """poisson (random arrivals: exponential gaps, the arrivals of many independent users and
    the queueing models' assumption) or uniform (evenly spaced, as k6's and wrk2's)."""
    on_busy: OnBusy = "queue"
    """A task that arrives while every worker is busy waits for one (queue) or is dropped and
    counted (drop, k6's dropped iterations)."""
    max_lag: MaxLag = "10ms"
    """The generator is saturated (and the trial left out of knees and recommendations) when
    the p99 of how late it issued arrivals is over this."""
    seed: Seed = 1
    """The seed of poisson's gaps; Pod p of repetition r draws from seed + 65 (r - 1) + p, so
    Pods and repetitions differ and a rerun repeats them."""

    @model_validator(mode="after")
    def _one_of_each(self) -> ArrivalSpec:
        if self.stages is not None:
            if self.duration is not None:
                raise ValueError("arrival: stages last their sum; leave duration out beside them")
            if self.rates_per_second is not None:
                raise ValueError(
                    "arrival: stages set the rate over time; ratesPerSecond cannot sweep it "
                    "(give ratePerSecond, the rate they ramp from, or leave it out)"
                )
            if not 1 <= self.run_seconds() <= parse_duration(LIMITS["duration"].max):
                raise ValueError(
                    f"arrival: the stages last {self.run_seconds():g}s; they must last "
                    f"{LIMITS['duration'].min} to {LIMITS['duration'].max} in all"
                )
            return self
        if (self.rate_per_second is None) == (self.rates_per_second is None):
            raise ValueError("arrival needs exactly one of ratePerSecond or ratesPerSecond")
        if self.duration is None:
            raise ValueError("arrival needs a duration (how long tasks arrive) or stages")
        return self

    def run_seconds(self) -> float:
        if self.stages is not None:
            return sum(parse_duration(s.duration) for s in self.stages)
        return parse_duration(self.duration or "0s")

    def rate_axis(self) -> list[float]:
        """The rates of the matrix: the whole trial's, before it is split across Pods."""
        if self.rates_per_second is not None:
            return [float(r) for r in self.rates_per_second]
        return [float(self.rate_per_second or 0)]

    def profile(self, rate: float, pods: int = 1) -> RateProfile:
        """One Pod's share of a trial at `rate`: every rate divided by the Pods."""
        stages = tuple(
            Stage(parse_duration(s.duration), s.target / pods) for s in self.stages or ()
        )
        return RateProfile(rate / pods, stages, parse_duration(self.duration or "0s"))


class WorkloadSpec(Strict):
    """What each task does, and how many tasks a trial runs (or for how long they run, or
    at what rate they arrive)."""

    type: WorkloadType
    """sleep (one RTT per task), http (one GET to the delay target), cpu (a count loop),
    hold (tasks that stay alive: memory per task)."""
    tasks: Tasks | None = None
    """Tasks in every trial: a closed burst, done when the last one ends. Or duration, or
    arrival."""
    duration: RunDuration | None = None
    """A closed loop for a time (k6's constant-VUs): the workers start their next task as
    soon as the last one ends, for this long; the tasks run are then an output. Or tasks, or
    arrival."""
    arrival: ArrivalSpec | None = None
    """Open-loop load at a rate (k6's arrival-rate executors). Or tasks, or duration."""
    warmup: Warmup | None = None
    """Duration runs: the tasks due (a closed loop's: started) in the first this-long are
    left out of the latency figures and the throughput, and reported apart."""
    rtt: Rtt | None = None
    """Round-trip time of each task (sleep, http), e.g. 100ms. Or rtts."""
    rtts: Annotated[list[Rtt], Field(min_length=1, max_length=MAX_LIST_ITEMS)] | None = None
    """Several round-trip times: a matrix axis (sleep, http). Or rtt."""
    iterations: Iterations | None = None
    """Count-loop iterations per task (cpu only)."""
    hold: Hold | None = None
    """How long every task stays alive (hold only)."""
    connection: Connection | None = None
    """http only: a new connection per task (fresh, the default) or one per worker (reuse)."""
    response_bytes: ResponseBytes | None = None
    """http only: bytes in each response body (default 64)."""
    target: TargetSpec | None = None
    """http only: call your own service (an in-cluster Service or a URL) instead of cxlab's
    delay target. Its latency is then measured, not simulated: no rtt or rtts."""

    @model_validator(mode="after")
    def _parameters_match_type(self) -> WorkloadSpec:
        shapes = [self.tasks is not None, self.duration is not None, self.arrival is not None]
        if sum(shapes) != 1:
            raise ValueError(
                "workload needs exactly one of tasks (a closed burst), duration (a closed loop "
                "for a time) or arrival (tasks arriving at a rate)"
            )
        if self.warmup is not None:
            run = self.run_seconds()
            if run is None:
                raise ValueError("warmup applies to duration runs: workload.duration or arrival")
            if parse_duration(self.warmup) >= run:
                raise ValueError(f"warmup {self.warmup} must be shorter than the run ({run:g}s)")
        if self.target is not None:
            if self.type != "http":
                raise ValueError(f"target applies to the http workload only, not to {self.type}")
            if self.rtt is not None or self.rtts is not None:
                raise ValueError(
                    "target: your service's latency is measured, not simulated: leave rtt and "
                    "rtts out"
                )
            if self.response_bytes is not None:
                raise ValueError("target: responseBytes is the delay target's: leave it out")
        timed = self.type == "sleep" or (self.type == "http" and self.target is None)
        if timed and (self.rtt is None) == (self.rtts is None):
            raise ValueError(f"workload {self.type} needs exactly one of rtt or rtts")
        if self.type not in ("sleep", "http") and (self.rtt is not None or self.rtts is not None):
            raise ValueError(f"rtt/rtts apply to sleep and http only, not to {self.type}")
        if (self.type == "cpu") != (self.iterations is not None):
            raise ValueError("iterations is required for cpu and applies to cpu only")
        if (self.type == "hold") != (self.hold is not None):
            raise ValueError("hold is required for the hold workload and applies to it only")
        if self.type != "http" and (self.connection or self.response_bytes is not None):
            raise ValueError("connection and responseBytes apply to the http workload only")
        if self.rtts:
            seconds = [parse_duration(r) for r in self.rtts]
            for rtt in self.rtts:
                if seconds.count(parse_duration(rtt)) > 1:
                    raise ValueError(f"rtts lists {rtt} twice (or the same time written twice)")
        return self

    @property
    def delay_target(self) -> bool:
        """Whether the trials call cxlab's delay target (an http workload without a target)."""
        return self.type == "http" and self.target is None

    def run_seconds(self) -> float | None:
        """How long a duration run lasts; None for a counted one."""
        if self.arrival is not None:
            return self.arrival.run_seconds()
        return parse_duration(self.duration) if self.duration is not None else None

    def rate_axis(self) -> list[float | None]:
        """The arrival-rate axis of the matrix: one None without arrivals."""
        return list(self.arrival.rate_axis()) if self.arrival is not None else [None]

    def rtt_seconds(self) -> list[float | None]:
        """The RTT axis of the matrix: one None for workloads without an RTT."""
        if self.rtts is not None:
            return [parse_duration(r) for r in self.rtts]
        return [parse_duration(self.rtt) if self.rtt is not None else None]


class ModelSpec(Strict):
    """One concurrency model and the worker counts (and GOMAXPROCS) to try it with."""

    model: Model
    """The concurrency model."""
    workers: Annotated[
        list[Workers],
        Field(min_length=1, max_length=MAX_LIST_ITEMS),
        no_repeats("worker count"),
    ] = [0]  # noqa: RUF012 - pydantic copies a default: no list is shared
    """Worker counts to try; 0 = one worker per task."""
    gomaxprocs: (
        Annotated[
            list[Gomaxprocs],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            no_repeats("gomaxprocs value"),
        ]
        | None
    ) = None
    """GOMAXPROCS values to try (goroutines only); 0 = the Go default."""
    pods: Annotated[
        list[Pods], Field(min_length=1, max_length=MAX_LIST_ITEMS), no_repeats("Pod count")
    ] = [1]  # noqa: RUF012 - as above
    """Runner Pods per trial to try (processes locally). A trial of N Pods splits its tasks
    across them (each gets tasks / N, the first tasks mod N one more), starts them together
    at a barrier and merges their Results; workers are per Pod, so it runs N x workers."""
    pool: Literal["onDemand", "prestarted"] | None = None
    """How a pool starts its workers (threads and processes only). threads: onDemand, the
    default, starts a thread when a task is submitted and no thread is idle, as
    concurrent.futures.ThreadPoolExecutor does, so far fewer than W may start; prestarted
    starts all W first (with one worker per task: a thread per task). processes: prestarted
    only, as ProcessPoolExecutor does with Linux's fork."""

    @model_validator(mode="after")
    def _rules(self) -> ModelSpec:
        if self.model == "sequential" and self.workers not in ([0], [1]):
            raise ValueError("sequential runs one task at a time: leave workers out")
        if self.gomaxprocs is not None and self.model != "goroutines":
            raise ValueError(
                f"gomaxprocs applies to goroutines only, not to the Python model {self.model}"
            )
        if self.pool is not None and self.model not in ("threads", "processes"):
            raise ValueError(f"pool applies to threads and processes only, not to {self.model}")
        if self.model == "processes" and self.pool == "onDemand":
            raise ValueError(
                "processes run a prestarted pool only (as ProcessPoolExecutor with fork): "
                "set pool: prestarted or leave it out"
            )
        return self

    def gomaxprocs_axis(self) -> list[int | None]:
        if self.model != "goroutines":
            return [None]
        return list(self.gomaxprocs) if self.gomaxprocs is not None else [0]


class Resources(Strict):
    """What each trial Pod gets: whole CPUs (pinned) or a fraction of one, and memory."""

    cpu: Cpu = 1
    """CPUs per trial Pod (requests = limits: Guaranteed QoS). Whole CPUs are pinned by the
    static CPU manager; a fraction (0.5) runs in the node's shared pool, unpinned, and needs
    pinning: preferred."""
    memory: Quantity = "512Mi"
    """Memory per trial Pod (requests = limits); locally only reported."""

    @property
    def whole_cpus(self) -> int | None:
        """The CPUs a trial Pod is pinned to; None for a fraction (the shared pool)."""
        return int(self.cpu) if float(self.cpu).is_integer() else None


class Placement(Strict):
    """Where trial Pods may run; passed to the Pod as written, checked with Kubernetes' own
    schemas of a Pod's fields."""

    node_selector: (
        Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_LIST_ITEMS)] | None
    ) = None
    """Node labels a trial Pod requires."""
    tolerations: Tolerations | None = None
    """Tolerations of trial Pods, as in a Pod spec."""
    affinity: Affinity | None = None
    """Affinity of trial Pods, as in a Pod spec."""


class LatencyTarget(Strict):
    """The latency every task must meet, at one of the percentiles the runners report."""

    percentile: Literal["p50", "p90", "p99"] = "p99"
    """The percentile of task latency the objective is about."""
    max: LatencyObjective
    """The most that percentile may be, e.g. 250ms."""


class CapacityTarget(Strict):
    """The load a capacity plan is for."""

    rate_per_second: Annotated[float, Field(strict=True, gt=0, le=MAX_TARGET_RATE)]
    """Tasks per second the whole fleet must sustain."""
    latency: LatencyTarget
    """The latency objective (e.g. p99 at most 250ms)."""
    cpu_utilization: Annotated[float, Field(strict=True, gt=0, le=1)] = 0.7
    """The share of each Pod's CPUs the plan may use: headroom for bursts and noisy
    neighbours."""
    rtt: Rtt | None = None
    """The RTT the plan is for when the workload has several (rtts); unset: the largest."""
    max_wait_probability: Annotated[float, Field(strict=True, gt=0, le=1)] = 0.2
    """The most of the tasks arriving at random that may find every worker of their Pod busy
    and wait for one (Erlang C): the plan adds workers, then Pods, until it holds. 1: no bound
    but the latency objective, which counts the wait too."""


class VerifySpec(Strict):
    """Run the chosen plan to see whether it holds: its Pods, each with its workers, at the
    target rate split among them, tasks arriving at random (Poisson) and queueing for a worker,
    for a duration. Refuted, one more Pod is tried, up to maxAttempts plans in all."""

    enabled: bool = True
    """false: plan without running the plan (a schedule's template verifies unless it says
    so)."""
    duration: RunDuration = "60s"
    """How long tasks arrive at each verification trial."""
    max_attempts: Annotated[int, Field(strict=True, ge=1, le=MAX_VERIFY_ATTEMPTS)] = 3
    """Plans tried in all: the first, then one more Pod each time the last fell short."""
    pods: Annotated[int, Field(strict=True, ge=1, le=LIMITS["pods"].max)] | None = None
    """Run this many Pods first instead of the plan's: to check the sizing you run today."""
    workers_per_pod: Annotated[int, Field(strict=True, ge=1, le=LIMITS["workers"].max)] | None = (
        None
    )
    """Run this many workers per Pod instead of the plan's (in every attempt)."""


class RateSearchSpec(Strict):
    """Search each model's largest arrival rate one Pod sustains: a probe at `start`, then
    double while the objective holds (halve while it does not), then bisect between the
    highest rate that held and the lowest that did not until they are within `precision`.
    Each probe is a trial of one Pod: tasks arrive at random at its rate for `duration`,
    queueing for a worker, and it holds when capacity.target.latency is met with the wait
    counted, none dropped or failed, the generator on time."""

    start: ArrivalRate = 100
    """The first probe's rate, tasks per second for one Pod."""
    duration: RunDuration = "10s"
    """How long tasks arrive at each probe."""
    precision: Annotated[float, Field(strict=True, ge=0.01, le=1)] = 0.1
    """Stop bisecting when the rates that held and failed are within this share of each
    other."""
    max_probes: Annotated[int, Field(strict=True, ge=1, le=MAX_PROBES)] = 8
    """Probes per model at most."""


class SearchSpec(Strict):
    """Searches that add trials after the matrix's, each from the ones before."""

    rate: RateSearchSpec | None = None
    """The largest arrival rate per Pod, per model, at which capacity.target's latency
    objective holds (status.capacityPlan uses it)."""


class Capacity(Strict):
    """Turn the measurements into Pods and cores for a target load (status.capacityPlan)."""

    target: CapacityTarget
    """The load to plan for."""
    verify: VerifySpec | None = None
    """Verify the chosen plan by running it (status.capacityPlan.verification). Unset: an
    experiment does not; an ExperimentSchedule's runs do (verify: {enabled: false} to not)."""

    @property
    def verifying(self) -> VerifySpec | None:
        """The verification to run, if any."""
        return self.verify if self.verify is not None and self.verify.enabled else None


class LatencyBound(Strict):
    """A task latency percentile's most."""

    percentile: Literal["p50", "p90", "p99", "max"] = "p99"
    """The Result's percentile (latencySeconds): from the intended start for arrivals."""
    max: LatencyObjective
    """The most it may be, e.g. 250ms."""


class ShareAtMost(Strict):
    max: Share
    """The largest share allowed, 0 to 1 (0.01: one task in a hundred)."""


class ShareAtLeast(Strict):
    min: Share
    """The smallest share allowed, 0 to 1."""


class ThroughputAtLeast(Strict):
    min: Throughput
    """Tasks completed per second, at least (the Result's throughputPerSecond)."""


class TimeAtMost(Strict):
    max: ObjectiveTime
    """The longest allowed, e.g. 2ms."""


class MemoryAtMost(Strict):
    max: ObjectiveMemory
    """The most allowed, e.g. 256Mi."""


class CountAtMost(Strict):
    max: DroppedCount
    """The most allowed per trial (0: none)."""


# An objective's metric fields, as the spec spells them; each objective sets exactly one.
OBJECTIVE_METRICS = (
    "latency", "failureRatio", "throughput", "efficiency", "cpuPerTask", "peakRss",
    "startSkew", "dropped",
)  # fmt: skip
# Metrics that only grow with load (more workers of a closed run, a higher rate of an arrival
# run): a point that breaks its bound says the same of every point with more load.
GROWS_WITH_LOAD = ("latency", "failureRatio", "cpuPerTask", "peakRss", "startSkew", "dropped")


class Objective(Strict):
    """What every point in scope must measure (k6's thresholds, Argo Rollouts' success
    conditions): one metric of the Result, its bound, where it applies. Judged over each
    point's repetitions: met when the 95 % interval of their mean is within the bound, broken
    when it is beyond, unknown when it straddles (one repetition: its value decides)."""

    name: ObjectiveName | None = None
    """How messages and the table name it; unset: the metric and its bound."""
    latency: LatencyBound | None = None
    """A latency percentile's most (max: 250ms, percentile p99 by default)."""
    failure_ratio: ShareAtMost | None = None
    """Failed tasks over all tasks, at most."""
    throughput: ThroughputAtLeast | None = None
    """Tasks completed per second, at least."""
    efficiency: ShareAtLeast | None = None
    """The floor over the wall time, at least (a counted run: workload.tasks)."""
    cpu_per_task: TimeAtMost | None = None
    """CPU time (user + system) per task, at most."""
    peak_rss: MemoryAtMost | None = None
    """The runner's peak resident memory, at most."""
    start_skew: TimeAtMost | None = None
    """How far apart a trial's Pods started, at most (trials of several Pods)."""
    dropped: CountAtMost | None = None
    """Arrivals dropped per trial, at most (workload.arrival with onBusy: drop)."""
    scope: Literal["every", "recommended"] = "every"
    """every: each point of the matrix (narrowed by models and workers); recommended: the
    points status.summary recommends."""
    models: (
        Annotated[list[Model], Field(min_length=1, max_length=MAX_MODELS), no_repeats("model")]
        | None
    ) = None
    """Only the points of these models (each of spec.models)."""
    workers: (
        Annotated[
            list[Workers],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            no_repeats("worker count"),
        ]
        | None
    ) = None
    """Only the points of these worker counts (each in a scoped model's workers)."""
    abort_on_fail: bool = False
    """Once a point surely breaks it, skip the trials that can only be worse: more workers of
    the same model, Pods and RTT (a counted or closed run), or higher rates (an arrival run).
    Not for throughput and efficiency, which do not only worsen with load."""

    @model_validator(mode="after")
    def _rules(self) -> Objective:
        if len(self.metrics()) != 1:
            raise ValueError(
                f"an objective needs exactly one metric: one of {', '.join(OBJECTIVE_METRICS)}"
            )
        if self.scope == "recommended" and (self.models or self.workers):
            raise ValueError(
                "scope recommended judges the recommended points themselves: leave models and "
                "workers out, or use scope every"
            )
        if self.abort_on_fail and self.scope == "recommended":
            raise ValueError(
                "abortOnFail: the recommended point is known only at the end; use scope every"
            )
        if self.abort_on_fail and self.metric not in GROWS_WITH_LOAD:
            raise ValueError(
                f"abortOnFail: {self.metric} does not only worsen with load, so a breach at one "
                f"point says nothing of the next: leave abortOnFail out"
            )
        return self

    def metrics(self) -> list[str]:
        return [m for m in OBJECTIVE_METRICS if getattr(self, _snake(m)) is not None]

    @property
    def metric(self) -> str:
        return self.metrics()[0]


def _names_once(objectives: list[Objective]) -> list[Objective]:
    unique([o.name for o in objectives if o.name is not None], "objective name")
    return objectives


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


class ExperimentSpec(Strict):
    workload: WorkloadSpec
    """What each task does."""
    models: Annotated[list[ModelSpec], Field(min_length=1, max_length=MAX_MODELS)]
    """The models to compare, each once."""
    repetitions: Count = 1
    """Runs of every point, for mean, standard deviation and coefficient of variation."""
    resources: Resources = Resources()
    """What one trial gets."""
    tolerance: Annotated[float, Field(strict=True, gt=0, le=1)] = 0.10
    """The knee is the fewest workers whose wall time is within this fraction of the best."""
    trial_timeout: TrialTimeout = "15m"
    """A trial still running after this is stopped and counted as failed."""
    pinning: Literal["required", "preferred"] = "required"
    """required: a trial that did not run on exactly its own cores is marked unpinned
    (pinned: false) and left out of knees and recommendations. preferred: it counts all the
    same (a cluster without the kubelet's static CPU manager)."""
    calibration: bool | None = None
    """Run two calibration trials after the matrix (a fixed CPU loop, a fixed 1 ms sleep, one
    sequential worker, pinned like the others) and record the environment's fingerprint in
    status.environment, so a schedule tells a slower environment from slower code. Unset: off
    for an experiment, on for a schedule's runs (no default, so a template's unset is seen)."""
    syscalls: bool = False
    """Count every trial's system calls with strace -c -f (futex included). It slows the
    trials, so it is off by default; where strace is missing or may not trace (the runner
    image, a restricted Pod), the Result says the counts are unavailable, never 0."""
    # What follows only a cluster uses; the local backend ignores it.
    placement: Placement = Placement()
    """Where trial Pods may run."""
    parallelism: Count = 1
    """Trials running at once."""
    queue_timeout: QueueTimeout | None = None
    """Fail the experiment if it has waited this long (from its creation) for capacity;
    unset: it waits as long as it takes."""
    priority: Priority = 0
    """Its place among experiments waiting for capacity: higher first, then the oldest."""
    queue_name: QueueName | None = None
    """A Kueue LocalQueue (in the experiment's namespace) that admits its trial Pods, where
    Kueue runs with its plain-Pod integration: quotas and fair sharing are then Kueue's.
    Unset: cxlab's own queue."""
    exclusive: bool = False
    """No two trial Pods on one node (Pod anti-affinity)."""
    isolation: Literal["pod", "process"] = "pod"
    """pod: every trial runs in a Pod of its own, which costs a Pod's start-up and teardown
    (about 3 s) per trial. process: a host Pod per parallel slot, with the trial's resources
    and placement, runs trial after trial as fresh processes on its cores (the local
    backend's isolation), milliseconds apart; what one trial leaves in the node's caches
    and the host's page cache the next one finds. Trials of one Pod only, cxlab's own queue."""
    image: Image | None = None
    """The runner image; the operator's default when unset."""
    ttl_seconds_after_finished: TtlSeconds | None = None
    """Delete the experiment this long after it finished; kept when unset."""
    keep_pods_on_failure: bool = False
    """Keep the Pods of failed trials for inspection (kubectl logs)."""
    capacity: Capacity | None = None
    """A capacity plan for a target load, from this experiment's measured points."""
    search: SearchSpec | None = None
    """Trials searched after the matrix's (search.rate: each model's largest rate per Pod)."""
    objectives: (
        Annotated[
            list[Objective],
            Field(min_length=1, max_length=MAX_OBJECTIVES),
            AfterValidator(_names_once),
        ]
        | None
    ) = None
    """What the measurements must show: the ObjectivesMet condition (True, False, or Unknown
    when the repetitions cannot tell), status.objectives and cxlab run's exit status."""

    @model_validator(mode="after")
    def _rules(self) -> ExperimentSpec:
        names = [m.model for m in self.models]
        unique(names, "model")
        if self.search is not None and self.search.rate is not None:
            if self.capacity is None:
                raise ValueError(
                    "search.rate probes against capacity.target.latency: set capacity.target"
                )
            if "locust" in names:
                raise ValueError(
                    "search.rate: Locust's users are closed loops and cannot run at a rate; "
                    "leave locust out of an experiment that searches"
                )
        if "locust" in names and self.workload.type != "http":
            raise ValueError(
                f"model locust drives HTTP users and needs workload type http, "
                f"not {self.workload.type}"
            )
        self._duration_rules()
        for entry in self.models:
            # One worker per task (0) is a bound only for a counted run; with arrivals it is
            # as many as are in flight at once.
            tasks = self.workload.tasks or 0
            most = max(tasks if w == 0 else w for w in entry.workers)
            if entry.model == "processes" and most > MAX_PROCESS_WORKERS:
                raise ValueError(
                    f"processes would start {most} worker processes; "
                    f"the most allowed is {MAX_PROCESS_WORKERS}"
                )
            if entry.model == "threads" and most > MAX_THREAD_WORKERS:
                raise ValueError(
                    f"threads would start {most} threads in one process; the most allowed is "
                    f"{MAX_THREAD_WORKERS} (the kernel's default vm.max_map_count runs out near "
                    f"32,000)"
                )
        target = self.capacity.target if self.capacity else None
        if target and target.rtt and parse_duration(target.rtt) not in self.workload.rtt_seconds():
            raise ValueError(
                f"capacity.target.rtt {target.rtt} is not one of the workload's RTTs: "
                f"name one of them or leave it out"
            )
        most_pods = max(p for m in self.models for p in m.pods)
        if self.isolation == "process" and most_pods > 1:
            raise ValueError(
                "isolation: process runs each trial as one process in a host Pod: a trial of "
                "several Pods (models[].pods above 1) needs isolation: pod"
            )
        if self.isolation == "process" and self.queue_name is not None:
            raise ValueError(
                "isolation: process keeps host Pods for the whole experiment, which Kueue "
                "admits one trial Pod at a time: leave queueName out, or use isolation: pod"
            )
        if self.workload.tasks is not None and most_pods > self.workload.tasks:
            raise ValueError(
                f"a trial of {most_pods} Pods needs at least {most_pods} tasks (one each): "
                f"raise workload.tasks or lower models[].pods"
            )
        if self.resources.whole_cpus is None and self.pinning == "required":
            raise ValueError(
                f"resources.cpu {self.resources.cpu} is a fraction of a CPU, which no core "
                f"can be pinned to: set pinning: preferred (or whole CPUs)"
            )
        if self.resources.whole_cpus is None and self.capacity is not None:
            raise ValueError(
                f"capacity: a capacity plan counts whole cores per Pod, and resources.cpu "
                f"{self.resources.cpu} is a fraction of a CPU: set whole CPUs, or leave "
                f"capacity out"
            )
        self._objective_rules()
        count = self.trial_count()
        if count > MAX_TRIALS:
            raise ValueError(
                f"the matrix has {count} trials (models x workers x gomaxprocs x pods x "
                f"rtts x repetitions); the most allowed is {MAX_TRIALS}: split the experiment"
            )
        results = self.result_count()
        if results > MAX_RESULTS:
            raise ValueError(
                f"the matrix's trials keep {results} Results in status (a trial of N > 1 "
                f"Pods keeps N + 1: each Pod's and the merged one; distributed Locust also its "
                f"master's); the most allowed is "
                f"{MAX_RESULTS}: lower models[].pods or split the experiment"
            )
        return self

    def _objective_rules(self) -> None:
        """What each objective names must exist in this experiment."""
        for index, objective in enumerate(self.objectives or ()):
            where = f"objectives[{index}]"
            models = [m for m in self.models if objective.models is None or m.model in
                      objective.models]  # fmt: skip
            for model in objective.models or ():
                if model not in {m.model for m in self.models}:
                    raise ValueError(f"{where}.models names {model}, which spec.models has not")
            for workers in objective.workers or ():
                if not any(workers in m.workers for m in models):
                    raise ValueError(
                        f"{where}.workers names {workers}, which no scoped model's workers has"
                    )
            if objective.dropped is not None and self.workload.arrival is None:
                raise ValueError(f"{where}.dropped: only arrivals are dropped (workload.arrival)")
            if objective.efficiency is not None and self.workload.tasks is None:
                raise ValueError(
                    f"{where}.efficiency: a run for a time has no floor, so no efficiency: "
                    f"use workload.tasks, or another metric"
                )
            if objective.start_skew is not None and all(p == 1 for m in self.models
                                                        for p in m.pods):  # fmt: skip
                raise ValueError(
                    f"{where}.startSkew: every trial runs one Pod, which has no start skew: "
                    f"give a model pods above 1"
                )

    def _duration_rules(self) -> None:
        """What each model can do with a duration run, and each Pod's share of the arrivals."""
        workload, names = self.workload, [m.model for m in self.models]
        if workload.arrival is not None and "locust" in names:
            raise ValueError(
                "workload.arrival: locust's users are closed loops (each waits for its answer "
                "before its next request), so they cannot keep an arrival rate: drop locust "
                "from models, or use tasks or duration"
            )
        locust = next((m for m in self.models if m.model == "locust"), None)
        if workload.duration is not None and locust is not None and max(locust.pods) > 1:
            raise ValueError(
                "workload.duration: a distributed Locust trial (pods above 1) ends on its "
                "master's aggregated task count: run locust for a duration in one Pod, or use "
                "tasks"
            )
        for entry in self.models:
            if 0 not in entry.workers or entry.model == "sequential":
                continue
            if workload.duration is not None:
                raise ValueError(
                    f"workload.duration: a closed loop for a time needs its workers; "
                    f"{entry.model}'s workers list 0 (one per task, and the tasks are an output)"
                )
            if workload.arrival is not None and entry.model == "processes":
                raise ValueError(
                    "workload.arrival: processes with workers 0 would fork one process per "
                    "arrival, which measures fork, not the model: give processes' workers"
                )
        if workload.arrival is None:
            return
        bounds = LIMITS["tasks"]
        for rate in workload.arrival.rate_axis():
            for pods in sorted({p for m in self.models for p in m.pods}):
                expected = workload.arrival.profile(rate, pods).expected_arrivals()
                if not bounds.min <= expected <= bounds.max:
                    raise ValueError(
                        f"workload.arrival: at {rate:g}/s a trial of {pods} Pod(s) gives each "
                        f"{expected:.6g} arrivals; each must get {bounds.min} to "
                        f"{bounds.max:,}: change the rate, the duration or the Pods"
                    )

    def trial_count(self) -> int:
        per_repetition = sum(
            len(m.workers) * len(m.gomaxprocs_axis()) * len(m.pods) for m in self.models
        )
        axes = len(self.workload.rtt_seconds()) * len(self.workload.rate_axis())
        return per_repetition * axes * self.repetitions

    def result_count(self) -> int:
        """Results the trials keep in status: one per trial of one Pod, N + 1 for N Pods
        (N + 2 for distributed Locust: its master's too)."""
        per_repetition = sum(
            len(m.workers)
            * len(m.gomaxprocs_axis())
            * sum(1 if p == 1 else p + 1 + (m.model == "locust") for p in m.pods)
            for m in self.models
        )
        axes = len(self.workload.rtt_seconds()) * len(self.workload.rate_axis())
        return per_repetition * axes * self.repetitions


def spec_json(spec: Any) -> str:
    """The spec as status.startedSpec keeps it: compact, keys sorted."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
