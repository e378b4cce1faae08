"""OS threads: W threads pulling tasks from a shared counter, or (W = tasks) one thread per
task. A thread the OS refuses to start is reported, never silently replaced: in the pool it
means fewer workers, with one thread per task it means a failed task."""

from __future__ import annotations

import itertools
import threading

from cxlab_runner.config import RunnerConfig
from cxlab_runner.models import timed
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import blocking_task


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    tasks = config.tasks
    if config.one_per_task:
        one = timed(blocking_task(config), recorder)

        def target() -> None:
            one()
    else:
        handed_out = itertools.count()  # next() on it is atomic under the GIL

        def target() -> None:
            one = timed(blocking_task(config), recorder)
            while next(handed_out) < tasks:
                one()

    threads: list[threading.Thread] = []
    phase.begin()
    for _ in range(config.workers):
        thread = threading.Thread(target=target, daemon=True)
        try:
            thread.start()
        except RuntimeError as error:  # "can't start new thread": out of memory maps or pids
            refused = config.workers - len(threads)
            if config.one_per_task:
                for _ in range(refused):
                    recorder.failed(error)
            else:
                recorder.note(f"{refused} of {config.workers} worker threads not started: {error}")
            break
        threads.append(thread)
    for thread in threads:
        thread.join()
    phase.end()
    return len(threads)
