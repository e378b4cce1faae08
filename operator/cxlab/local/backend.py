"""Run a whole experiment on this machine: plan → pinned runner subprocess per trial →
validated Result → status document (rewritten after every trial, so an interrupted run
keeps what it measured) → summary and HTML report."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cxlab.local.cores import check_fits, helper_cores, trial_cores
from cxlab.local.delay_target import delay_target, find_program, free_port
from cxlab.local.progress import Progress
from cxlab.plan import PYTHON_RUNNER, Trial, plan_trials, runner_command
from cxlab.report import render_report
from cxlab.results import ResultError, classify, parse_result
from cxlab.scrape import tasks_done
from cxlab.spec import DEFAULT_RESPONSE_BYTES, GO_MODELS, ConcurrencyExperiment
from cxlab.status import Live, build_status, spec_json, trial_entry
from cxlab.summary import TrialOutcome

POLL_SECONDS = 0.5
# A scrape takes the runner's GIL from its task threads, a dozen context switches each: the
# first comes after this long and then this often, so a short trial runs undisturbed (the
# GIL seed's 0.6 s count loops show a bare program's switches) and a long one shows progress.
SCRAPE_SECONDS = 2.0


def experiment_document(
    experiment: ConcurrencyExperiment, status: dict[str, Any]
) -> dict[str, Any]:
    """The experiment as `kubectl get cx NAME -o json` would show it."""
    return {
        "apiVersion": experiment.api_version,
        "kind": experiment.kind,
        "metadata": {"name": experiment.name},
        "spec": _spec_document(experiment),
        "status": status,
    }


def _spec_document(experiment: ConcurrencyExperiment) -> dict[str, Any]:
    return experiment.spec.model_dump(by_alias=True, exclude_none=True)


def local_status(
    experiment: ConcurrencyExperiment,
    trials: list[Trial],
    outcomes: list[TrialOutcome],
    scraped: set[str],
    old: dict[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    """The status after these outcomes, by the operator's builder: a local run has no
    generation (1), no Pods and no attempts to keep."""
    entries = []
    for outcome in outcomes:
        entry = trial_entry(outcome)
        entry["metricsScraped"] = outcome.trial.name in scraped
        entries.append(entry)
    return build_status(
        spec=experiment.spec,
        trials=trials,
        entries=entries,
        live=Live(),
        old=old,
        started_spec=spec_json(_spec_document(experiment)),
        generation=1,
        now=now,
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
    ) -> None:
        self.experiment = experiment
        self.clock = clock
        self.status: dict[str, Any] | None = None  # as last written
        self.scraped: set[str] = set()  # trials whose /metrics answered while they ran
        self.spec = experiment.spec
        self.out_dir = out_dir
        self.progress = progress
        self.trial_timeout = trial_timeout
        self.trials = plan_trials(self.spec)
        # Checked before anything is written: a run that cannot start leaves no files.
        check_fits(self.spec.resources)
        self.cores = trial_cores(self.spec.resources.cpu)
        self.go_runner = ""
        if any(t.model in GO_MODELS for t in self.trials):
            self.go_runner = find_program("cxlab-runner-go")
        if self.spec.workload.type == "http":
            find_program("cxlab-delay")

    @property
    def result_path(self) -> Path:
        return self.out_dir / "result.json"

    def run(self) -> dict[str, Any]:
        """Every trial in plan order; returns the final document."""
        (self.out_dir / "trials").mkdir(parents=True, exist_ok=True)
        outcomes: list[TrialOutcome] = []
        with contextlib.ExitStack() as stack:
            target_url = None
            if self.spec.workload.type == "http":
                response_bytes = self.spec.workload.response_bytes
                target_url = stack.enter_context(
                    delay_target(
                        helper_cores(self.cores),
                        DEFAULT_RESPONSE_BYTES if response_bytes is None else response_bytes,
                    )
                )
            self._save(outcomes)
            for trial in self.trials:
                outcome = self.run_trial(trial, target_url)
                outcomes.append(outcome)
                self.progress.finished(outcome)
                self._save(outcomes)
        document = self._save(outcomes)
        report = self.out_dir / "report.html"
        _write_atomically(report, render_report(document))
        return document

    def _save(self, outcomes: list[TrialOutcome]) -> dict[str, Any]:
        self.status = local_status(
            self.experiment, self.trials, outcomes, self.scraped, self.status, self.clock()
        )
        document = experiment_document(self.experiment, self.status)
        _write_atomically(self.result_path, json.dumps(document, indent=2) + "\n")
        return document

    def command(self, trial: Trial, port: int, target_url: str | None) -> list[str]:
        argv = runner_command(
            self.spec,
            trial,
            experiment=self.experiment.name,
            metrics_port=port,
            result_path=str(self.out_dir / "trials" / f"{trial.name}.json"),
            target_url=target_url,
        )
        if tuple(argv[: len(PYTHON_RUNNER)]) == PYTHON_RUNNER:
            return [sys.executable, *argv[1:]]
        return [self.go_runner, *argv[1:]]

    def run_trial(self, trial: Trial, target_url: str | None) -> TrialOutcome:
        port = free_port()
        cores = self.cores
        process = subprocess.Popen(
            self.command(trial, port, target_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, cores),
        )
        started = time.monotonic()
        next_scrape = SCRAPE_SECONDS
        while True:
            try:
                stdout, stderr = process.communicate(timeout=POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > self.trial_timeout:
                    process.kill()
                    process.communicate()
                    return TrialOutcome(
                        trial, None, f"timed out after {self.trial_timeout:.0f} s and was killed"
                    )
                if elapsed < next_scrape:
                    continue
                next_scrape = elapsed + SCRAPE_SECONDS
                tasks = self.spec.workload.tasks
                done = tasks_done("127.0.0.1", port, timeout=POLL_SECONDS)
                if done is not None:
                    self.scraped.add(trial.name)
                self.progress.running(trial, done, tasks, elapsed)
            except BaseException:
                process.kill()
                process.communicate()
                raise
        if process.returncode != 0:
            last = stderr.strip().splitlines()[-1:] or ["no message"]
            return TrialOutcome(trial, None, f"runner exited {process.returncode}: {last[0]}")
        try:
            result = parse_result(stdout)
        except ResultError as error:
            return TrialOutcome(trial, None, str(error))
        return classify(trial, result, cores)
