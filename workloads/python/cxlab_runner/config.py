"""The runner's flags (workloads/CONTRACT.md) parsed into one immutable config."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cxlab_contract import runner_contract
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

    @property
    def one_per_task(self) -> bool:
        return self.workers == self.tasks


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
    add("--tasks", required=True, type=_within("tasks"))
    add("--workers", type=_within("workers"), default=0, help="0 = one worker per task")
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
    return RunnerConfig(
        model=args.model,
        workload=args.workload,
        tasks=args.tasks,
        workers=resolve_workers(args.model, args.workers, args.tasks),
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
    )
