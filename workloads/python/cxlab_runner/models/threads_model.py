"""OS threads, in one of two pools (--pool):

- onDemand (the default): concurrent.futures.ThreadPoolExecutor's way, which nornir and most
  Python code use. Every task is submitted up front; a submit starts a thread only when no
  thread is idle and fewer than W run, so at large W far fewer than W threads start.
- prestarted: all W threads start first, then pull tasks from a shared counter; with
  W = tasks, one thread per task (the greenlets seed's threading.Thread per task).

A thread the OS refuses to start is reported, never silently replaced: in a pool it means
fewer workers, with one thread per task it means a failed task."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable

from cxlab_runner import measure
from cxlab_runner.config import RunnerConfig
from cxlab_runner.models import timed
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import blocking_task


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    phase.tasks_off_main_thread = True
    if config.pool == "onDemand":
        return _on_demand(config, recorder, phase)
    return _prestarted(config, recorder, phase)


def _counted(work: Callable[[], None], phase: TaskPhase) -> Callable[[], None]:
    """A task thread's body, adding the thread's own context switches to the task threads'."""

    def body() -> None:
        before = measure.thread_switches()
        work()
        phase.add_task_switches(measure.thread_switches() - before)

    return body


class OnDemandPool:
    """ThreadPoolExecutor's thread start-up without its Futures. As in Lib/concurrent/futures/
    thread.py: the idle semaphore is released each time a thread finishes a task, and a submit
    that can take it starts no thread."""

    def __init__(self, max_workers: int, one: Callable[[], None], phase: TaskPhase) -> None:
        self._max = max_workers
        self._one = one
        self._phase = phase
        self._queue: queue.SimpleQueue[bool | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self.threads: list[threading.Thread] = []
        self.refused: RuntimeError | None = None

    def submit(self) -> None:
        self._queue.put(True)
        if self._idle.acquire(timeout=0):
            return
        if self.refused is None and len(self.threads) < self._max:
            thread = threading.Thread(target=_counted(self._work, self._phase), daemon=True)
            try:
                thread.start()
            except RuntimeError as error:  # "can't start new thread": the pool stays this size
                self.refused = error
                return
            self.threads.append(thread)

    def _work(self) -> None:
        get, one, idle = self._queue.get, self._one, self._idle
        while get():  # None: shut down
            one()
            idle.release()

    def shutdown(self) -> None:
        for _ in self.threads:
            self._queue.put(None)
        for thread in self.threads:
            thread.join()


def _on_demand(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    pool = OnDemandPool(config.workers, timed(blocking_task(config), recorder), phase)
    phase.begin()
    for _ in range(config.tasks):
        pool.submit()
    if not pool.threads:  # not one thread: nothing will ever take the queued tasks
        for _ in range(config.tasks):
            recorder.failed(pool.refused or RuntimeError("no thread started"))
    pool.shutdown()
    phase.end()
    if pool.refused is not None:
        recorder.note(
            f"the OS refused thread {len(pool.threads) + 1} of at most {config.workers}: "
            f"{pool.refused}"
        )
    return len(pool.threads)


def _prestarted(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
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
        thread = threading.Thread(target=_counted(target, phase), daemon=True)
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
