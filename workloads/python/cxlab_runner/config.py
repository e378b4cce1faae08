"""The runner's flags (workloads/CONTRACT.md) parsed into one immutable config."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from cxlab_contract import runner_contract
from cxlab_contract.arrivals import RateProfile, Stage, parse_stages
from cxlab_contract.durations import parse_duration
from cxlab_contract.result import resolve_workers

PYTHON_MODELS = runner_contract().python_models
WORKLOADS = runner_contract().workloads
CONNECTIONS = runner_contract().connections
DEFAULT_OK_STATUS = "200-299"
# The flags that shape an http request (CONTRACT.md, Flags), with their defaults: any of them
# set for another workload is a usage error.
HTTP_ONLY: dict[str, object] = {
    "target-mode": "delay",
    "method": "GET",
    "header": None,
    "header-env": None,
    "body": "",
    "ok-status": DEFAULT_OK_STATUS,
    "request-timeout": 0.0,
    "tls-ca": None,
    "insecure-skip-verify": False,
}


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


def _ok_statuses(text: str) -> frozenset[int]:
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
# (and obs-text, bytes 0x80-0xFF), never a control character such as a line break.
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")


def _header_name(flag: str, name: str) -> str:
    """A --header or --header-env name: a token, and none the runner sets itself."""
    if not _TOKEN.fullmatch(os.fsencode(name)):
        raise UsageError(f"--{flag}: {name!r} is not a header name (an RFC 9110 token)")
    if name.lower() in runner_contract().forbidden_headers:
        raise UsageError(
            f"--{flag}: the runner sets {name} itself, or it changes the framing "
            f"(not one of {', '.join(sorted(runner_contract().forbidden_headers))})"
        )
    return name


def _headers(literal: list[str], from_env: list[str]) -> tuple[tuple[str, bytes], ...]:
    """--header 'Name: value' and --header-env 'Name=VAR' (the value of the environment
    variable VAR, which no message ever shows), one line per name: a name given twice is sent
    once, its values joined by ", " as RFC 9110 5.3 combines a list field."""
    most = runner_contract().max_headers
    if len(literal) + len(from_env) > most:
        raise UsageError(
            f"--header and --header-env: {len(literal) + len(from_env)} headers, at most {most}"
        )
    lines: list[tuple[str, bytes]] = []
    for text in literal:
        name, colon, value = text.partition(":")
        if not colon:
            raise UsageError(f"--header {text!r}: want 'Name: value'")
        raw = os.fsencode(value).strip(b" \t")
        if not _FIELD_VALUE.fullmatch(raw):
            raise UsageError(
                f"--header {_header_name('header', name)}: its value holds a control "
                "character (a line break?), which a header value cannot"
            )
        lines.append((_header_name("header", name), raw))
    for text in from_env:
        name, equals, variable = text.partition("=")
        if not equals or not variable:
            raise UsageError(f"--header-env {text!r}: want 'Name=VAR' (an environment variable)")
        name = _header_name("header-env", name)
        secret = os.environ.get(variable, "")
        if not secret:
            state = "empty" if variable in os.environ else "unset"
            raise UsageError(f"--header-env {name}={variable}: the environment variable is {state}")
        raw = os.fsencode(secret).strip(b" \t")
        if not raw or not _FIELD_VALUE.fullmatch(raw):
            raise UsageError(
                f"--header-env {name}={variable}: the variable's value holds a control "
                "character (a line break?) or only spaces, which a header value cannot"
            )
        lines.append((name, raw))
    combined: dict[str, tuple[str, list[bytes]]] = {}
    for name, raw in lines:
        combined.setdefault(name.lower(), (name, []))[1].append(raw)
    return tuple((name, b", ".join(values)) for name, values in combined.values())


def _tls_ca(path: str) -> str:
    """--tls-ca: the PEM text of the CA certificates, read once and checked here, so a bad
    file is a usage error and not a failed task each time."""
    import ssl  # here, not at the top: gevent patches ssl after the flags are read

    try:
        with open(path, "rb") as file:
            pem = file.read().decode("ascii")
    except OSError as error:
        raise UsageError(f"--tls-ca {path}: cannot read it ({error.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"--tls-ca {path}: not a PEM file (not text)") from None
    try:
        ssl.create_default_context(cadata=pem)
    except (ssl.SSLError, ValueError) as error:
        raise UsageError(f"--tls-ca {path}: no PEM CA certificate in it ({error})") from None
    return pem


def _http(args: argparse.Namespace) -> dict[str, Any]:
    """The http flags, checked, as RunnerConfig's fields; refused for other workloads."""
    if args.workload != "http":
        # (argparse parses a default given as text: --ok-status's is a set of codes)
        defaults = {**HTTP_ONLY, "ok-status": _ok_statuses(DEFAULT_OK_STATUS)}
        for flag, default in defaults.items():
            if getattr(args, flag.replace("-", "_")) != default:
                raise UsageError(f"--{flag} applies to the http workload only")
        return {}
    if not args.target_url:
        raise UsageError("--target-url is required for the http workload")
    url = urlsplit(args.target_url)
    schemes = runner_contract().target_url_schemes
    try:
        port_ok = url.port is None or url.port >= 0  # raises ValueError out of 0-65535
    except ValueError:
        port_ok = False
    if url.scheme not in schemes or not url.hostname or not port_ok:
        raise UsageError(
            f"--target-url must be an {' or '.join(f'{s}://' for s in schemes)} URL with a "
            f"host (and a port 0-65535), got {args.target_url!r}"
        )
    if url.username is not None or url.password is not None:
        raise UsageError(
            "--target-url: no user or password in the URL (they would be in the runner's "
            "arguments): send them with --header-env Authorization=VAR"
        )
    tls = url.scheme == "https"
    if args.tls_ca and args.insecure_skip_verify:
        raise UsageError("--insecure-skip-verify checks no certificate: leave --tls-ca out")
    for flag in ("tls-ca", "insecure-skip-verify"):
        if getattr(args, flag.replace("-", "_")) and not tls:
            raise UsageError(f"--{flag} applies to an https:// --target-url only")
    body = os.fsencode(args.body)
    most = runner_contract().limits["body"].max
    if len(body) > most:
        raise UsageError(f"--body is {len(body)} bytes: at most {most}")
    # Percent-encode what a request line cannot carry (spaces, non-ASCII), as Go's URL does;
    # an escape already there stays.
    safe = "!#$%&'()*+,/:;=?@[]~"
    target_url = url._replace(path=quote(url.path, safe), query=quote(url.query, safe)).geturl()
    return {
        "target_url": target_url,
        "target_mode": args.target_mode,
        "method": args.method,
        "headers": _headers(args.header or [], args.header_env or []),
        "body": body,
        "ok_statuses": args.ok_status,
        "request_timeout": args.request_timeout,
        "tls_ca_pem": _tls_ca(args.tls_ca) if args.tls_ca else None,
        "insecure_skip_verify": args.insecure_skip_verify,
    }


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
    add("--target-url", default=None, help="http: the delay target, or the service itself")
    contract = runner_contract()
    add("--target-mode", choices=contract.target_modes, default="delay", help="http: or direct")
    add("--method", choices=contract.http_methods, default="GET", help="http: the request's method")
    add("--header", action="append", default=None, help="http: 'Name: value', repeatable")
    add("--header-env", action="append", default=None, help="http: 'Name=VAR', repeatable")
    add("--body", default="", help="http: the request body, sent with Content-Length")
    add("--ok-status", type=_ok_statuses, default=DEFAULT_OK_STATUS, help="http: 200-299,304")
    add(
        "--request-timeout",
        type=_within("request-timeout"),
        default=0.0,
        help="http: the most a whole request may take; 0s = the runner's allowance (300s)",
    )
    add("--tls-ca", default=None, help="http to https://: a PEM file of CA certificates")
    add("--insecure-skip-verify", action="store_true", help="http to https://: check nothing")
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
    http = _http(args)
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
