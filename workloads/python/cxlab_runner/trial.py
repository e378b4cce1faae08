"""One trial from flags to Result: set up measurement and the metrics endpoint, run the
model's task phase, write the Result, linger so a scraper sees the final values."""

from __future__ import annotations

import gc
import signal
import time

from cxlab_contract.result import Syscalls, encode
from cxlab_runner import measure, models
from cxlab_runner.barrier import StartBarrier
from cxlab_runner.config import RunnerConfig
from cxlab_runner.metrics import MetricsServer, TrialCollector
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.result import build_result, runtime_version, write


def run_trial(config: RunnerConfig, syscalls: Syscalls | None = None) -> None:
    """syscalls: why system calls were asked for but cannot be counted, for the Result."""
    measure.raise_open_files_limit()
    run_model = models.load(config.model)
    recorder = TaskRecorder()
    barrier = StartBarrier(config.barrier_timeout)
    phase = TaskPhase(measure.Sampler(), barrier)
    info = {
        "experiment": config.experiment,
        "trial": config.trial,
        "pod_index": str(config.pod),
        "model": config.model,
        "workload": config.workload,
        "workers": str(config.workers),
        "gomaxprocs": "",
        "runtime": runtime_version(config.model),
    }
    collector = TrialCollector(info, config.tasks, recorder, phase)
    server = MetricsServer(config.metrics_port, collector, barrier)
    try:
        # The runner's own objects (its imports, prometheus_client) out of the collector's
        # way: a bare program has none, and a full collection would stop every task thread.
        gc.freeze()
        workers = run_model(config, recorder, phase)
        # A SIGTERM from here on only ends the linger: held back while the Result is written,
        # delivered (if one came) once the linger starts.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        result = build_result(config, recorder, phase, workers)
        result["syscalls"] = syscalls
        write(encode(result), config.result_path)
        _linger(config.linger)
    finally:
        server.close()


def _linger(seconds: float) -> None:
    """Serve the final metrics for a while. SIGTERM ends the linger, not the trial: the
    Result is written, so the runner exits 0, as the Go runner does (the contract)."""
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        time.sleep(seconds)
    except SystemExit as stop:  # raised by the SIGTERM handler (__main__.py)
        if stop.code != 128 + signal.SIGTERM:
            raise
