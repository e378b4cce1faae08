"""The runner's flags (workloads/CONTRACT.md) parsed into one immutable config: the flags
themselves in flags.py and http_flags.py, the checks that span flags here."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from cxlab_contract import runner_contract
from cxlab_contract.arrivals import RateProfile
from cxlab_contract.durations import parse_duration
from cxlab_contract.result import resolve_workers
from cxlab_runner.flags import UsageError, build_parser
from cxlab_runner.http_flags import http_fields

__all__ = ["RunnerConfig", "UsageError", "build_parser", "parse_config", "resolve_pool"]


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
    # http: the request each task sends (CONTRACT.md, Flags)
    target_mode: str = "delay"  # delay: ?rtt= added to --target-url; direct: sent as given
    method: str = "GET"
    # (name, value): --header and --header-env in their order, one line per name. repr=False:
    # a --header-env value is a secret, never printed.
    headers: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)
    body: bytes = field(default=b"", repr=False)
    ok_statuses: frozenset[int] = frozenset(range(200, 300))
    request_timeout: float = 0.0  # 0 = the runner's own allowance (workloads.py)
    tls_ca_pem: str | None = field(default=None, repr=False)  # --tls-ca's certificates
    insecure_skip_verify: bool = False

    @property
    def one_per_task(self) -> bool:
        """One worker for each task (for each arrival); never in a closed loop for a time."""
        return self.workers == self.tasks and not self.closed_for_duration

    @property
    def closed_for_duration(self) -> bool:
        return self.duration > 0 and self.arrival is None


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


def parse_config(argv: list[str]) -> RunnerConfig:
    args = build_parser().parse_args(argv)
    if args.gomaxprocs:
        raise UsageError(f"--gomaxprocs applies to goroutines only, not to {args.model}")
    http = http_fields(args)
    _check_locust(args)
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
        target_url=http.pop("target_url", args.target_url),
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
        **http,
    )


def _check_locust(args: argparse.Namespace) -> None:
    """The flags of Locust and of its distributed mode, which only locust takes."""
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


def _duration_run(args: argparse.Namespace) -> tuple[float, RateProfile | None, tuple[float, ...]]:
    """The run's duration, an arrival run's rate profile and schedule; UsageError naming the
    flag for every combination CONTRACT.md refuses."""
    timed = bool(args.duration or args.stages)
    _check_counted_or_timed(args, timed)
    _check_model_for_the_shape(args)
    if not timed:
        return 0.0, None, ()
    limits = runner_contract().limits
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


def _check_counted_or_timed(args: argparse.Namespace, timed: bool) -> None:
    """A run is counted (--tasks) or timed (--duration, --stages), and the flags of the other
    shapes are refused: the arrival flags without --arrival, --warmup in a counted run."""
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
    if args.warmup and not timed:
        raise UsageError("--warmup applies to duration runs (--duration or --stages)")


def _check_model_for_the_shape(args: argparse.Namespace) -> None:
    """What a model cannot run: arrivals for locust, a fork per arrival, a duration for a
    distributed Locust trial, one worker per task in a closed loop for a time."""
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
