"""Spec → trials, and trial → runner command line. Pure: no processes, no cluster, so the
local backend and the operator plan the same experiment identically."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from cxlab.experiments.fields import LIMITS
from cxlab.experiments.spec import GO_MODELS, ArrivalSpec, ExperimentSpec, ModelSpec, WorkloadSpec
from cxlab_contract.arrivals import format_stages
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.result import floor_seconds as runner_floor_seconds
from cxlab_contract.result import resolve_workers

PYTHON_RUNNER = ("python3", "-m", "cxlab_runner")
GO_RUNNER = ("cxlab-runner-go",)
HOST_COMMAND = ("python3", "-m", "cxlab_runner.trial_host")  # isolation: process
# A probe's or a verification's arrivals: their own seed; the first seconds (a tenth, at
# most this) are its warm-up, left out of its latencies.
VERIFY_SEED = 27
VERIFY_WARMUP_SECONDS = 5.0
# The calibration trials (spec.calibration): a count loop of this many iterations per task,
# about 0.1 s of CPython on a 2020s core, and sleeps of 1 ms; one sequential worker each.
CALIBRATION_MODEL: Literal["sequential"] = "sequential"
CALIBRATION_ITERATIONS = 2_000_000
CALIBRATION_CPU_TASKS = 5
CALIBRATION_SLEEP_SECONDS = 0.001
CALIBRATION_SLEEP_TASKS = 200


@dataclass(frozen=True)
class Trial:
    """One point of the matrix: `pods` runner processes locally, `pods` Pods on a cluster."""

    index: int
    model: str
    workers: int  # per Pod, as in the spec: 0 = one worker per task
    gomaxprocs: int | None  # goroutines only; 0 = the Go default
    rtt_seconds: float | None  # sleep and http only
    repetition: int  # 1-based
    pods: int = 1  # runner Pods (processes), started together at the barrier
    rate_per_second: float | None = None  # arrival runs: the whole trial's arrivals per second
    verify: int = 0  # a capacity plan's verification: its attempt (1, 2, ...); 0: the sweep
    probe: int = 0  # a rate search's probe of this model: 1, 2, ...; 0: not one
    calibrate: str = ""  # a calibration trial: "cpu" or "sleep"; "": not one
    service_variant: int = 0  # spec.service's variant it measures (1, 2, ...); 0: none
    service: str = ""  # that variant's name (a line of its own: "sync-2 / asyncio")
    # A service plan's verification: the replicas of the chosen variant its own copy runs
    # (service_variant is then that copy's, past the spec's variants); 0: the variant's own.
    service_replicas: int = 0

    @property
    def follows(self) -> bool:
        """Added after the matrix's trials (a calibration, a probe or a verification): not a
        point of the matrix."""
        return bool(self.verify or self.probe or self.calibrate)

    @cached_property  # a pass looks it up for every trial and Pod, many times
    def name(self) -> str:
        """Stable, DNS-label-safe id, e.g. 007-threads-w100-rtt100ms-r2, with the Pods when
        there are several: 008-threads-n3-w100-rtt100ms-r2 (3 Pods of 100 workers), and an
        arrival run's rate: 009-asyncio-w0-rtt50ms-a2000-r1 (2,000 a second), and a capacity
        plan's verification its attempt: 012-v1-asyncio-n2-w6-rtt100ms-a60-r1, and a service
        subject's variant its number: 013-sv2-asyncio-w8-r1."""
        parts = [f"{self.index:03d}", self.model]
        if self.calibrate:
            parts.insert(1, f"cal{self.calibrate}")
        if self.verify:
            parts.insert(1, f"v{self.verify}")
        if self.probe:
            parts.insert(1, f"s{self.probe}")
        if self.service_variant:
            parts.insert(1, f"sv{self.service_variant}")
        if self.pods > 1:
            parts.append(f"n{self.pods}")
        parts.append(f"w{self.workers}")
        if self.gomaxprocs is not None:
            parts.append(f"p{self.gomaxprocs}")
        if self.rtt_seconds is not None:
            parts.append("rtt" + format_duration(self.rtt_seconds).replace(".", "p"))
        if self.rate_per_second is not None:
            parts.append(f"a{self.rate_per_second:g}".replace(".", "p").replace("+", ""))
        parts.append(f"r{self.repetition}")
        return "-".join(parts).replace("µ", "u")

    @property
    def variant(self) -> str:
        """The model as a line on a plot: goroutines differ by GOMAXPROCS, and against a
        service subject each of its variants is a line of its own."""
        line = self.model
        if self.gomaxprocs is not None:
            line = f"{self.model} (GOMAXPROCS {self.gomaxprocs or 'default'})"
        return f"{self.service} / {line}" if self.service else line


def plan_trials(spec: ExperimentSpec) -> list[Trial]:
    """Every trial of the experiment in run order.

    A service subject's variants are the outermost loop: each variant's trials run together,
    against its own copy, which is gone before the next variant's starts. Within them,
    repetitions are the outer loop so a drift of the machine (a noisy neighbour, thermal
    throttling) spreads over all points instead of biasing one of them.
    """
    trials: list[Trial] = []
    for variant in spec.variants():
        for repetition in range(1, spec.repetitions + 1):
            for rtt in spec.workload.rtt_seconds():
                for rate in spec.workload.rate_axis():
                    for entry in spec.models:
                        for gomaxprocs in entry.gomaxprocs_axis():
                            for pods in entry.pods:
                                for workers in entry.workers:
                                    trials.append(
                                        Trial(
                                            len(trials), entry.model, workers, gomaxprocs, rtt,
                                            repetition, pods, rate,
                                            service_variant=variant.index if variant else 0,
                                            service=variant.name if variant else "",
                                        )
                                    )  # fmt: skip
    return trials


# Where a distributed Locust master listens for its workers (Locust's default port).
LOCUST_MASTER_PORT = 5557


def locust_master(trial: Trial) -> int | None:
    """The index of a distributed Locust trial's master Pod (after its N workers, 0 .. N-1);
    None for every other trial."""
    return trial.pods if trial.model == "locust" and trial.pods > 1 else None


def pod_indexes(trial: Trial) -> range:
    """Every Pod of the trial: its N runners, and a distributed Locust trial's master."""
    return range(trial.pods + (locust_master(trial) is not None))


def pod_tasks(tasks: int, pods: int, pod: int) -> int:
    """Pod `pod`'s share of a trial's tasks, as k6's execution segments split them: every Pod
    tasks // pods, the first tasks % pods one more. Deterministic, so a retried Pod runs the
    same share."""
    return tasks // pods + (1 if pod < tasks % pods else 0)


def trial_spec(spec: ExperimentSpec, trial: Trial) -> ExperimentSpec:
    """The spec a trial runs: the experiment's, or for a rate search's probe and a capacity
    plan's verification the same with its workload arriving at random at the trial's rate
    for search.rate.duration or verify.duration, queueing for the workers (so the wait is in
    every latency)."""
    if trial.calibrate:
        return calibration_spec(spec, trial.calibrate)
    verify = spec.capacity.verifying if spec.capacity else None
    search = spec.search.rate if spec.search else None
    if trial.probe and search is not None:
        return _arriving(spec, trial, search.duration, probing=True)
    if not trial.verify or verify is None:
        return spec
    return _arriving(spec, trial, verify.duration)


def calibration_trials(first: int) -> list[Trial]:
    """The two calibration trials, indexed from `first`: a CPU loop, then 1 ms sleeps."""
    return [
        Trial(first, CALIBRATION_MODEL, 1, None, None, 1, calibrate="cpu"),
        Trial(first + 1, CALIBRATION_MODEL, 1, None, CALIBRATION_SLEEP_SECONDS, 1,
              calibrate="sleep"),
    ]  # fmt: skip


def calibration_spec(spec: ExperimentSpec, kind: str) -> ExperimentSpec:
    """The spec a calibration trial runs: the experiment's resources and placement, its fixed
    workload and one sequential worker."""
    if kind == "cpu":
        workload = WorkloadSpec(type="cpu", tasks=CALIBRATION_CPU_TASKS,
                                iterations=CALIBRATION_ITERATIONS)  # fmt: skip
    else:
        workload = WorkloadSpec(type="sleep", tasks=CALIBRATION_SLEEP_TASKS,
                                rtt=format_duration(CALIBRATION_SLEEP_SECONDS))  # fmt: skip
    models = [ModelSpec(model=CALIBRATION_MODEL, workers=[1])]
    return spec.model_copy(update={"workload": workload, "models": models, "syscalls": False})


def _arriving(
    spec: ExperimentSpec, trial: Trial, duration: str, probing: bool = False
) -> ExperimentSpec:
    """The workload arriving at the trial's rate for `duration`, queueing: at random for a
    verification (its queueing model's arrivals); for a probe as workload.arrival's process
    says (at random without one), with workload.warmup when the workload sets one."""
    # A late arrival's lateness is in its latency, so the objective bounds the lag itself:
    # a generator is saturated (the trial refuted) only past it, or short of the rate.
    target = spec.capacity.target.latency if spec.capacity else None
    latency = spec.probe_latency if probing else target
    objective = latency.max if latency else "10ms"
    max_lag = format_duration(min(parse_duration(objective), parse_duration(LIMITS["max-lag"].max)))
    given = spec.workload.arrival
    process = given.process if probing and given is not None else "poisson"
    arrival = ArrivalSpec(
        rate_per_second=trial.rate_per_second, duration=duration, process=process,
        on_busy="queue", max_lag=max_lag, seed=VERIFY_SEED,
    )  # fmt: skip
    seconds = parse_duration(duration)
    warmup = format_duration(min(VERIFY_WARMUP_SECONDS, seconds / 10))
    if probing and spec.workload.warmup is not None:
        warmup = spec.workload.warmup
    workload = spec.workload.model_copy(
        update={"tasks": None, "duration": None, "arrival": arrival, "warmup": warmup}
    )
    return spec.model_copy(update={"workload": workload})


def floor_seconds(spec: ExperimentSpec, trial: Trial) -> float | None:
    """The physical lower bound of the trial's wall time, None where there is none (cpu, and
    a duration run, which lasts its time): its largest Pod's (Pod 0's share) when it has
    several."""
    workload = trial_spec(spec, trial).workload
    if workload.tasks is None or workload.target is not None:  # a service's time is unknown
        return None
    tasks = pod_tasks(workload.tasks, trial.pods, 0)
    return runner_floor_seconds(
        workload.type,
        tasks,
        resolve_workers(trial.model, trial.workers, tasks),
        trial.rtt_seconds or 0.0,
        parse_duration(workload.hold or "0s"),
    )


def _model_flags(spec: ExperimentSpec, trial: Trial, target_url: str | None) -> list[str]:
    """The flags of the trial's point of the matrix and of its workload that apply."""
    workload = spec.workload
    flags = []
    if trial.rtt_seconds is not None:
        flags += ["--rtt", format_duration(trial.rtt_seconds)]
    if workload.iterations is not None:
        flags += ["--iterations", str(workload.iterations)]
    if workload.hold is not None:
        flags += ["--hold", workload.hold]
    if trial.gomaxprocs is not None:
        flags += ["--gomaxprocs", str(trial.gomaxprocs)]
    pool = next(m.pool for m in spec.models if m.model == trial.model)
    if pool is not None:
        flags += ["--pool", pool]
    if spec.syscalls:
        flags += ["--syscalls"]
    if workload.type == "http":
        if target_url is None:
            raise ValueError(
                "the http workload needs its target's URL (the delay target's, or the service's)"
            )
        flags += ["--target-url", target_url, "--connection", workload.connection or "fresh"]
        if workload.target is not None:
            flags += workload.target.runner_flags()
    return flags


def _run_flags(spec: ExperimentSpec, trial: Trial, pod: int, master: int | None) -> list[str]:
    """How long the Pod runs: its share of the tasks, the duration of a closed loop, or its
    share of an arrival rate (rates and stage targets divided by the Pods) with its own seed."""
    workload = spec.workload
    if workload.tasks is not None:
        tasks = workload.tasks if pod == master else pod_tasks(workload.tasks, trial.pods, pod)
        return ["--tasks", str(tasks)]
    flags = ["--warmup", workload.warmup] if workload.warmup is not None else []
    arrival = workload.arrival
    if arrival is None:
        return ["--duration", workload.duration or "0s", *flags]
    profile = arrival.profile(trial.rate_per_second or 0.0, trial.pods)
    flags += [
        "--arrival", arrival.process,
        "--rate", f"{profile.pieces[0].a:.9g}",
        "--on-busy", arrival.on_busy,
        "--max-lag", arrival.max_lag,
        "--seed", str(arrival.seed + 65 * (trial.repetition - 1) + pod),
    ]  # fmt: skip
    if arrival.stages is not None:
        flags += ["--stages", format_stages(profile.stages)]
    else:
        flags += ["--duration", arrival.duration or "0s"]
    return flags


def runner_command(
    spec: ExperimentSpec,
    trial: Trial,
    *,
    experiment: str,
    metrics_port: int = 0,
    result_path: str | None = None,
    linger: str = "0s",
    final_read: str = "0s",
    target_url: str | None = None,
    pod: int = 0,
    barrier_timeout: str = "0s",
    locust_address: str | None = None,
) -> list[str]:
    """The argv of the runner for one Pod of a trial (the runner contract,
    workloads/CONTRACT.md). A trial of several Pods waits at the start barrier, at most
    `barrier_timeout`; one Pod alone starts at once. A distributed Locust trial has no such
    barrier: its master waits for its workers (as long), and `locust_address` is where the
    master listens (for the master's own Pod) or is reached (for a worker's)."""
    spec = trial_spec(spec, trial)
    workload = spec.workload
    runner = GO_RUNNER if trial.model in GO_MODELS else PYTHON_RUNNER
    master = locust_master(trial)
    argv = [
        *runner,
        "--model", trial.model,
        "--workload", workload.type,
        *_run_flags(spec, trial, pod, master),
        "--workers", str(trial.workers),
        "--metrics-port", str(metrics_port),
        "--linger", linger,
        "--experiment", experiment,
        "--trial", trial.name,
    ]  # fmt: skip
    argv += _model_flags(spec, trial, target_url)
    if master is not None:
        if locust_address is None:
            raise ValueError("a distributed Locust trial needs its master's address")
        argv += ["--pod", str(pod), "--locust-master", locust_address]
        if pod == master:
            argv += ["--expect-workers", str(trial.pods), "--barrier-timeout", barrier_timeout]
    elif trial.pods > 1:
        argv += ["--pod", str(pod), "--barrier-timeout", barrier_timeout]
    if parse_duration(final_read) > 0:
        argv += ["--final-read", final_read]
    if result_path is not None:
        argv += ["--result-path", result_path]
    return argv
