"""OS threads, in one of two pools (--pool):

- onDemand (the default): concurrent.futures.ThreadPoolExecutor, which nornir and most
  Python code use. Every task is submitted up front; a submit starts a thread only when no
  thread is idle and fewer than W run, so at large W far fewer than W threads start.
- prestarted: all W threads start first, then pull tasks from a shared counter; with
  W = tasks, one thread per task (the greenlets seed's threading.Thread per task).

A thread the OS refuses to start is reported, never silently replaced: in a pool it means
fewer workers, with one thread per task it means a failed task."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from cxlab_runner import measure
from cxlab_runner.config import RunnerConfig
from cxlab_runner.models import timed
from cxlab_runner.openloop import Arrivals, clock, run_blocking
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import blocking_task


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    phase.tasks_off_main_thread = True
    if config.duration and config.pool == "onDemand":
        return _duration_on_demand(config, recorder, phase)
    if config.duration:

        def spawn(work: Callable[[], None]) -> threading.Thread:
            thread = threading.Thread(target=_counted(work, phase), daemon=True)
            thread.start()
            return thread

        def join(threads: list[threading.Thread]) -> None:
            for thread in threads:
                thread.join()

        workers, phase.times = run_blocking(
            config, recorder, phase, lambda: blocking_task(config), spawn, join
        )
        return workers
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


def _on_demand(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    """concurrent.futures.ThreadPoolExecutor itself, used as nornir and most Python code use
    it: every task submitted up front, threads started as it decides. Its initializer counts
    the threads it starts."""
    one = timed(blocking_task(config), recorder)
    # Each thread's switches from its start to the end of its latest task, kept per thread
    # (one writer per key: no lock, which thousands of threads would queue on) and summed.
    first: dict[int, measure.Switches] = {}
    latest: dict[int, measure.Switches] = {}

    def start() -> None:
        first[threading.get_ident()] = measure.thread_switches()

    def task() -> None:
        one()
        latest[threading.get_ident()] = measure.thread_switches()

    refused: RuntimeError | None = None
    phase.begin()
    pool = ThreadPoolExecutor(config.workers, initializer=start)
    futures: list[Future[None]] = []
    try:
        for _ in range(config.tasks):
            try:
                futures.append(pool.submit(task))
            except RuntimeError as error:  # "can't start new thread": the task is queued all
                refused = refused or error  # the same, for the threads there are
        # Then wait for each result in turn, as pool.map and nornir do. Not only faithful:
        # joining the threads instead, with the futures dropped, fell now and then into a GIL
        # convoy that waiting on results never did (docs/benchmarks.md has the runs).
        for future in futures:  # empty if no thread could start: then nothing runs them
            future.result()
        pool.shutdown(wait=True)
    except SystemExit as stop:  # SIGTERM (__main__.py): end now. The pool's threads are never
        sys.stderr.flush()  # daemons: the interpreter's exit would wait for their tasks.
        os._exit(stop.code if isinstance(stop.code, int) else 1)
    phase.end()
    for ident, switches in latest.items():
        phase.add_task_switches(switches - first[ident])
    if refused is not None:
        recorder.note(f"the OS refused threads beyond {len(first)} of {config.workers}: {refused}")
    lost = config.tasks - recorder.ok_count() - recorder.failed_count()
    for _ in range(lost):  # queued with no thread to run them: not one could start
        recorder.failed(refused or RuntimeError("no thread ran the task"))
    return len(first)


def _duration_on_demand(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    """A duration run through ThreadPoolExecutor as its users submit work: each arrival
    submitted when it is due (the executor's queue is the queue; it starts a thread only when
    none is idle), or for a closed loop W looping jobs."""
    task = blocking_task(config)
    first: dict[int, measure.Switches] = {}
    latest: dict[int, measure.Switches] = {}

    def start() -> None:
        first[threading.get_ident()] = measure.thread_switches()

    def counted(work: Callable[[], None]) -> Callable[[], None]:
        def job() -> None:
            work()
            latest[threading.get_ident()] = measure.thread_switches()

        return job

    pool = ThreadPoolExecutor(config.workers, initializer=start)
    futures: list[Future[None]] = []
    if config.closed_for_duration:

        def submit(work: Callable[[], None]) -> Future[None]:
            return pool.submit(counted(work))

        def join(submitted: list[Future[None]]) -> None:
            for future in submitted:
                future.result()

        _, phase.times = run_blocking(config, recorder, phase, lambda: task, submit, join)
    else:
        arrivals = Arrivals(config, recorder)
        free = threading.Semaphore(config.workers)

        def job(k: int) -> None:
            arrivals.run(task, k)
            if arrivals.drop:
                free.release()

        def issue(k: int) -> None:
            if arrivals.drop and not free.acquire(blocking=False):
                recorder.dropped()
                return
            futures.append(pool.submit(counted(lambda: job(k))))
            arrivals.note_queue()

        phase.begin()
        arrivals.start = clock()
        arrivals.generate(issue, time.sleep)
        for future in futures:
            future.result()
        phase.end()
        phase.times = arrivals.times
    pool.shutdown(wait=True)
    for ident, switches in latest.items():
        phase.add_task_switches(switches - first[ident])
    return len(first)


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
