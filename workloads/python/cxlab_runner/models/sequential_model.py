"""Every task in turn on the main thread: the baseline every other model is compared with."""

from __future__ import annotations

from cxlab_runner.config import RunnerConfig
from cxlab_runner.models import timed
from cxlab_runner.openloop import run_sequential
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import blocking_task


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    if config.duration:
        phase.times = run_sequential(config, recorder, phase, blocking_task(config))
        return 1
    one = timed(blocking_task(config), recorder)
    phase.begin()
    for _ in range(config.tasks):
        one()
    phase.end()
    return 1
