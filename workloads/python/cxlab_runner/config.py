"""The runner's flags (workloads/CONTRACT.md) parsed into one immutable config."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from urllib.parse import urlsplit

from cxlab_contract import runner_contract

from cxlab_runner.durations import parse_duration

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

    @property
    def one_per_task(self) -> bool:
        return self.workers == self.tasks


def resolve_workers(model: str, workers: int, tasks: int) -> int:
    """Workers a trial really has: 0 means one per task, never more than tasks, and
    sequential always has one."""
    if model == "sequential":
        return 1
    return tasks if workers == 0 else min(workers, tasks)


class UsageError(Exception):
    """Bad flags: exit status 2."""


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
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
    add("--tasks", required=True, type=_positive)
    add("--workers", type=_non_negative, default=0, help="0 = one worker per task")
    add("--rtt", type=_duration, default=0.0, help="sleep/http round-trip time, e.g. 100ms")
    add("--iterations", type=_positive, default=1_000_000, help="cpu: count-loop length")
    add("--hold", type=_duration, default=0.0, help="hold: how long each task stays alive")
    add("--gomaxprocs", type=_non_negative, default=0, help="goroutines only; must stay 0 here")
    add("--target-url", default=None, help="http: the delay target")
    add("--connection", choices=CONNECTIONS, default="fresh")
    add("--metrics-port", type=_non_negative, default=0, help="0 = no metrics endpoint")
    add("--result-path", default=None)
    add("--linger", type=_duration, default=0.0, help="serve metrics this long after the tasks")
    add("--experiment", default="")
    add("--trial", default="")
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
    )
