"""Run a whole experiment on this machine: plan → pinned runner subprocess per trial →
validated Result → status document (rewritten after every trial, so an interrupted run
keeps what it measured) → summary and HTML report."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from cxlab.analysis.outcome import (
    ResultError,
    TrialOutcome,
    classify,
    failure_bound,
    parse_result,
)
from cxlab.analysis.service_figures import completed_requests
from cxlab.barrier import is_ready, release
from cxlab.experiments.followups import trials_of
from cxlab.experiments.plan import (
    PYTHON_RUNNER,
    Trial,
    locust_master,
    plan_trials,
    pod_indexes,
    runner_command,
    trial_spec,
)
from cxlab.experiments.record import Live, build_status, trial_entry
from cxlab.experiments.resource import ConcurrencyExperiment
from cxlab.experiments.spec import DEFAULT_RESPONSE_BYTES, GO_MODELS, spec_json
from cxlab.experiments.status import ExperimentStatus
from cxlab.local.cores import (
    available_cores,
    check_fits,
    helper_cores,
    service_cores,
    trial_cores,
)
from cxlab.local.delay_target import delay_target, find_program, free_port
from cxlab.local.progress import Progress
from cxlab.local.service import check_local_service
from cxlab.local.service_runs import ServiceRuns
from cxlab.local.target import local_target
from cxlab.report import render_report
from cxlab.scrape import final_read, is_done, tasks_done
from cxlab_contract.durations import format_duration

POLL_SECONDS = 0.5
# A trial's processes are ready within a second or two (imports); this bounds one that
# never is. Readiness is polled often: the wait is the runners' start-up, not the poll's.
BARRIER_SECONDS = 60.0
BARRIER_POLL_SECONDS = 0.02
# A scrape takes the runner's GIL from its task threads, a dozen context switches each: the
# first comes after this long and then this often, so a short trial runs undisturbed (the
# GIL seed's 0.6 s count loops show a bare program's switches) and a long one shows progress.
SCRAPE_SECONDS = 2.0
# After its tasks a runner waits this long at most for the backend's final read of its
# /metrics (read at the next poll; bounds a backend that never comes).
FINAL_READ_SECONDS = 10.0


def experiment_document(
    experiment: ConcurrencyExperiment, status: ExperimentStatus
) -> dict[str, Any]:
    """The experiment as `kubectl get cx NAME -o json` would show it."""
    return {
        "apiVersion": experiment.api_version,
        "kind": experiment.kind,
        "metadata": {"name": experiment.name},
        "spec": _spec_document(experiment),
        "status": status.document(),
    }


def _spec_document(experiment: ConcurrencyExperiment) -> dict[str, Any]:
    return experiment.spec.model_dump(by_alias=True, exclude_none=True)


def local_status(
    experiment: ConcurrencyExperiment,
    trials: list[Trial],
    outcomes: list[TrialOutcome],
    scraped: set[str],
    old: ExperimentStatus | None,
    now: datetime,
    unverified: str | None = None,
) -> ExperimentStatus:
    """The status after these outcomes, by the operator's builder: a local run has no
    generation (1), no Pods and no attempts to keep."""
    entries = []
    for outcome in outcomes:
        entry = trial_entry(outcome)
        entry.metrics_scraped = outcome.trial.name in scraped
        entries.append(entry)
    return build_status(
        unverified=unverified,
        spec=experiment.spec,
        trials=trials,
        entries=entries,
        live=Live(),
        old=old,
        started_spec=spec_json(_spec_document(experiment)),
        generation=1,
        now=now,
        host=socket.gethostname(),
    )


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


class LocalBackend:
    def __init__(
        self,
        experiment: ConcurrencyExperiment,
        out_dir: Path,
        progress: Progress,
        trial_timeout: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        allow_remote_target: bool = False,
    ) -> None:
        self.experiment = experiment
        self.clock = clock
        self.status: ExperimentStatus | None = None  # as last written
        self.scraped: set[str] = set()  # trials whose final /metrics were read (or answered)
        self.spec = experiment.spec
        self.out_dir = out_dir
        self.progress = progress
        self.trial_timeout = trial_timeout
        self.trials = plan_trials(self.spec)  # and, as they end, what they call for
        self.unverified: str | None = None
        # Checked before anything is written: a run that cannot start leaves no files.
        check_fits(self.spec.resources)
        check_local_service(self.spec)  # before the target: service.deployment names the cause
        target = self.spec.workload.target
        self.target = (
            local_target(target, os.environ, allow_remote_target) if target is not None else None
        )
        # The delay target keeps off the cores of the trial with the most Pods.
        most = max(len(pod_indexes(t)) for t in self.trials)
        self.cores = trial_cores(self.spec.resources, most).all
        # spec.service's process keeps off every core a trial may take
        self.service_cores = service_cores(self.cores) if self.spec.service else set()
        self.go_runner = ""
        if any(t.model in GO_MODELS for t in self.trials):
            self.go_runner = find_program("cxlab-runner-go")
        if self.spec.workload.delay_target:
            find_program("cxlab-delay")

    @property
    def result_path(self) -> Path:
        return self.out_dir / "result.json"

    def run(self) -> dict[str, Any]:
        """Every trial in plan order; returns the final document."""
        (self.out_dir / "trials").mkdir(parents=True, exist_ok=True)
        outcomes: list[TrialOutcome] = []
        with contextlib.ExitStack() as stack:
            target_url = self.target.url if self.target is not None else None
            if self.spec.workload.delay_target:
                response_bytes = self.spec.workload.response_bytes
                target_url = stack.enter_context(
                    delay_target(
                        helper_cores(self.cores),
                        DEFAULT_RESPONSE_BYTES if response_bytes is None else response_bytes,
                    )
                )
            services = None
            if self.spec.service is not None and target_url is not None:
                services = stack.enter_context(
                    ServiceRuns(self.spec, target_url, self.service_cores)
                )
            self._save(outcomes)
            while (trial := self._next(outcomes)) is not None:
                outcome = self.measured_trial(trial, target_url, services)
                outcomes.append(outcome)
                self.progress.finished(outcome)
                self._save(outcomes)
        document = self._save(outcomes)
        report = self.out_dir / "report.html"
        _write_atomically(report, render_report(document))
        return document

    def _next(self, outcomes: list[TrialOutcome]) -> Trial | None:
        """The next trial to run: the sweep's in order, then a capacity plan's verification
        once the sweep has ended (followups.trials_of), None when all have run. Trials that
        abortOnFail skips are recorded as skipped on the way (outcomes grows)."""
        while True:
            followed = trials_of(self.spec, [trial_entry(o) for o in outcomes], self._fits)
            self.progress.total = len(followed.trials)
            self.trials, self.unverified = followed.trials, followed.unverified
            done = {o.trial.name for o in outcomes}
            waiting = [t for t in self.trials if t.name not in done]
            skipping = [t for t in waiting if t.name in followed.skipped]
            for trial in skipping:
                outcome = TrialOutcome(trial, None, skipped=followed.skipped[trial.name])
                outcomes.append(outcome)
                self.progress.finished(outcome)
            if not skipping:
                return waiting[0] if waiting else None

    def _fits(self, trial: Trial) -> str | None:
        """Why this machine cannot run a verification of so many Pods on cores of their own,
        or of a service's plan of several replicas (cxlab run starts one process)."""
        if trial.service_replicas > 1:
            return (
                f"the plan's {trial.service_replicas} replicas: cxlab run starts one process per "
                f"variant, so a plan of more than one replica is verified on a cluster"
            )
        whole = self.spec.resources.whole_cpus or 1
        usable = len(available_cores()) - self.spec.workload.delay_target
        if trial.pods * whole > usable:
            return (
                f"the plan's {trial.pods} Pods x {whole} CPU need {trial.pods * whole} cores; "
                f"this machine lets cxlab use {usable} for them: too big to verify here (verify "
                f"on a cluster)"
            )
        return None

    def _save(self, outcomes: list[TrialOutcome]) -> dict[str, Any]:
        self.status = local_status(
            self.experiment, self.trials, outcomes, self.scraped, self.status, self.clock(),
            self.unverified,
        )  # fmt: skip
        document = experiment_document(self.experiment, self.status)
        _write_atomically(self.result_path, json.dumps(document, indent=2) + "\n")
        return document

    def command(
        self,
        trial: Trial,
        port: int,
        target_url: str | None,
        pod: int = 0,
        locust_address: str | None = None,
    ) -> list[str]:
        name = trial.name if trial.pods == 1 else f"{trial.name}-p{pod}"
        argv = runner_command(
            self.spec,
            trial,
            experiment=self.experiment.name,
            metrics_port=port,
            result_path=str(self.out_dir / "trials" / f"{name}.json"),
            target_url=target_url,
            pod=pod,
            barrier_timeout=format_duration(BARRIER_SECONDS),
            final_read=format_duration(FINAL_READ_SECONDS),
            locust_address=locust_address,
        )
        if tuple(argv[: len(PYTHON_RUNNER)]) == PYTHON_RUNNER:
            return [sys.executable, *argv[1:]]
        return [self.go_runner, *argv[1:]]

    def measured_trial(
        self, trial: Trial, target_url: str | None, services: ServiceRuns | None
    ) -> TrialOutcome:
        """The trial, and against a service subject its variant started first (a variant
        that cannot start fails its trials) and the service's own figures over the trial."""
        if services is None:
            return self.run_trial(trial, target_url)
        if problem := services.ready_for(trial):
            return TrialOutcome(trial, None, problem)
        meter = services.meter().start()
        outcome = self.run_trial(trial, target_url)
        figures = meter.stop(completed_requests(outcome.result) if outcome.result else 0)
        if problem := services.exited():
            return TrialOutcome(trial, None, problem)
        return dataclasses.replace(outcome, service=figures)

    def run_trial(self, trial: Trial, target_url: str | None) -> TrialOutcome:
        """The trial's runner processes (one per Pod, and a distributed Locust trial's
        master), each on its own cores where the machine has them; several wait at the start
        barrier until all are ready (or, with Locust, for their master)."""
        pods = pod_indexes(trial)
        cores = trial_cores(self.spec.resources, len(pods))
        ports = [free_port() for _ in pods]
        master = locust_master(trial)  # a distributed Locust trial: its master goes first
        locust_address = f"127.0.0.1:{free_port()}" if master is not None else None
        order = [master, *(p for p in pods if p != master)] if master is not None else pods
        with contextlib.ExitStack() as stack:
            started: dict[int, _Runner] = {}
            for pod in order:
                output = stack.enter_context(tempfile.TemporaryFile("w+"))
                errors = stack.enter_context(tempfile.TemporaryFile("w+"))
                process = subprocess.Popen(
                    self.command(trial, ports[pod], target_url, pod, locust_address),
                    stdout=output,
                    stderr=errors,
                    text=True,
                    # a target's secret headers, by the names --header-env gives the runner
                    env={**os.environ, **self.target.env} if self.target else None,
                    preexec_fn=functools.partial(os.sched_setaffinity, 0, cores.pods[pod]),
                )
                started[pod] = _Runner(process, ports[pod], output, errors)
            runners = [started[pod] for pod in pods]
            stack.callback(_kill, runners)
            # Several Pods start together: released at the barrier, or by their Locust master.
            if trial.pods > 1 and master is None and (problem := _release(runners)):
                return TrialOutcome(trial, None, problem)
            if problem := self._wait(trial, runners):
                return TrialOutcome(trial, None, problem)
            results = []
            for pod, runner in enumerate(runners):
                whose = f"Pod {pod}: " if trial.pods > 1 else ""
                if runner.process.returncode != 0:
                    return TrialOutcome(
                        trial, None, f"{whose}runner exited {runner.process.returncode}: "
                        f"{runner.last_error()}"
                    )  # fmt: skip
                try:
                    results.append(parse_result(runner.stdout()))
                except ResultError as error:
                    return TrialOutcome(trial, None, f"{whose}{error}")
        return classify(
            trial, results, cores.pods, cores.unpinned, max_failure_ratio=failure_bound(self.spec)
        )

    def _wait(self, trial: Trial, runners: list[_Runner]) -> str | None:
        """Until every runner has exited, showing progress, and reading each one's final
        metrics once its tasks have ended; why not, if the trial timed out."""
        started = time.monotonic()
        next_scrape = SCRAPE_SECONDS
        while any(r.process.poll() is None for r in runners):
            time.sleep(POLL_SECONDS)
            elapsed = time.monotonic() - started
            if elapsed > self.trial_timeout:
                return f"timed out after {self.trial_timeout:.0f} s and was killed"
            if any(r.final_read is None for r in runners):
                self._final_reads(trial, runners)
            if elapsed < next_scrape:
                continue
            next_scrape = elapsed + SCRAPE_SECONDS
            # A distributed Locust master (after the trial's N runners) counts only at its end.
            counted = runners[: trial.pods]
            counts = [tasks_done("127.0.0.1", r.port, timeout=POLL_SECONDS) for r in counted]
            done = None if None in counts else sum(c or 0 for c in counts)
            if done is not None:
                self.scraped.add(trial.name)
            tasks = trial_spec(self.spec, trial).workload.tasks
            self.progress.running(trial, done, tasks, elapsed)
        return None

    def _final_reads(self, trial: Trial, runners: list[_Runner]) -> None:
        """Each runner whose tasks have ended is read once (it waits for that read, then
        exits): however short the trial, its final metrics are read."""
        for runner in runners:
            if runner.final_read is None and runner.done():
                runner.final_read = final_read("127.0.0.1", runner.port, timeout=POLL_SECONDS)
                if runner.final_read:  # it exits now: no poll's sleep to wait for that
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        runner.process.wait(timeout=POLL_SECONDS)
        if all(r.final_read for r in runners):
            self.scraped.add(trial.name)


@dataclass
class _Runner:
    """One runner process of a trial, its output in files (no pipe to fill up and stall it)."""

    process: subprocess.Popen[str]
    port: int  # its metrics: /ready and /start of the barrier, progress, /done, final read
    output: IO[str]
    errors: IO[str]
    final_read: bool | None = None  # tried once its tasks ended: whether it said finished

    def done(self) -> bool:
        """Its tasks have ended (its Result is out; /done, so the next read is final)."""
        if self.process.poll() is not None or os.fstat(self.output.fileno()).st_size == 0:
            return False
        return is_done("127.0.0.1", self.port, timeout=POLL_SECONDS)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stdout(self) -> str:
        self.output.seek(0)
        return self.output.read()

    def last_error(self) -> str:
        self.errors.seek(0)
        return (self.errors.read().strip().splitlines()[-1:] or ["no message"])[0]


def _release(runners: list[_Runner]) -> str | None:
    """Release the runners from the start barrier once every one is ready; why not, if one
    exits or is not ready within BARRIER_SECONDS."""
    deadline = time.monotonic() + BARRIER_SECONDS
    waiting = list(enumerate(runners))
    while waiting:
        for pod, runner in list(waiting):
            if runner.process.poll() is not None:
                return (
                    f"Pod {pod}: runner exited {runner.process.returncode} before the start "
                    f"barrier: {runner.last_error()}"
                )
            if is_ready(runner.address, timeout=POLL_SECONDS):
                waiting.remove((pod, runner))
        if waiting and time.monotonic() > deadline:
            pods = ", ".join(str(pod) for pod, _ in waiting)
            return f"Pod(s) {pods} not ready at the start barrier after {BARRIER_SECONDS:.0f} s"
        if waiting:
            time.sleep(BARRIER_POLL_SECONDS)
    failed = release([r.address for r in runners])
    if failed:
        return f"the start barrier could not release {', '.join(failed)}"
    return None


def _kill(runners: list[_Runner]) -> None:
    for runner in runners:
        if runner.process.poll() is None:
            runner.process.kill()
        runner.process.wait()
