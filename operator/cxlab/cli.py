"""`cxlab plan FILE` and `cxlab run FILE [--history DIR]`: the local backend from the command
line; `cxlab history DIR`: the trend, regressions and capacity plan of a history folder;
`cxlab compare A B`: two runs point by point; `cxlab summary` and `cxlab report`;
`cxlab operator`: the Kubernetes operator.

Exit status of `cxlab run` and `cxlab wait cx/NAME` (a pipeline's gate, docs/objectives.md):
0 every trial ran and the objectives are met (or there are none), 1 a trial failed, 2 a spec
or set-up that cannot run (reported before anything is written; for wait, no such experiment
or a spec the operator refused), 3 an objective is broken (whatever else happened), 4 the
objectives are inconclusive (the repetitions cannot tell; the message says how many would),
124 wait's --timeout passed first. `cxlab compare`: 0 when no point of B is worse than A's, 1
when one is, 2 for a source it cannot read or two runs without a point in common.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cxlab.analysis.labels import workers_label
from cxlab.analysis.objectives import bound_of, objective_name
from cxlab.compare import ComparePolicy, NothingToCompare, compare
from cxlab.conditions import condition_of
from cxlab.experiments.fields import MAX_TRIAL_TIMEOUT, MIN_TRIAL_TIMEOUT, SpecError
from cxlab.experiments.plan import PYTHON_RUNNER, floor_seconds, plan_trials, runner_command
from cxlab.experiments.resource import ConcurrencyExperiment, load_experiments, parse_experiment
from cxlab.experiments.spec import DEFAULT_RESPONSE_BYTES, ExperimentSpec
from cxlab.experiments.status import ExperimentStatus, Phase
from cxlab.experiments.target import HEADER_ENV_PREFIX
from cxlab.inputs import InputError, load_json_document
from cxlab.local.backend import LocalBackend
from cxlab.local.cores import DoesNotFit, check_fits, helper_cores, trial_cores
from cxlab.local.history_folder import load_history, save_run
from cxlab.local.progress import Progress
from cxlab.report import render_report
from cxlab.report.compare import render_comparison
from cxlab.schedules.history import HistoryEntry, history_entry
from cxlab.schedules.regression import Policy, flagged, regressions
from cxlab.schedules.spec import MAX_BASELINE_RUNS
from cxlab.table import capacity_text, comparison_text, render_summary, render_table, rtt_cell
from cxlab.trend import plan_trend, regressions_text, trend_tables
from cxlab_contract.durations import format_duration, parse_duration

TRIAL_FAILED = 1
USAGE_ERROR = 2
OBJECTIVES_BROKEN = 3
OBJECTIVES_INCONCLUSIVE = 4
TIMED_OUT = 124  # as coreutils' timeout
# Several experiments in one file: the run exits with the gravest of their statuses.
GRAVITY = (0, OBJECTIVES_INCONCLUSIVE, TRIAL_FAILED, OBJECTIVES_BROKEN)
# How often `cxlab wait` reads the experiment: a status written by a pass is seen within it.
WAIT_POLL_SECONDS = 2.0


def exit_status(status: ExperimentStatus) -> int:
    """A finished experiment's exit status (the module's docstring)."""
    verdict = condition_of(status.conditions, "ObjectivesMet")
    if verdict is not None and verdict.status == "False":
        return OBJECTIVES_BROKEN
    if status.phase != Phase.SUCCEEDED:
        return TRIAL_FAILED
    if verdict is not None and verdict.status == "Unknown":
        return OBJECTIVES_INCONCLUSIVE
    return 0


def _load(path: Path) -> list[ConcurrencyExperiment]:
    try:
        return load_experiments(path)
    except SpecError as error:
        for problem in error.problems:
            print(f"cxlab: {path}: {problem}", file=sys.stderr)
        raise SystemExit(USAGE_ERROR) from None


def plan_command(args: argparse.Namespace) -> int:
    if args.capacity is not None:
        return capacity_command(args)
    if args.file is None:
        raise _usage("cxlab plan", "give an experiment FILE, or --capacity SOURCE")
    experiments = _load(args.file)
    for experiment in experiments:
        try:
            check_fits(experiment.spec.resources)
        except DoesNotFit as error:
            raise _usage(str(args.file), f"spec.{error}") from None
    for experiment in experiments:
        print(plan_text(experiment))
    return 0


def plan_text(experiment: ConcurrencyExperiment) -> str:
    spec = experiment.spec
    trials = plan_trials(spec)
    arrivals = spec.workload.arrival is not None
    rows, total, unknown = [], 0.0, 0
    for trial in trials:
        floor = floor_seconds(spec, trial)
        if floor is None:
            unknown += 1
        else:
            total += floor
        row = [
            trial.name,
            trial.variant,
            workers_label(trial.model, trial.workers, trial.pods),
            rtt_cell(trial.rtt_seconds),
        ]
        if arrivals:
            row.append(f"{trial.rate_per_second:g}/s")
        rows.append([*row, str(trial.repetition), "?" if floor is None else format_duration(floor)])
    headers = ["trial", "model", "workers", "rtt", *(["rate"] if arrivals else []), "rep", "floor"]
    estimate = _estimate(experiment, total, unknown) + _followups_text(spec)
    if spec.workload.target is not None:
        called = "\n".join(spec.workload.target.describe(experiment.metadata.namespace))
        estimate += f"\ntarget (its latency measured, not simulated): {called}"
    return f"{render_table(headers, rows)}\n{estimate}\n\n{commands_text(experiment)}"


def _followups_text(spec: ExperimentSpec) -> str:
    """What runs after these trials, from their outcomes (not known before they run)."""
    lines = []
    search = spec.search.rate if spec.search else None
    if search is not None:
        lines.append(
            f"then per model a rate search: up to {search.max_probes} probes of one Pod, "
            f"{search.duration} each, from {search.start:g}/s"
        )
    for objective in spec.objectives or ():
        abort = ", skipping what can only do worse once broken" if objective.abort_on_fail else ""
        bound = bound_of(objective)
        named = (
            f"{objective.name} ({bound.metric} {bound.text})"
            if objective.name
            else (objective_name(objective))
        )
        lines.append(f"objective {named} at {objective.scope} point{abort}")
    capacity = spec.capacity
    if capacity is not None and (verify := capacity.verifying) is not None:
        lines.append(
            f"then the capacity plan verified: up to {verify.max_attempts} trials of "
            f"{verify.duration} at {capacity.target.rate_per_second:g} tasks/s"
        )
    return "".join(f"\n{line}" for line in lines)


def _estimate(experiment: ConcurrencyExperiment, floor: float, unknown: int) -> str:
    """How long the trials take at least: their floors, or a duration run's own time."""
    spec, count = experiment.spec, len(plan_trials(experiment.spec))
    run = spec.workload.run_seconds()
    if run is not None:
        arrival = spec.workload.arrival
        shape = "tasks arriving at a rate" if arrival else "a closed loop"
        return (
            f"{experiment.name}: {count} trials, each {shape} for {format_duration(run)}; "
            f"at least {format_duration(count * run)} in all"
        )
    estimate = (
        f"{experiment.name}: {count} trials, {spec.workload.tasks} tasks each; "
        f"floor time at least {format_duration(floor)}"
    )
    if unknown:
        depends = "your service" if experiment.spec.workload.target else "the machine"
        kind = "" if experiment.spec.workload.target else "cpu "
        estimate += f" plus {unknown} {kind}trials whose time depends on {depends}"
    return estimate


# Where a pasted http trial finds its delay target (cxlab run picks a free port itself).
PASTE_TARGET_PORT = 18080
# Where a pasted trial of several Pods serves /ready and /start (its Pods take the next ports).
PASTE_METRICS_PORT, PASTE_BARRIER = 19100, "60s"


def commands_text(experiment: ConcurrencyExperiment) -> str:
    """Each trial's runner command line, ready to paste (with .venv/bin and build/bin on PATH):
    pinned with taskset to the cores `cxlab run` would give it, the Result on stdout."""
    spec = experiment.spec
    trials = plan_trials(spec)
    taken = trial_cores(spec.resources, max(t.pods for t in trials)).all
    lines = ["# runner command lines (cxlab-runner and cxlab-runner-go):"]
    target = None
    if spec.workload.target is not None:
        target = spec.workload.target.resolved_url(experiment.metadata.namespace or "default")
        for index, header in spec.workload.target.secret_headers():
            lines.append(
                f"export {HEADER_ENV_PREFIX}{index}=...  # {header.name}: {header.shown()}"
            )
    elif spec.workload.type == "http":
        target = f"http://127.0.0.1:{PASTE_TARGET_PORT}/"
        size = spec.workload.response_bytes
        size = DEFAULT_RESPONSE_BYTES if size is None else size
        helpers = ",".join(str(c) for c in sorted(helper_cores(taken)))
        lines.append(
            f"taskset -c {helpers} cxlab-delay --listen 127.0.0.1:{PASTE_TARGET_PORT} "
            f"--response-bytes {size} &  # the delay target, first"
        )
    for trial in trials:
        cores = trial_cores(spec.resources, trial.pods).pods
        ports = [PASTE_METRICS_PORT + pod for pod in range(trial.pods)] if trial.pods > 1 else [0]
        for pod, port in enumerate(ports):
            argv = runner_command(
                spec, trial, experiment=experiment.name, target_url=target, pod=pod,
                metrics_port=port, barrier_timeout=PASTE_BARRIER,
            )  # fmt: skip
            python = tuple(argv[: len(PYTHON_RUNNER)]) == PYTHON_RUNNER
            program = "cxlab-runner" if python else argv[0]
            runner_args = argv[len(PYTHON_RUNNER) :] if python else argv[1:]
            taskset = ["taskset", "-c", ",".join(str(c) for c in sorted(cores[pod]))]
            lines.append(shlex.join([*taskset, program, *runner_args]) + (" &" if port else ""))
        if trial.pods > 1:  # the start barrier: release them together once all are up
            starts = " & ".join(f"curl -s -XPOST 127.0.0.1:{port}/start" for port in ports)
            lines.append(f"sleep 2; {starts}; wait")
    return "\n".join(lines) + "\n"


def run_command(args: argparse.Namespace) -> int:
    experiments = _load(args.file)
    if args.out and len(experiments) > 1:
        print(
            f"cxlab: {args.file}: --out names one folder but the file holds "
            f"{len(experiments)} experiments; leave it out",
            file=sys.stderr,
        )
        return USAGE_ERROR
    try:
        backends = [
            LocalBackend(
                experiment,
                args.out or Path("out") / experiment.name,
                Progress(experiment.spec.trial_count()),
                args.trial_timeout or parse_duration(experiment.spec.trial_timeout),
                allow_remote_target=args.allow_remote_target,
            )
            for experiment in experiments
        ]
    except DoesNotFit as error:
        print(f"cxlab: {args.file}: spec.{error}", file=sys.stderr)
        return USAGE_ERROR
    except FileNotFoundError as error:
        print(f"cxlab: {args.file}: {error}", file=sys.stderr)
        return USAGE_ERROR
    statuses = []
    for backend in backends:
        backend.progress.note(f"{backend.experiment.name}: {len(backend.trials)} trials")
        document = backend.run()
        print(render_summary(document))
        print(f"\nresults: {backend.result_path}\nreport:  {backend.out_dir / 'report.html'}\n")
        if args.history:
            print(f"history: {save_run(document, args.history)} (cxlab history {args.history})\n")
        statuses.append(exit_status(ExperimentStatus.read(document["status"])))
    return max(statuses, key=GRAVITY.index)


def wait_command(args: argparse.Namespace) -> int:
    """Wait for an applied experiment to finish, then exit as `cxlab run` would have."""
    if not args.source.startswith("cx/"):
        raise _usage(args.source, "name an applied experiment: cx/NAME")
    from kubernetes.client.exceptions import ApiException

    stored = _finished(args.source, args.namespace, args.timeout)
    if stored is None:
        return TIMED_OUT
    status = ExperimentStatus.read(stored["status"])
    refused = condition_of(status.conditions, "Failed")
    if refused is not None and refused.reason == "InvalidSpec":
        raise _usage(args.source, refused.message or "the operator refused its spec")
    try:  # the whole summary: its points are in ConfigMaps
        document = _read_document(args.source, args.namespace)
    except ApiException as error:
        if error.status not in (401, 403):
            raise
        print(
            f"cxlab: {args.source}: may not list its ConfigMaps ({error.status}), so no points: "
            f"the verdict alone",
            file=sys.stderr,
        )
        document = stored
    print(render_summary(document))
    return exit_status(status)


def _finished(source: str, namespace: str, timeout: float) -> dict[str, Any] | None:
    """The experiment as stored once it has finished; None if it has not within `timeout`.
    A passing apiserver error is tried again; no such experiment, or no right to read it,
    ends the wait at once (exit 2)."""
    from kubernetes.client.exceptions import ApiException

    from cxlab.controller.kube import Kube, load_configuration

    name = source.removeprefix("cx/")
    load_configuration()
    kube, deadline = Kube(), time.monotonic() + timeout
    while True:
        try:
            document = kube.get_experiment(namespace, name)
        except ApiException as error:
            if error.status in (401, 403):
                raise _usage(source, f"may not read it: {error.status} {error.reason}") from None
            print(f"cxlab: {source}: {error.status} {error.reason}; trying again", file=sys.stderr)
            document = {}
        if document is None:
            raise _usage(source, f"no ConcurrencyExperiment {name} in namespace {namespace}")
        status = ExperimentStatus.read((document or {}).get("status"))
        if document and status.finished:
            return document
        left = deadline - time.monotonic()
        if left <= 0:
            shown = status.progress.display if status.progress else ""
            print(
                f"cxlab: {source}: not finished after {format_duration(timeout)} "
                f"({status.phase or 'Pending'}, {shown})",
                file=sys.stderr,
            )
            return None
        time.sleep(min(WAIT_POLL_SECONDS, left))  # the last look at the deadline, not after


def history_command(args: argparse.Namespace) -> int:
    """The trend of a history folder, the newest run's regressions and its capacity plan."""
    try:
        entries, newest = load_history(args.folder)
    except InputError as error:
        print(f"cxlab: {error}", file=sys.stderr)
        return USAGE_ERROR
    names = [e.run for e in entries]
    if args.acknowledged and args.acknowledged not in names:
        print(
            f"cxlab: --acknowledged: {args.acknowledged!r} is not a run in {args.folder}; "
            f"name one of: {', '.join(names[-5:])}",
            file=sys.stderr,
        )
        return USAGE_ERROR
    policy = Policy(
        min_relative_change=args.min_change,
        significance=args.significance,
        baseline_runs=args.baseline_runs,
    )
    entries = flagged(entries, policy, args.acknowledged)
    found = regressions(entries, policy, args.acknowledged)
    plan = ExperimentStatus.read(newest["status"]).capacity_plan if newest else None
    newest_name = newest["metadata"]["name"] if newest else None
    parts = [
        trend_tables(entries),
        plan_trend(entries),
        regressions_text(found, newest_name),
        capacity_text(plan),
    ]
    print("\n\n".join(p for p in parts if p))
    return 0


def capacity_command(args: argparse.Namespace) -> int:
    """A measured experiment's capacity plan, and its choice as a Deployment fragment."""
    document = _read_document(args.capacity, args.namespace)
    plan = ExperimentStatus.read(document["status"]).capacity_plan
    print(capacity_text(plan))
    if plan is not None and plan.manifest:
        print(f"\n{plan.manifest}", end="")
    return 0


def summary_command(args: argparse.Namespace) -> int:
    """The terminal summary of an experiment (result.json, `-`, or cx/NAME)."""
    print(render_summary(_read_document(args.source, args.namespace)))
    return 0


def _read_document(source: str, namespace: str, label: str | None = None) -> dict[str, Any]:
    """A result.json, `-` for stdin (kubectl get cx NAME -o json), or cx/NAME from the cluster
    in KUBECONFIG: a ConcurrencyExperiment with a status, checked before anything is shown.
    Problems are told as `cxlab: LABEL: ...` (the source unless given)."""
    label = label or source
    if source.startswith("cx/"):
        from kubernetes.client.exceptions import ApiException

        from cxlab.controller.kube import read_experiment

        name = source.removeprefix("cx/")
        try:
            document = read_experiment(namespace, name)
        except ApiException as error:
            if error.status != 404:
                raise
            problem = f"no ConcurrencyExperiment {name} in namespace {namespace}"
            raise _usage(label, problem) from None
    else:
        try:
            document = load_json_document(None if source == "-" else Path(source))
        except InputError as error:
            raise _usage(label, str(error)) from None
    return _checked_document(document, label)


def _checked_document(document: dict[str, Any], label: str) -> dict[str, Any]:
    """An experiment document with a status cxlab wrote, or exit 2 saying which field is not."""
    try:
        parse_experiment(document)
    except SpecError as error:
        raise _usage(label, error.problems[0]) from None
    if not document.get("status"):
        raise _usage(label, "has no status yet: the experiment has not started")
    try:
        ExperimentStatus.read(document["status"])
    except ValidationError as error:
        raise _usage(label, _first_problem(error, "status", "a status")) from None
    return document


def _first_problem(error: ValidationError, prefix: str, what: str) -> str:
    """e.g. "status.phase: Input should be ... (not a status cxlab wrote)"."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in (prefix, *first["loc"]) if part != "")
    return f"{where}: {first['msg']} (not {what} cxlab wrote)"


def compare_command(args: argparse.Namespace) -> int:
    """B against A, point by point: 1 when a point of B is worse."""
    before = _compare_side(args.a, "A", args.namespace)
    after = _compare_side(args.b, "B", args.namespace)
    policy = ComparePolicy(significance=args.significance, min_change=args.min_change)
    try:
        comparison = compare(before, after, policy)
    except NothingToCompare as error:
        print(f"cxlab: compare: {error}", file=sys.stderr)
        return USAGE_ERROR
    print(comparison_text(comparison, (args.a, args.b)))
    if args.html:
        args.html.write_text(render_comparison(comparison, (args.a, args.b)))
        print(f"\nreport: {args.html}")
    return 1 if comparison.worse else 0


def _compare_side(source: str, which: str, namespace: str) -> HistoryEntry:
    """One side of `cxlab compare` as a history entry: cx/NAME or `-` (as `cxlab summary`
    reads them), a result.json, one history entry's JSON, DIR#RUN (a run of a history
    folder) or FILE#RUN (a run of an ExperimentSchedule's status.history)."""
    label = f"{which} {source}"
    if source.startswith("cx/") or source == "-":
        return history_entry(_read_document(source, namespace, label))
    path, run = Path(source), None
    if not path.exists() and "#" in source:
        head, run = source.rsplit("#", 1)
        path = Path(head)
    if path.is_dir():
        return _history_run(path, run, label)
    try:
        document = load_json_document(path)
    except InputError as error:
        raise _usage(label, str(error)) from None
    if run is not None:
        history = (document.get("status") or {}).get("history")
        if not isinstance(history, list):
            raise _usage(
                label,
                "has no status.history: #RUN names a run of an ExperimentSchedule "
                "(kubectl get cxs NAME -o json) or of a history folder",
            )
        return _named_run(history, run, label)
    if "run" in document and "metadata" not in document:
        return _history_entry(document, label)
    return history_entry(_checked_document(document, label))


def _history_run(folder: Path, run: str | None, label: str) -> HistoryEntry:
    """A run of a history folder (`cxlab run --history DIR`)."""
    try:
        entries, _ = load_history(folder)
    except InputError as error:
        raise _usage(label, str(error)) from None
    if run is None:
        names = ", ".join(e.run for e in entries[-3:])
        raise _usage(label, f"is a history folder: name one of its runs, {folder}#RUN ({names})")
    return _named_run([e.document() for e in entries], run, label)


def _named_run(entries: list[Any], run: str, label: str) -> HistoryEntry:
    names = [e.get("run") if isinstance(e, dict) else None for e in entries]
    if run not in names:
        shown = ", ".join(str(n) for n in names[-5:])
        raise _usage(label, f"{run!r} is not a run there; name one of: {shown or 'none'}")
    return _history_entry(entries[names.index(run)], label)


def _history_entry(document: dict[str, Any], label: str) -> HistoryEntry:
    try:
        return HistoryEntry.read(document)
    except ValidationError as error:
        raise _usage(label, _first_problem(error, "", "a history entry")) from None


def _usage(source: str, problem: str) -> SystemExit:
    print(f"cxlab: {source}: {problem}", file=sys.stderr)
    return SystemExit(USAGE_ERROR)


def report_command(args: argparse.Namespace) -> int:
    """The HTML report of an experiment: the local backend's, for a cluster experiment too."""
    document = _read_document(args.source, args.namespace)
    out = args.out or Path(f"{document['metadata']['name']}-report.html")
    out.write_text(render_report(document))
    print(out)
    return 0


def operator_command(args: argparse.Namespace) -> int:
    import kopf

    # Read by the handlers' configuration at import.
    os.environ["CXLAB_OPERATOR_METRICS_PORT"] = str(args.metrics_port)
    from cxlab.controller import handlers  # registers the handlers with kopf
    from cxlab.controller.kube import load_configuration
    from cxlab.controller.leader import LeaderElection, LeaseTimes, StandbyHealth, identity
    from cxlab.controller.metrics import OperatorMetrics

    kopf.configure(verbose=args.verbose)  # kopf's log format, as `kopf run` sets it up
    if not args.verbose:  # "Handler 'experiment_changed' succeeded", for every event: noise
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    handlers.METRICS = OperatorMetrics()
    handlers.NAMESPACES = tuple(args.namespace or ())
    if args.metrics_port:  # a standby's too: Prometheus sees both replicas, and which leads
        handlers.METRICS.serve(args.metrics_port)
    election = None
    if args.leader_elect:
        load_configuration()
        namespace = args.lease_namespace or os.environ.get("POD_NAMESPACE") or "default"
        times = LeaseTimes(duration=args.lease_duration, renew_deadline=args.lease_duration * 2 / 3)
        election = LeaderElection(namespace, args.lease_name, identity(), times)
        standing_by = StandbyHealth(args.health_port)  # alive while it waits
        try:
            election.acquire(threading.Event())
        finally:
            standing_by.close()
        handlers.METRICS.leader.set(1)
        election.keep(lost=_lease_lost, stop=threading.Event())
    else:
        handlers.METRICS.leader.set(1)
    try:
        kopf.run(
            # Replicas take turns through the Lease (--leader-elect), not kopf's peering,
            # which pauses every replica of the same priority when it sees another.
            standalone=True,
            clusterwide=not args.namespace,
            namespaces=args.namespace or (),
            liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz"
            if args.health_port
            else None,
        )
    finally:
        if election is not None:
            election.release()  # a clean stop hands over at once
    return 0


def _lease_lost() -> None:
    """Another replica may take over now: stop acting at once, mid-pass or not (every pass
    is safe to cut short); the restarted process stands by."""
    print("cxlab operator: lost the leader Lease; exiting", file=sys.stderr, flush=True)
    os._exit(1)


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cxlab", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sources = "a result.json, - (kubectl get cx NAME -o json), or cx/NAME from the cluster"
    plan = commands.add_parser(
        "plan",
        help="print the trials and the floor-time estimate; with --capacity, a measured "
        "experiment's capacity plan as a Deployment fragment",
    )
    plan.add_argument("file", type=Path, nargs="?")
    plan.add_argument("--capacity", metavar="SOURCE", help=sources)
    plan.add_argument("-n", "--namespace", default="default")
    plan.set_defaults(handler=plan_command)
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

    history = commands.add_parser(
        "history", help="print a history folder's trend, regressions and capacity plan"
    )
    history.add_argument("folder", type=Path)
    history.add_argument("--acknowledged", help="a run accepted as the new normal")
    history.add_argument("--baseline-runs", type=_baseline_runs, default=Policy.baseline_runs)
    _policy_flags(history)
    history.set_defaults(handler=history_command)

    compared = commands.add_parser(
        "compare",
        help="compare two runs point by point; exit 1 when a point of B is worse than A's",
    )
    either = (
        "a result.json, one history entry's JSON, DIR#RUN (a history folder's run), FILE#RUN "
        "(a run in an ExperimentSchedule's status.history), - or cx/NAME"
    )
    compared.add_argument("a", metavar="A", help=f"the run before: {either}")
    compared.add_argument("b", metavar="B", help="the run after, the same")
    compared.add_argument("-n", "--namespace", default="default", help="of cx/NAME")
    _policy_flags(compared)
    compared.add_argument("--html", type=Path, metavar="FILE", help="also write an HTML page")
    compared.set_defaults(handler=compare_command)

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

    summary = commands.add_parser("summary", help="print an experiment's summary tables")
    summary.add_argument("source", help=sources)
    summary.add_argument("-n", "--namespace", default="default")
    summary.set_defaults(handler=summary_command)
    report = commands.add_parser("report", help="write an experiment's HTML report")
    report.add_argument("source", help=sources)
    report.add_argument("-n", "--namespace", default="default")
    report.add_argument("--out", type=Path, help="the HTML file (default NAME-report.html)")
    report.set_defaults(handler=report_command)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("cxlab: interrupted; the results so far are in the results folder", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
