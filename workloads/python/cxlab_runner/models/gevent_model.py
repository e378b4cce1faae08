"""gevent: W greenlets pulling tasks, or (W = tasks) one greenlet per task. The process was
monkey-patched before anything else was imported (see __main__), so time.sleep and sockets
in the shared blocking workloads yield to the hub."""

from __future__ import annotations

import gevent

from cxlab_runner.config import RunnerConfig
from cxlab_runner.models import timed
from cxlab_runner.openloop import run_blocking
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import blocking_task


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    if config.duration:
        workers, phase.times = run_blocking(
            config, recorder, phase, lambda: blocking_task(config), gevent.spawn, gevent.joinall
        )
        return workers
    remaining = iter(range(config.tasks))  # greenlets never switch inside next()

    def worker() -> None:
        one = timed(blocking_task(config), recorder)
        for _ in remaining:
            one()

    phase.begin()
    if config.one_per_task:
        one = timed(blocking_task(config), recorder)
        gevent.joinall([gevent.spawn(one) for _ in range(config.tasks)])
    else:
        gevent.joinall([gevent.spawn(worker) for _ in range(config.workers)])
    phase.end()
    return config.workers
