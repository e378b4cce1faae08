"""What `cxlab plan FILE` prints for an experiment: its trials and the floor-time estimate,
what runs after them, and each trial's runner command line, ready to paste."""

from __future__ import annotations

import shlex

from cxlab.analysis.labels import workers_label
from cxlab.analysis.objectives import bound_of, objective_name
from cxlab.experiments.plan import PYTHON_RUNNER, floor_seconds, plan_trials, runner_command
from cxlab.experiments.rate_search import probed_models
from cxlab.experiments.resource import ConcurrencyExperiment
from cxlab.experiments.spec import DEFAULT_RESPONSE_BYTES, ExperimentSpec
from cxlab.experiments.target import HEADER_ENV_PREFIX
from cxlab.local.cores import helper_cores, trial_cores
from cxlab.table import render_table, rtt_cell
from cxlab_contract.durations import format_duration


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
    estimate = _estimate(experiment, total, unknown) + _followups_text(spec) + _service_text(spec)
    if spec.workload.target is not None:
        called = "\n".join(spec.workload.target.describe(experiment.metadata.namespace))
        estimate += f"\ntarget (its latency measured, not simulated): {called}"
    return f"{render_table(headers, rows)}\n{estimate}\n\n{commands_text(experiment)}"


def _service_text(spec: ExperimentSpec) -> str:
    """The subject and its variants, one after another, each what it changes."""
    service = spec.service
    if service is None:
        return ""
    target = spec.workload.target
    if service.deployment is not None and target is not None and target.service is not None:
        subject = (
            f"Deployment {service.deployment}, each variant a copy of it behind a copy of "
            f"Service {target.service.name}"
        )
    else:
        subject = f"the command {shlex.join(service.command or [])}"
    lines = [f"\nservice under test: {subject}; the variants in turn:"]
    lines += [f"  sv{v.index} {v.name}: {v.changes()}" for v in service.variant_list()]
    return "\n".join(lines)


def _followups_text(spec: ExperimentSpec) -> str:
    """What runs after these trials, from their outcomes (not known before they run)."""
    lines = []
    lines += _search_lines(spec)
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


def _search_lines(spec: ExperimentSpec) -> list[str]:
    """The rate search: what a probe is, and when it runs (per service variant: right after
    the variant's own trials)."""
    search = spec.search.rate if spec.search else None
    latency = spec.probe_latency
    if search is None or latency is None:
        return []
    arrival = spec.workload.arrival
    process = arrival.process if arrival is not None else "poisson"
    probes = (
        f"up to {search.max_probes} rates of one Pod, {search.duration} each ({process} "
        f"arrivals, queueing), from {search.start:g}/s, each boundary rate {search.repeats} "
        f"time{'s' if search.repeats != 1 else ''}, holding {latency.percentile} ≤ {latency.max}"
    )
    if spec.service is None:
        return [f"then per model a rate search: {probes}"]
    models = ", ".join(m.model for m in probed_models(spec))
    grows = (
        f", a probe its generator bound again with twice the Pods (up to {search.max_pods})"
        if search.max_pods > 1 else ""
    )  # fmt: skip
    lines = [f"then per variant and model a rate search: {probes}{grows}; in turn:"]
    lines += [
        f"  sv{v.index} {v.name}: its trials, then its search ({models}) against it"
        for v in spec.service.variant_list()
    ]
    return lines


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
