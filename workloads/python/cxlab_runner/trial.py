"""One trial from flags to Result: set up measurement and the metrics endpoint, run the
model's task phase, write the Result, then keep the endpoint up for the final read and the
linger."""

from __future__ import annotations

import gc
import os

from cxlab_contract.result import Syscalls, encode
from cxlab_runner import measure, models
from cxlab_runner.barrier import StartBarrier
from cxlab_runner.config import RunnerConfig
from cxlab_runner.end import UNDER_STRACE, EndOfTasks
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
    rate_at = config.profile.rate_at if config.profile else None
    collector = TrialCollector(info, config.tasks, recorder, phase, rate_at)
    end = EndOfTasks()
    server = MetricsServer(config.metrics_port, collector, barrier, end)
    try:
        # The runner's own objects (its imports, prometheus_client) out of the collector's
        # way: a bare program has none, and a full collection would stop every task thread.
        gc.freeze()
        workers = run_model(config, recorder, phase)
        end.sigterm_ends_the_wait()
        result = build_result(config, recorder, phase, workers)
        result["syscalls"] = syscalls
        written = write(encode(result), config.result_path)
        # Under strace GET /result stays 503: the trial's Result is the outer runner's.
        end.finish(None if os.environ.get(UNDER_STRACE) else written)
        end.after_tasks(config.linger, config.final_read)
    finally:
        server.close()
