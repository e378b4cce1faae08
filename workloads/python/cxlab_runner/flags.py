"""The runner's flags (workloads/CONTRACT.md, Flags): argparse's parser and each value's
type, checked against the contract's limits (the spec repeats them)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from cxlab_contract import runner_contract
from cxlab_contract.arrivals import Stage, parse_stages
from cxlab_contract.durations import parse_duration

PYTHON_MODELS = runner_contract().python_models
WORKLOADS = runner_contract().workloads
CONNECTIONS = runner_contract().connections
DEFAULT_OK_STATUS = "200-299"
POOLS = ("onDemand", "prestarted")


class UsageError(Exception):
    """Bad flags: exit status 2."""


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


def ok_statuses(text: str) -> frozenset[int]:
    """--ok-status: codes and inclusive ranges, comma-separated (200-299,304), each 100-599."""
    statuses: set[int] = set()
    for item in text.split(","):
        low, dash, high = item.strip().partition("-")
        bounds = (low, high) if dash else (low, low)
        if not all(re.fullmatch(r"[0-9]{3}", bound.strip()) for bound in bounds):
            raise argparse.ArgumentTypeError(
                f"{text!r}: want status codes and ranges, comma-separated (200-299,304)"
            )
        first, last = (int(bound) for bound in bounds)
        if not 100 <= first <= last <= 599:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r} in {text!r}: each code is 100..599, a range low-high"
            )
        statuses.update(range(first, last + 1))
    return frozenset(statuses)


# RFC 9110 5.1: a field name is a token; 5.5: a value is visible characters, spaces and tabs


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cxlab-runner",
        description="Run one cxlab trial and print its Result JSON (see workloads/CONTRACT.md).",
    )
    add = parser.add_argument
    _shape_flags(add)
    _http_flags(add)
    _trial_flags(add)
    return parser


_Add = Callable[..., Any]  # ArgumentParser.add_argument


def _shape_flags(add: _Add) -> None:
    """What the trial runs: the model, the workload, counted or timed, closed or open."""
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


def _http_flags(add: _Add) -> None:
    """The http workload's request (http_flags.py checks them)."""
    add("--target-url", default=None, help="http: the delay target, or the service itself")
    contract = runner_contract()
    add("--target-mode", choices=contract.target_modes, default="delay", help="http: or direct")
    add("--method", choices=contract.http_methods, default="GET", help="http: the request's method")
    add("--header", action="append", default=None, help="http: 'Name: value', repeatable")
    add("--header-env", action="append", default=None, help="http: 'Name=VAR', repeatable")
    add("--body", default="", help="http: the request body, sent with Content-Length")
    add("--ok-status", type=ok_statuses, default=DEFAULT_OK_STATUS, help="http: 200-299,304")
    add(
        "--request-timeout",
        type=_within("request-timeout"),
        default=0.0,
        help="http: the most a whole request may take; 0s = the runner's allowance (300s)",
    )
    add("--tls-ca", default=None, help="http to https://: a PEM file of CA certificates")
    add("--insecure-skip-verify", action="store_true", help="http to https://: check nothing")
    add("--connection", choices=CONNECTIONS, default="fresh")


def _trial_flags(add: _Add) -> None:
    """The trial around the tasks: metrics, the Result, the barrier, Locust's roles."""
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
