"""The ConcurrencyExperiment's spec as a whole: its parts (workload, models, resources,
capacity, objectives ...) and the rules across them, each declared once (cxlab.rules)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from cxlab.experiments.fields import (
    LIMITS,
    Count,
    Fraction,
    Image,
    Priority,
    QueueName,
    QueueTimeout,
    Strict,
    TrialTimeout,
    TtlSeconds,
    repeated,
)
from cxlab.experiments.spec.capacity import SEARCH_RULES, Capacity, LatencyTarget, SearchSpec
from cxlab.experiments.spec.examples import CAPACITY, arriving, looping, served, workload
from cxlab.experiments.spec.limits import (
    MAX_MODELS,
    MAX_PROCESS_WORKERS,
    MAX_RESULTS,
    MAX_THREAD_WORKERS,
    MAX_TRIALS,
)
from cxlab.experiments.spec.models import ModelSpec, Placement, Resources
from cxlab.experiments.spec.objectives import ACROSS_THE_SPEC, Objectives
from cxlab.experiments.spec.service import ServiceSubject, Variant, variant_count_cel
from cxlab.experiments.spec.workload import WorkloadSpec
from cxlab.rules import Rule
from cxlab_contract.durations import parse_duration

# A count of tasks where the workload has one (0 for duration runs, whose tasks are an output).
_TASKS = "(has(self.workload.tasks) ? self.workload.tasks : 0)"


def _trial_count_cel() -> str:
    """CEL has no sum(): the per-model terms are unrolled over the (bounded) model list."""
    per_model = " + ".join(
        f"(size(self.models) > {i} ? size(self.models[{i}].workers) * "
        f"(has(self.models[{i}].gomaxprocs) ? size(self.models[{i}].gomaxprocs) : 1) * "
        f"(has(self.models[{i}].pods) ? size(self.models[{i}].pods) : 1) : 0)"
        for i in range(MAX_MODELS)
    )
    rtts = "(has(self.workload.rtts) ? size(self.workload.rtts) : 1)"
    rates = (
        "(has(self.workload.arrival) && has(self.workload.arrival.ratesPerSecond) ? "
        "size(self.workload.arrival.ratesPerSecond) : 1)"
    )
    variants = f"(has(self.service) ? {variant_count_cel('self.service')} : 1)"
    return f"({per_model}) * {rtts} * {rates} * {variants} * self.repetitions <= {MAX_TRIALS}"


# 20 trials per RTT (1 + 10 + 2 + 2 + 2 + 2 + 1) x 5 RTTs x 10 repetitions: every term of the
# unrolled CEL sum is used, up to the 7th model; one Pod count more is one trial too many.
_SEVEN_MODELS = [
    {"model": "sequential"},
    {"model": "threads", "workers": list(range(1, 11))},
    {"model": "processes", "workers": [1, 2]},
    {"model": "gevent", "workers": [1, 2]},
    {"model": "asyncio", "workers": [1, 2]},
    {"model": "goroutines", "gomaxprocs": [1, 2]},
    {"model": "locust", "workers": [1]},
]
_MAX_TRIALS = {
    "workload": {"type": "http", "tasks": 10, "rtts": ["1ms", "2ms", "3ms", "4ms", "5ms"]},
    "models": _SEVEN_MODELS,
    "repetitions": 10,
}


def _most_workers(spec: ExperimentSpec, model: str) -> int:
    """The most a model's trials start at once: one per task for workers 0 of a counted run
    (with arrivals, 0 is as many as are in flight: no bound here)."""
    tasks = spec.workload.tasks or 0
    return max(
        (tasks if w == 0 else w for m in spec.models if m.model == model for w in m.workers),
        default=0,
    )


def _names(spec: ExperimentSpec) -> list[str]:
    return [m.model for m in spec.models]


def _rtt_is_measured(spec: ExperimentSpec) -> bool:
    target = spec.capacity.target if spec.capacity else None
    return not (target and target.rtt) or (
        parse_duration(target.rtt) in spec.workload.rtt_seconds()
    )


def _arrivals_out_of_bounds(spec: ExperimentSpec) -> str | None:
    """The first rate and Pod count whose Pods each expect too few or too many arrivals."""
    arrival, bounds = spec.workload.arrival, LIMITS["tasks"]
    if arrival is None:
        return None
    for rate in arrival.rate_axis():
        for pods in sorted({p for m in spec.models for p in m.pods}):
            expected = arrival.profile(rate, pods).expected_arrivals()
            if not bounds.min <= expected <= bounds.max:
                return f"at {rate:g}/s a trial of {pods} Pod(s) gives each {expected:.6g}"
    return None


def _workers_zero(spec: ExperimentSpec, model: str | None = None) -> bool:
    """Whether a model (any but sequential) lists workers 0."""
    return any(
        0 in m.workers and m.model != "sequential" and model in (None, m.model) for m in spec.models
    )


def _locust(spec: ExperimentSpec) -> bool:
    return "locust" in _names(spec)


def _most_pods(spec: ExperimentSpec) -> int:
    return max(p for m in spec.models for p in m.pods)


def _subject_target(spec: ExperimentSpec) -> bool:
    """Whether a Deployment subject has the Service in front of it as its target."""
    target = spec.workload.target
    return target is not None and target.service is not None and target.service.namespace is None


_COMMAND = ["gunicorn", "httpbin:app"]
_RULES = (
    Rule(
        "service.deployment: the load goes to each variant's copy, behind a copy of the "
        "Service in front of the Deployment: set workload.type http and workload.target.service "
        "(that Service, in the experiment's namespace)",
        holds=lambda s: s.service is None or s.service.deployment is None or _subject_target(s),
        cel="!has(self.service) || !has(self.service.deployment) || (has(self.workload.target) "
        "&& has(self.workload.target.service) && !has(self.workload.target.service.namespace))",
        valid=served(),
        invalid={**served(), "workload": workload(rtt="10ms")},
    ),
    Rule(  # the apiserver refuses service.command itself
        "service.command: set workload.target.url, the loopback address the command listens on",
        holds=lambda s: (
            s.service is None
            or s.service.command is None
            or (s.workload.target is not None and s.workload.target.url is not None)
        ),
        valid=served(deployment=None, command=_COMMAND),
        invalid={**served(deployment=None, command=_COMMAND), "workload": served()["workload"]},
    ),
    Rule(
        "service: a capacity plan of the service (capacity) is built from each variant's "
        "searched capacity: add search.rate",
        holds=lambda s: (
            s.service is None
            or s.capacity is None
            or (s.search is not None and s.search.rate is not None)
        ),
        cel="!has(self.service) || !has(self.capacity) || "
        "(has(self.search) && has(self.search.rate))",
        field="search.rate",
        valid={**served(), "capacity": CAPACITY, "search": {"rate": {}}},
        invalid={**served(), "capacity": CAPACITY},
    ),
    Rule(
        "service: capacity.verify.pods and workersPerPod size a client's plan; a service's "
        "plan runs its replicas, loaded by the generator Pods its searches needed: leave "
        "them out",
        holds=lambda s: (
            s.service is None
            or s.capacity is None
            or s.capacity.verify is None
            or (s.capacity.verify.pods is None and s.capacity.verify.workers_per_pod is None)
        ),
        cel="!has(self.service) || !has(self.capacity) || !has(self.capacity.verify) || "
        "(!has(self.capacity.verify.pods) && !has(self.capacity.verify.workersPerPod))",
        field="capacity.verify",
        valid={
            **served(),
            "capacity": {**CAPACITY, "verify": {"fewer": True}},
            "search": {"rate": {}},
        },
        invalid={
            **served(),
            "capacity": {**CAPACITY, "verify": {"pods": 2}},
            "search": {"rate": {}},
        },
    ),
    Rule(
        "capacity.target.peakRatePerSecond sizes a service's autoscaler (its maxReplicas): it "
        "needs spec.service; a client's plan has no autoscaler",
        holds=lambda s: (
            s.service is not None
            or s.capacity is None
            or s.capacity.target.peak_rate_per_second is None
        ),
        cel="has(self.service) || !has(self.capacity) || "
        "!has(self.capacity.target.peakRatePerSecond)",
        field="capacity.target.peakRatePerSecond",
        valid={"capacity": CAPACITY},
        invalid={"capacity": {"target": {**CAPACITY["target"], "peakRatePerSecond": 1000}}},
    ),
    Rule(
        "capacity.verify.fewer runs a service's plan one replica fewer: it needs spec.service",
        holds=lambda s: (
            s.service is not None
            or s.capacity is None
            or s.capacity.verify is None
            or not s.capacity.verify.fewer
        ),
        cel="has(self.service) || !has(self.capacity) || !has(self.capacity.verify) || "
        "!has(self.capacity.verify.fewer) || !self.capacity.verify.fewer",
        field="capacity.verify.fewer",
        valid={"capacity": {**CAPACITY, "verify": {"fewer": False}}},
        invalid={"capacity": {**CAPACITY, "verify": {"fewer": True}}},
    ),
    Rule(  # its trials belong to no variant: no copy would be up for them, or all would
        "service: calibration measures the nodes, not a service: leave calibration out, or "
        "calibrate in an experiment without spec.service",
        holds=lambda s: s.service is None or not s.calibration,
        cel="!has(self.service) || !has(self.calibration) || !self.calibration",
        valid={**served(), "calibration": False},
        invalid={**served(), "calibration": True},
    ),
    Rule(
        "service: each variant's trials run in Pods of their own: leave isolation: process out",
        holds=lambda s: s.service is None or s.isolation == "pod",
        cel="!has(self.service) || !has(self.isolation) || self.isolation == 'pod'",
        valid={**served(), "isolation": "pod"},
        invalid={**served(), "isolation": "process"},
    ),
    Rule(
        "each model may be listed once: put all its worker counts in one entry",
        holds=lambda s: repeated(_names(s)) is None,
        cel="self.models.all(m, self.models.exists_one(n, n.model == m.model))",
        found=lambda s: f"model {_names(s)[repeated(_names(s)) or 0]!r} is listed twice",
        valid={"models": [{"model": "threads", "workers": [2, 4]}, {"model": "asyncio"}]},
        invalid={
            "models": [{"model": "threads", "workers": [2]}, {"model": "threads", "workers": [4]}]
        },
    ),
    *SEARCH_RULES,
    Rule(
        "model locust drives HTTP users and needs workload type http",
        holds=lambda s: not _locust(s) or s.workload.type == "http",
        cel="!self.models.exists(m, m.model == 'locust') || self.workload.type == 'http'",
        found=lambda s: f"not {s.workload.type}",
        valid={"workload": workload(type="http", rtt="10ms"), "models": [{"model": "locust"}]},
        invalid={"models": [{"model": "locust"}]},
    ),
    Rule(
        "workload.arrival: locust's users are closed loops (each waits for its answer before "
        "its next request), so they cannot keep an arrival rate: drop locust from models, or "
        "use tasks or duration",
        holds=lambda s: s.workload.arrival is None or not _locust(s),
        cel="!has(self.workload.arrival) || !self.models.exists(m, m.model == 'locust')",
        valid={"workload": {**arriving(), "type": "http"}, "models": [{"model": "asyncio"}]},
        invalid={"workload": {**arriving(), "type": "http"}, "models": [{"model": "locust"}]},
    ),
    Rule(
        "workload.duration: a distributed Locust trial (pods above 1) ends on its master's "
        "aggregated task count: run locust for a duration in one Pod, or use tasks",
        holds=lambda s: (
            s.workload.duration is None
            or all(p == 1 for m in s.models if m.model == "locust" for p in m.pods)
        ),
        cel="!has(self.workload.duration) || self.models.all(m, m.model != 'locust' || "
        "!has(m.pods) || m.pods.all(p, p == 1))",
        valid={"workload": looping(type="http"), "models": [{"model": "locust", "workers": [2]}]},
        invalid={
            "workload": looping(type="http"),
            "models": [{"model": "locust", "workers": [2], "pods": [1, 2]}],
        },
    ),
    Rule(
        "workload.duration: a closed loop for a time needs its workers; workers 0 (one per "
        "task) has no count of tasks to go by",
        holds=lambda s: s.workload.duration is None or not _workers_zero(s),
        cel="!has(self.workload.duration) || self.models.all(m, m.model == 'sequential' || "
        "!has(m.workers) || !m.workers.exists(w, w == 0))",
        found=lambda s: (
            "workers 0 in "
            + ", ".join(m.model for m in s.models if 0 in m.workers and m.model != "sequential")
        ),
        valid={"workload": looping(), "models": [{"model": "sequential"}]},
        invalid={"workload": looping(), "models": [{"model": "asyncio", "workers": [4, 0]}]},
    ),
    Rule(
        "workload.arrival: processes with workers 0 would fork one process per arrival, which "
        "measures fork, not the model: give processes' workers",
        holds=lambda s: s.workload.arrival is None or not _workers_zero(s, "processes"),
        cel="!has(self.workload.arrival) || self.models.all(m, m.model != 'processes' || "
        "!has(m.workers) || !m.workers.exists(w, w == 0))",
        valid={"workload": arriving(), "models": [{"model": "processes", "workers": [4]}]},
        invalid={"workload": arriving(), "models": [{"model": "processes", "workers": [0]}]},
    ),
    Rule(  # CEL cannot split a stage's ramp among Pods: cxlab alone counts the arrivals
        f"workload.arrival: each Pod of a trial must expect {LIMITS['tasks'].min} to "
        f"{LIMITS['tasks'].max:,} arrivals: change the rate, the duration or the Pods",
        holds=lambda s: _arrivals_out_of_bounds(s) is None,
        found=lambda s: f"{_arrivals_out_of_bounds(s)}",
        valid={"workload": arriving(ratePerSecond=1_000_000, duration="10s")},
        invalid={"workload": arriving(ratePerSecond=1_000_000, duration="11s")},
    ),
    Rule(
        f"processes may start at most {MAX_PROCESS_WORKERS} worker processes (0 workers means "
        f"one per task)",
        holds=lambda s: _most_workers(s, "processes") <= MAX_PROCESS_WORKERS,
        cel=f"self.models.all(m, m.model != 'processes' || m.workers.all(w, "
        f"(w == 0 ? {_TASKS} : w) <= {MAX_PROCESS_WORKERS}))",
        found=lambda s: f"these would start {_most_workers(s, 'processes')}",
        valid={
            "workload": workload(tasks=512, rtt="10ms"),
            "models": [{"model": "processes", "workers": [512, 0]}],
        },
        invalid={  # 0 workers: one process per task
            "workload": workload(tasks=513, rtt="10ms"),
            "models": [{"model": "processes", "workers": [2, 0]}],
        },
    ),
    Rule(
        f"threads may start at most {MAX_THREAD_WORKERS} threads in one process (0 workers "
        f"means one per task): the kernel's default vm.max_map_count runs out near 32,000",
        holds=lambda s: _most_workers(s, "threads") <= MAX_THREAD_WORKERS,
        cel=f"self.models.all(m, m.model != 'threads' || m.workers.all(w, "
        f"(w == 0 ? {_TASKS} : w) <= {MAX_THREAD_WORKERS}))",
        found=lambda s: f"these would start {_most_workers(s, 'threads')}",
        valid={
            "workload": workload(tasks=30000, rtt="10ms"),
            "models": [{"model": "threads", "workers": [30000, 0]}],
        },
        invalid={  # 0 workers: one thread per task
            "workload": workload(tasks=30001, rtt="10ms"),
            "models": [{"model": "threads", "workers": [2, 0]}],
        },
    ),
    Rule(  # past its own bound, the rtt is refused there alone
        "capacity.target.rtt must be one of the workload's RTTs: name one of them or leave it out",
        holds=_rtt_is_measured,
        cel="!has(self.capacity) || !has(self.capacity.target.rtt) || "
        f"duration(self.capacity.target.rtt) > duration('{LIMITS['rtt'].max}') || "
        "(has(self.workload.rtt) && duration(self.workload.rtt) == "
        "duration(self.capacity.target.rtt)) || (has(self.workload.rtts) && "
        "self.workload.rtts.exists(r, duration(r) == duration(self.capacity.target.rtt)))",
        field="capacity.target.rtt",
        valid={  # the same time, written another way
            "workload": workload(rtts=["10ms", "1h"]),
            "capacity": {"target": {**CAPACITY["target"], "rtt": "60m"}},
        },
        invalid={
            "workload": workload(rtts=["10ms", "1h"]),
            "capacity": {"target": {**CAPACITY["target"], "rtt": "30ms"}},
        },
    ),
    Rule(
        "isolation: process runs each trial as one process in a host Pod: a trial of several "
        "Pods (models[].pods above 1) needs isolation: pod",
        holds=lambda s: s.isolation != "process" or _most_pods(s) == 1,
        cel="!has(self.isolation) || self.isolation != 'process' || "
        "self.models.all(m, !has(m.pods) || m.pods.all(p, p == 1))",
        valid={"isolation": "process", "models": [{"model": "asyncio", "pods": [1]}]},
        invalid={"isolation": "process", "models": [{"model": "asyncio", "pods": [1, 2]}]},
    ),
    Rule(
        "isolation: process keeps host Pods for the whole experiment, which Kueue admits one "
        "trial Pod at a time: leave queueName out, or use isolation: pod",
        holds=lambda s: s.isolation != "process" or s.queue_name is None,
        cel="!has(self.isolation) || self.isolation != 'process' || !has(self.queueName)",
        valid={"isolation": "pod", "queueName": "lab"},
        invalid={"isolation": "process", "queueName": "lab"},
    ),
    Rule(
        "a trial of N Pods needs at least N tasks (one each): raise workload.tasks or lower "
        "models[].pods",
        holds=lambda s: s.workload.tasks is None or _most_pods(s) <= s.workload.tasks,
        cel="!has(self.workload.tasks) || "
        "self.models.all(m, !has(m.pods) || m.pods.all(p, p <= self.workload.tasks))",
        found=lambda s: f"{_most_pods(s)} Pods, {s.workload.tasks} tasks",
        valid={
            "workload": workload(tasks=3, rtt="10ms"),
            "models": [{"model": "asyncio", "pods": [3]}],
        },
        invalid={
            "workload": workload(tasks=3, rtt="10ms"),
            "models": [{"model": "asyncio", "pods": [4]}],
        },
    ),
    Rule(
        "a fraction of a CPU (resources.cpu) cannot be pinned to a core: set pinning: "
        "preferred (or whole CPUs)",
        holds=lambda s: s.resources.whole_cpus is not None or s.pinning == "preferred",
        cel="!has(self.resources) || !has(self.resources.cpu) || "
        "double(int(self.resources.cpu)) == double(self.resources.cpu) || "
        "self.pinning == 'preferred'",
        found=lambda s: f"cpu {s.resources.cpu}",
        valid={"resources": {"cpu": 0.5}, "pinning": "preferred"},
        invalid={"resources": {"cpu": 0.5}},
    ),
    Rule(
        "capacity: a capacity plan counts whole cores per Pod, and resources.cpu is a fraction "
        "of a CPU: set whole CPUs, or leave capacity out",
        holds=lambda s: (
            s.capacity is None or s.service is not None or s.resources.whole_cpus is not None
        ),
        cel="!has(self.capacity) || has(self.service) || !has(self.resources) || "
        "!has(self.resources.cpu) || "
        "double(int(self.resources.cpu)) == double(self.resources.cpu)",
        found=lambda s: f"cpu {s.resources.cpu}",
        valid={"resources": {"cpu": 2}, "capacity": CAPACITY},
        invalid={"resources": {"cpu": 0.5}, "pinning": "preferred", "capacity": CAPACITY},
    ),
    *ACROSS_THE_SPEC,
    Rule(
        f"the matrix (variants x models x workers x gomaxprocs x pods x rtts x rates x "
        f"repetitions) may "
        f"hold at most {MAX_TRIALS} trials: split the experiment",
        holds=lambda s: s.trial_count() <= MAX_TRIALS,
        cel=_trial_count_cel(),
        found=lambda s: f"it has {s.trial_count()}",
        valid=_MAX_TRIALS,
        invalid={
            **_MAX_TRIALS,
            "models": [*_SEVEN_MODELS[:6], {"model": "locust", "workers": [1], "pods": [1, 2]}],
        },
    ),
    Rule(  # CEL would need the Pods of every entry: cxlab alone counts the Results
        f"the matrix's trials may keep at most {MAX_RESULTS} Results in status (a trial of N > 1 "
        f"Pods keeps N + 1: each Pod's and the merged one; distributed Locust also its "
        f"master's): lower models[].pods or split the experiment",
        holds=lambda s: s.result_count() <= MAX_RESULTS,
        found=lambda s: f"they keep {s.result_count()}",
        valid={
            "models": [{"model": "threads", "workers": [2], "pods": [1, 2, 3, 4, 5, 6, 7, 8]}],
            "workload": workload(tasks=10, rtts=["1ms", "2ms", "3ms", "4ms"]),
            "repetitions": 11,
        },
        invalid={
            "models": [{"model": "threads", "workers": [2], "pods": [1, 2, 3, 4, 5, 6, 7, 8]}],
            "workload": workload(tasks=10, rtts=["1ms", "2ms", "3ms", "4ms"]),
            "repetitions": 12,
        },
    ),
)


class ExperimentSpec(Strict):
    workload: WorkloadSpec
    """What each task does."""
    models: Annotated[list[ModelSpec], Field(min_length=1, max_length=MAX_MODELS)]
    """The models to compare, each once."""
    repetitions: Count = 1
    """Runs of every point, for mean, standard deviation and coefficient of variation."""
    resources: Resources = Resources()
    """What one trial gets."""
    tolerance: Fraction = 0.10
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
    service: ServiceSubject | None = None
    """The system under test, run once per variant (the workload's target is then the
    variant's own copy of it): its capacity and its own CPU and memory per trial."""
    objectives: Objectives | None = None
    """What the measurements must show: the ObjectivesMet condition (True, False, or Unknown
    when the repetitions cannot tell), status.objectives and cxlab run's exit status."""

    rules = _RULES

    @property
    def probe_latency(self) -> LatencyTarget | None:
        """The objective a rate search's probe holds: search.rate's, else capacity.target's."""
        rate = self.search.rate if self.search else None
        if rate is not None and rate.latency is not None:
            return rate.latency
        return self.capacity.target.latency if self.capacity else None

    def trial_count(self) -> int:
        per_repetition = sum(
            len(m.workers) * len(m.gomaxprocs_axis()) * len(m.pods) for m in self.models
        )
        axes = len(self.workload.rtt_seconds()) * len(self.workload.rate_axis())
        return per_repetition * axes * len(self.variants()) * self.repetitions

    def variants(self) -> list[Variant | None]:
        """The service's variants in run order; [None] without a service subject."""
        return list(self.service.variant_list()) if self.service else [None]

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
        return per_repetition * axes * len(self.variants()) * self.repetitions


def spec_json(spec: Any) -> str:
    """The spec as status.startedSpec keeps it: compact, keys sorted."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
