"""The command line: every command's flags, each command's handler set as `args.handler`
(called with the parsed flags and the start-up Settings, cxlab.cli.main)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from cxlab.cli.compare import compare_command
from cxlab.cli.history import history_command
from cxlab.cli.operator import operator_command
from cxlab.cli.plan import plan_command
from cxlab.cli.report import report_command
from cxlab.cli.run import run_command
from cxlab.cli.summary import summary_command
from cxlab.cli.wait import wait_command
from cxlab.experiments.fields import MAX_TRIAL_TIMEOUT, MIN_TRIAL_TIMEOUT
from cxlab.schedules.regression import Policy
from cxlab.schedules.spec import MAX_BASELINE_RUNS
from cxlab_contract.durations import parse_duration

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]

SOURCES = "a result.json, - (kubectl get cx NAME -o json), or cx/NAME from the cluster"
EITHER = (
    "a result.json, one history entry's JSON, DIR#RUN (a history folder's run), FILE#RUN "
    "(a run in an ExperimentSchedule's status.history), - or cx/NAME"
)


def build_parser() -> argparse.ArgumentParser:
    import cxlab.cli

    description = (cxlab.cli.__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog="cxlab", description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (_plan, _run, _history, _compare, _wait, _summary, _report, _operator):
        add(commands)
    return parser


def _plan(commands: Commands) -> None:
    plan = commands.add_parser(
        "plan",
        help="print the trials and the floor-time estimate (for an ExperimentSchedule, its "
        "next firings too); with --capacity, a measured experiment's capacity plan as a "
        "Deployment fragment",
    )
    plan.add_argument("file", type=Path, nargs="?")
    plan.add_argument("--capacity", metavar="SOURCE", help=SOURCES)
    plan.add_argument("-n", "--namespace", default="default")
    plan.set_defaults(handler=plan_command)


def _run(commands: Commands) -> None:
    run = commands.add_parser("run", help="run the experiment on this machine")
    run.add_argument("file", type=Path)
    run.add_argument("--out", type=Path, help="results folder (default out/<experiment name>)")
    run.add_argument(
        "--trial-timeout",
        type=_trial_timeout,
        help="seconds before a trial is killed and counted as failed (default: spec.trialTimeout)",
    )
    run.add_argument(
        "--allow-remote-target",
        action="store_true",
        help="let workload.target.url name a host other than this machine (loopback): be "
        "sure the service is yours to load",
    )
    run.set_defaults(handler=run_command)
    run.add_argument(
        "--history",
        type=Path,
        help="also keep the result in this folder, for `cxlab history` (trend, regressions)",
    )


def _history(commands: Commands) -> None:
    history = commands.add_parser(
        "history", help="print a history folder's trend, regressions and capacity plan"
    )
    history.add_argument("folder", type=Path)
    history.add_argument("--acknowledged", help="a run accepted as the new normal")
    history.add_argument("--baseline-runs", type=_baseline_runs, default=Policy.baseline_runs)
    _policy_flags(history)
    history.set_defaults(handler=history_command)


def _compare(commands: Commands) -> None:
    compared = commands.add_parser(
        "compare",
        help="compare two runs point by point; exit 1 when a point of B is worse than A's",
    )
    compared.add_argument("a", metavar="A", help=f"the run before: {EITHER}")
    compared.add_argument("b", metavar="B", help="the run after, the same")
    compared.add_argument("-n", "--namespace", default="default", help="of cx/NAME")
    _policy_flags(compared)
    compared.add_argument("--html", type=Path, metavar="FILE", help="also write an HTML page")
    compared.set_defaults(handler=compare_command)


def _wait(commands: Commands) -> None:
    wait = commands.add_parser(
        "wait",
        help="wait for an applied experiment to finish; exit as cxlab run does (0 objectives "
        "met, 1 a trial failed, 3 an objective broken, 4 inconclusive, 124 timed out)",
    )
    wait.add_argument("source", metavar="cx/NAME")
    wait.add_argument("-n", "--namespace", default="default")
    wait.add_argument(
        "--timeout", type=_wait_timeout, default=parse_duration("24h"),
        help="give up after this long (a duration, default 24h): exit 124",
    )  # fmt: skip
    wait.set_defaults(handler=wait_command)


def _summary(commands: Commands) -> None:
    summary = commands.add_parser("summary", help="print an experiment's summary tables")
    summary.add_argument("source", help=SOURCES)
    summary.add_argument("-n", "--namespace", default="default")
    summary.set_defaults(handler=summary_command)


def _report(commands: Commands) -> None:
    report = commands.add_parser("report", help="write an experiment's HTML report")
    report.add_argument("source", help=SOURCES)
    report.add_argument("-n", "--namespace", default="default")
    report.add_argument("--out", type=Path, help="the HTML file (default NAME-report.html)")
    report.set_defaults(handler=report_command)


def _operator(commands: Commands) -> None:
    operator = commands.add_parser("operator", help="run the Kubernetes operator (kopf)")
    operator.add_argument(
        "--namespace", action="append", help="watch only this namespace (repeatable)"
    )
    operator.add_argument(
        "--health-port", type=int, default=8080, help="liveness probe port (0 = none)"
    )
    operator.add_argument(
        "--metrics-port", type=int, default=8081, help="the operator's /metrics (0 = none)"
    )
    operator.add_argument("--verbose", action="store_true", help="log every handler call")
    operator.add_argument(
        "--leader-elect",
        action="store_true",
        help="run only while holding a Lease: one active replica, the others stand by",
    )
    operator.add_argument(
        "--lease-namespace", help="the Lease's namespace (default: $POD_NAMESPACE, else default)"
    )
    operator.add_argument("--lease-name", default="cxlab-operator", help="the Lease's name")
    operator.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        help="seconds without renewal before a standby takes over (the takeover time)",
    )
    operator.set_defaults(handler=operator_command)


def _policy_flags(parser: argparse.ArgumentParser) -> None:
    """--min-change and --significance, as the schedules' regression policy has them."""
    parser.add_argument(
        "--min-change",
        type=_fraction,
        default=Policy.min_relative_change,
        help="the smallest relative change that counts (default 0.10)",
    )
    parser.add_argument(
        "--significance",
        type=_fraction,
        default=Policy.significance,
        help="the largest adjusted p-value that counts (default 0.01)",
    )


def _trial_timeout(text: str) -> float:
    """--trial-timeout in seconds, within spec.trialTimeout's bounds."""
    least, most = parse_duration(MIN_TRIAL_TIMEOUT), parse_duration(MAX_TRIAL_TIMEOUT)
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not least <= seconds <= most:
        raise argparse.ArgumentTypeError(f"must be {least:g}..{most:g} seconds, got {text}")
    return seconds


def _wait_timeout(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (30m, 2h)") from None
    if not 1 <= seconds <= parse_duration("168h"):
        raise argparse.ArgumentTypeError(f"{text} is not between 1s and 168h")
    return seconds


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _baseline_runs(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_BASELINE_RUNS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_BASELINE_RUNS}")
    return int(text)
