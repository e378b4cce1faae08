"""The runner's flags (workloads/CONTRACT.md) parsed into one immutable config."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cxlab_contract import runner_contract
from cxlab_contract.arrivals import RateProfile, Stage, parse_stages
from cxlab_contract.durations import parse_duration
from cxlab_contract.result import resolve_workers

PYTHON_MODELS = runner_contract().python_models
WORKLOADS = runner_contract().workloads
CONNECTIONS = runner_contract().connections


@dataclass(frozen=True)
class RunnerConfig:
    model: str
    workload: str
    tasks: int
    workers: int  # resolved: never 0, never more than tasks
    rtt: float
    iterations: int
    hold: float
    target_url: str | None
    connection: str
    metrics_port: int
    result_path: str | None
    linger: float
    experiment: str
    trial: str
    pool: str | None = None  # threads and processes: "onDemand" or "prestarted"
    syscalls: bool = False  # count system calls with strace (slows the trial)
    pod: int = 0  # this runner's index among its trial's Pods
    barrier_timeout: float = 0.0  # wait this long at the start barrier; 0 = no barrier
    final_read: float = 0.0  # after the Result, wait this long for GET /metrics?final=1
    locust_master: str | None = None  # locust: the master's host:port (or its own, with:)
    expect_workers: int = 0  # locust: > 0 = the master of this many workers
    # A duration run (CONTRACT.md, Duration runs): > 0 = run for this long, not for `tasks`.
    duration: float = 0.0
    arrival: str | None = None  # uniform or poisson: an arrival run; None: a closed loop
    on_busy: str = "queue"
    warmup: float = 0.0
    max_lag: float = 0.01
    profile: RateProfile | None = None  # an arrival run's rate
    schedule: tuple[float, ...] = ()  # an arrival run's scheduled offsets; tasks = its length

    @property
    def one_per_task(self) -> bool:
        """One worker for each task (for each arrival); never in a closed loop for a time."""
        return self.workers == self.tasks and not self.closed_for_duration

    @property
    def closed_for_duration(self) -> bool:
        return self.duration > 0 and self.arrival is None


class UsageError(Exception):
    """Bad flags: exit status 2."""


POOLS = ("onDemand", "prestarted")


def resolve_pool(model: str, pool: str) -> str | None:
    """The pool a threads or processes trial runs: each model's stdlib executor by default
    (ThreadPoolExecutor starts threads on demand; ProcessPoolExecutor with fork starts all).
    None for the other models, which have no pool to choose."""
    if model == "threads":
        return pool or "onDemand"
    if model == "processes":
        if pool == "onDemand":
            raise UsageError(
                "--pool onDemand applies to threads only: processes run a prestarted pool, "
                "as ProcessPoolExecutor does with fork"
            )
        return "prestarted"
    if pool:
        raise UsageError(f"--pool applies to threads and processes only, not to {model}")
    return None


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _within(flag: str) -> Callable[[str], Any]:
    """The flag's type, checked against the contract's limits (the spec has the same)."""
    limit = runner_contract().limits[flag]
    if isinstance(limit.min, str):
        low, high = parse_duration(limit.min), parse_duration(limit.max)
        read: Callable[[str], Any] = _duration
    else:
        low, high, read = limit.min, limit.max, _non_negative

    def check(text: str) -> Any:
        value = read(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: {flag} must be {limit.min}..{limit.max}"
            )
        return value

    return check


def _rate(text: str) -> float:
    limit = runner_contract().limits["rate"]
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate (arrivals per second)") from None
    if not limit.min <= value <= limit.max:  # NaN fails both
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: rate must be {limit.min}..{limit.max}"
        )
    return value


def _stages(text: str) -> tuple[Stage, ...]:
    limits = runner_contract().limits
    count, each = limits["stages"], limits["stage-duration"]
    try:
        stages = parse_stages(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not count.min <= len(stages) <= count.max:
        raise argparse.ArgumentTypeError(f"{len(stages)} stages: want {count.min}..{count.max}")
    rate = limits["rate"]
    for stage in stages:
        if not parse_duration(each.min) <= stage.seconds <= parse_duration(each.max):
            raise argparse.ArgumentTypeError(f"a stage lasts {each.min}..{each.max}")
        if not rate.min <= stage.target <= rate.max:
            raise argparse.ArgumentTypeError(f"a stage's rate must be {rate.min}..{rate.max}")
    return stages


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cxlab-runner",
        description="Run one cxlab trial and print its Result JSON (see workloads/CONTRACT.md).",
    )
    add = parser.add_argument
    add("--model", required=True, choices=PYTHON_MODELS)
    add("--workload", required=True, choices=WORKLOADS)
    add("--tasks", type=_within("tasks"), default=0, help="required unless --duration/--stages")
    add("--workers", type=_within("workers"), default=0, help="0 = one worker per task")
    add("--duration", type=_within("duration"), default=0.0, help="run for this long instead")
    add("--arrival", choices=runner_contract().arrival_processes, default=None, help="open loop")
    add("--rate", type=_rate, default="0", help="--arrival: arrivals per second")
    add("--stages", type=_stages, default=None, help="--arrival: D1:R1,D2:R2 ramps of the rate")
    add("--on-busy", choices=runner_contract().on_busy, default="queue", help="--arrival: all busy")
    add("--warmup", type=_within("warmup"), default=0.0, help="left out of the latency figures")
    add("--max-lag", type=_within("max-lag"), default=0.01, help="--arrival: lag p99 bound")
    add("--seed", type=_within("seed"), default="1", help="--arrival poisson: the gaps' seed")
    add("--rtt", type=_within("rtt"), default=0.0, help="sleep/http round-trip time, e.g. 100ms")
    add("--iterations", type=_within("iterations"), default=1_000_000, help="cpu: loop length")
    add("--hold", type=_within("hold"), default=0.0, help="hold: how long each task stays alive")
    add("--gomaxprocs", type=_within("gomaxprocs"), default=0, help="goroutines only; 0 here")
    add("--target-url", default=None, help="http: the delay target")
    add("--connection", choices=CONNECTIONS, default="fresh")
    add("--metrics-port", type=_non_negative, default=0, help="0 = no metrics endpoint")
    add("--result-path", default=None)
    add("--linger", type=_duration, default=0.0, help="serve metrics this long after the tasks")
    add(
        "--final-read",
        type=_within("final-read"),
        default=0.0,
        help="after the tasks, wait this long for one GET /metrics?final=1; 0s = do not wait",
    )
    add("--experiment", default="")
    add("--trial", default="")
    add("--pod", type=_within("pod"), default=0, help="index among the trial's Pods")
    add("--locust-master", default=None, help="locust: the master's host:port")
    add(
        "--expect-workers",
        type=_within("expect-workers"),
        default=0,
        help="locust: run as the master of N workers",
    )
    add(
        "--barrier-timeout",
        type=_within("barrier-timeout"),
        default=0.0,
        help="wait at the start barrier this long (POST /start releases it); 0s = none",
    )
    add(
        "--pool", choices=[*POOLS, ""], default="", help="threads: onDemand (default) or prestarted"
    )
    add("--syscalls", action="store_true", help="count system calls with strace -c -f")
    return parser


def parse_config(argv: list[str]) -> RunnerConfig:
    args = build_parser().parse_args(argv)
    if args.gomaxprocs:
        raise UsageError(f"--gomaxprocs applies to goroutines only, not to {args.model}")
    if args.workload == "http" and not args.target_url:
        raise UsageError("--target-url is required for the http workload")
    if args.workload == "http":
        url = urlsplit(args.target_url)
        schemes = runner_contract().target_url_schemes
        if url.scheme not in schemes or not url.hostname:
            raise UsageError(
                f"--target-url must be an http:// URL with a host, got {args.target_url!r}"
            )
    if args.model == "locust" and args.workload != "http":
        raise UsageError("locust runs HTTP users: it needs --workload http")
    if (args.locust_master or args.expect_workers) and args.model != "locust":
        raise UsageError("--locust-master and --expect-workers apply to locust only")
    if args.expect_workers and not (args.locust_master and args.barrier_timeout):
        raise UsageError(
            "--expect-workers needs --locust-master (where to listen) and --barrier-timeout "
            "(how long to wait for the workers)"
        )
    if args.locust_master:
        host, _, port = args.locust_master.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--locust-master must be host:port, got {args.locust_master!r}")
    if args.barrier_timeout and not args.metrics_port:
        raise UsageError(
            "--barrier-timeout needs --metrics-port: the barrier is released over HTTP"
        )
    if args.final_read and not args.metrics_port:
        raise UsageError("--final-read needs --metrics-port: the final read is a GET /metrics")
    duration, profile, schedule = _duration_run(args)
    tasks = len(schedule) if profile else args.tasks
    if duration and profile is None:  # a closed loop for a time: its workers are the workers
        workers = 1 if args.model == "sequential" else args.workers
    else:
        workers = resolve_workers(args.model, args.workers, tasks)
    return RunnerConfig(
        model=args.model,
        workload=args.workload,
        tasks=tasks,
        workers=workers,
        rtt=args.rtt,
        iterations=args.iterations,
        hold=args.hold,
        target_url=args.target_url,
        connection=args.connection,
        metrics_port=args.metrics_port,
        result_path=args.result_path,
        linger=args.linger,
        experiment=args.experiment,
        trial=args.trial,
        pool=resolve_pool(args.model, args.pool),
        syscalls=args.syscalls,
        pod=args.pod,
        barrier_timeout=args.barrier_timeout,
        final_read=args.final_read,
        locust_master=args.locust_master,
        expect_workers=args.expect_workers,
        duration=duration,
        arrival=args.arrival,
        on_busy=args.on_busy,
        warmup=args.warmup,
        max_lag=args.max_lag,
        profile=profile,
        schedule=schedule,
    )


def _duration_run(args: argparse.Namespace) -> tuple[float, RateProfile | None, tuple[float, ...]]:
    """The run's duration, an arrival run's rate profile and schedule; UsageError naming the
    flag for every combination CONTRACT.md refuses."""
    limits = runner_contract().limits
    timed = bool(args.duration or args.stages)
    if args.tasks and timed:
        raise UsageError("--tasks counts a run; --duration and --stages time one: give one")
    if not args.tasks and not timed:
        raise UsageError("--tasks is required (or --duration, or --arrival with --stages)")
    if args.stages and args.duration:
        raise UsageError("--stages last their sum: leave --duration out beside them")
    if args.stages and not args.arrival:
        raise UsageError("--stages ramp an arrival rate: they need --arrival")
    if args.arrival is None:
        given = {"rate": args.rate != 0, "on-busy": args.on_busy != "queue",
                 "max-lag": args.max_lag != 0.01, "seed": args.seed != 1}  # fmt: skip
        for flag in (flag for flag, set_ in given.items() if set_):
            raise UsageError(f"--{flag} applies to arrival runs: it needs --arrival")
    elif not timed:
        raise UsageError("--arrival needs --duration or --stages: how long tasks arrive")
    if args.arrival and args.model == "locust":
        raise UsageError(
            "--arrival: locust's users are closed loops (each waits for its answer before its "
            "next request), so they cannot keep an arrival rate"
        )
    if args.duration and (args.locust_master or args.expect_workers):
        raise UsageError(
            "--duration: a distributed Locust trial ends on its master's aggregated task "
            "count; run a closed loop for a time in one Locust runner, or give --tasks"
        )
    if args.arrival and args.model == "processes" and args.workers == 0:
        raise UsageError(
            "--workers 0 with --arrival: processes would fork one process per arrival, which "
            "measures fork, not the model; give --workers"
        )
    if args.duration and not args.arrival and args.workers == 0 and args.model != "sequential":
        raise UsageError("--workers 0 means one per task: a closed loop for --duration needs W")
    if args.warmup and not timed:
        raise UsageError("--warmup applies to duration runs (--duration or --stages)")
    if not timed:
        return 0.0, None, ()
    profile = None
    if args.arrival:
        profile = RateProfile(args.rate, args.stages or (), args.duration)
    duration = profile.duration if profile else args.duration
    total = parse_duration(limits["duration"].max)
    if not parse_duration(limits["duration"].min) <= duration <= total:
        raise UsageError(
            f"the stages last {duration:g}s: "
            f"want {limits['duration'].min}..{limits['duration'].max}"
        )
    if args.warmup >= duration:
        raise UsageError(f"--warmup {args.warmup:g}s must be shorter than the run ({duration:g}s)")
    if profile is None:
        return duration, None, ()
    expected, tasks = profile.expected_arrivals(), limits["tasks"]
    if not tasks.min <= expected <= tasks.max:
        raise UsageError(
            f"--rate over the run gives {expected:.6g} arrivals: want {tasks.min}..{tasks.max} "
            "(raise or lower the rate or the duration)"
        )
    return duration, profile, tuple(profile.schedule(args.arrival, args.seed))
