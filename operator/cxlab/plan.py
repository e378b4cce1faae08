"""Spec → trials, and trial → runner command line. Pure: no processes, no cluster, so the
local backend and the operator plan the same experiment identically."""

from __future__ import annotations

from dataclasses import dataclass

from cxlab.spec import GO_MODELS, ExperimentSpec
from cxlab_runner.config import resolve_workers
from cxlab_runner.durations import format_duration, parse_duration
from cxlab_runner.result import floor_seconds as runner_floor_seconds

PYTHON_RUNNER = ("python3", "-m", "cxlab_runner")
GO_RUNNER = ("cxlab-runner-go",)


@dataclass(frozen=True)
class Trial:
    """One point of the matrix: one process locally, one Pod on a cluster."""

    index: int
    model: str
    workers: int  # as in the spec: 0 = one worker per task
    gomaxprocs: int | None  # goroutines only; 0 = the Go default
    rtt_seconds: float | None  # sleep and http only
    repetition: int  # 1-based

    @property
    def name(self) -> str:
        """Stable, DNS-label-safe id, e.g. 007-threads-w100-rtt100ms-r2."""
        parts = [f"{self.index:03d}", self.model, f"w{self.workers}"]
        if self.gomaxprocs is not None:
            parts.append(f"p{self.gomaxprocs}")
        if self.rtt_seconds is not None:
            parts.append("rtt" + format_duration(self.rtt_seconds).replace(".", "p"))
        parts.append(f"r{self.repetition}")
        return "-".join(parts).replace("µ", "u")

    @property
    def variant(self) -> str:
        """The model as a line on a plot: goroutines differ by GOMAXPROCS."""
        if self.gomaxprocs is None:
            return self.model
        return f"{self.model} (GOMAXPROCS {self.gomaxprocs or 'default'})"


def plan_trials(spec: ExperimentSpec) -> list[Trial]:
    """Every trial of the experiment in run order.

    Repetitions are the outer loop so a drift of the machine (a noisy neighbour, thermal
    throttling) spreads over all points instead of biasing one of them.
    """
    trials: list[Trial] = []
    for repetition in range(1, spec.repetitions + 1):
        for rtt in spec.workload.rtt_seconds():
            for entry in spec.models:
                for gomaxprocs in entry.gomaxprocs_axis():
                    for workers in entry.workers:
                        trials.append(
                            Trial(len(trials), entry.model, workers, gomaxprocs, rtt, repetition)
                        )
    return trials


def floor_seconds(spec: ExperimentSpec, trial: Trial) -> float | None:
    """The physical lower bound of the trial's wall time, None where there is none (cpu)."""
    workload = spec.workload
    return runner_floor_seconds(
        workload.type,
        workload.tasks,
        resolve_workers(trial.model, trial.workers, workload.tasks),
        trial.rtt_seconds or 0.0,
        parse_duration(workload.hold or "0s"),
    )


def runner_command(
    spec: ExperimentSpec,
    trial: Trial,
    *,
    experiment: str,
    metrics_port: int = 0,
    result_path: str | None = None,
    linger: str = "0s",
    target_url: str | None = None,
) -> list[str]:
    """The argv of the runner for one trial (the runner contract, workloads/CONTRACT.md)."""
    workload = spec.workload
    runner = GO_RUNNER if trial.model in GO_MODELS else PYTHON_RUNNER
    argv = [
        *runner,
        "--model", trial.model,
        "--workload", workload.type,
        "--tasks", str(workload.tasks),
        "--workers", str(trial.workers),
        "--metrics-port", str(metrics_port),
        "--linger", linger,
        "--experiment", experiment,
        "--trial", trial.name,
    ]  # fmt: skip
    if trial.rtt_seconds is not None:
        argv += ["--rtt", format_duration(trial.rtt_seconds)]
    if workload.iterations is not None:
        argv += ["--iterations", str(workload.iterations)]
    if workload.hold is not None:
        argv += ["--hold", workload.hold]
    if trial.gomaxprocs is not None:
        argv += ["--gomaxprocs", str(trial.gomaxprocs)]
    pool = next(m.pool for m in spec.models if m.model == trial.model)
    if pool is not None:
        argv += ["--pool", pool]
    if spec.syscalls:
        argv += ["--syscalls"]
    if workload.type == "http":
        if target_url is None:
            raise ValueError("the http workload needs the delay target's URL")
        argv += ["--target-url", target_url, "--connection", workload.connection or "fresh"]
    if result_path is not None:
        argv += ["--result-path", result_path]
    return argv
