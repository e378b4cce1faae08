"""One module per concurrency model. Each exposes run(config, recorder, phase) -> workers
actually started, calls phase.begin()/phase.end() around its task phase, and is imported only
when chosen (importing gevent or locust changes the process)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

from cxlab_runner.config import RunnerConfig
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import BlockingTask

RunModel = Callable[[RunnerConfig, TaskRecorder, TaskPhase], int]


def load(model: str) -> RunModel:
    module = importlib.import_module(f"cxlab_runner.models.{model}_model")
    run: RunModel = module.run
    return run


def timed(task: BlockingTask, recorder: TaskRecorder) -> Callable[[], None]:
    """The task plus its bookkeeping: a counter tick, two clock reads and an append."""
    started, ok, failed, clock = recorder.started, recorder.ok, recorder.failed, time.perf_counter

    def one() -> None:
        started()
        begin = clock()
        try:
            task()
        except Exception as error:
            failed(error)
            return
        ok(clock() - begin)

    return one
