"""Duration runs (CONTRACT.md, Duration runs) for the models that share a process: arrivals
issued on a schedule by a generator, and closed loops for a time. Each model brings only how it
starts a worker and how it sleeps; the generator, the queue, the drop rule and the bookkeeping
are here, once.

An arrival's times are offsets from the task phase's start on one monotonic clock: scheduled
(the schedule's), issued (the generator handed it on), started and ended (a worker ran it)."""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from cxlab_runner.config import RunnerConfig
from cxlab_runner.duration import FAILED, MAX_TASKS, OK, TaskTimes
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import AsyncTask, BlockingTask

clock = time.perf_counter  # CLOCK_MONOTONIC: the same clock in every process (processes)


class Arrivals:
    """One arrival run's schedule, times and counts, shared by its generator and workers."""

    def __init__(self, config: RunnerConfig, recorder: TaskRecorder) -> None:
        self.times = TaskTimes.for_schedule(list(config.schedule))
        self.recorder = recorder
        self.drop = config.on_busy == "drop" and not config.one_per_task
        self.start = 0.0

    def issued(self, k: int) -> None:
        self.times.issued[k] = clock() - self.start
        self.recorder.issued()

    def note_queue(self) -> None:
        queued = self.recorder.current().queue_length()  # processes: the children's counts
        self.recorder.max_queue = max(self.recorder.max_queue, queued)

    def began(self, k: int) -> float:
        now = clock() - self.start
        self.times.started[k] = now
        self.recorder.started()
        self.recorder.waits.append(max(0.0, now - self.times.scheduled[k]))
        return now

    def ended(self, k: int, ok: bool, error: BaseException | None = None) -> None:
        now = clock() - self.start
        self.times.ended[k] = now
        if ok:
            self.times.outcome[k] = OK
            self.recorder.ok(now - self.times.scheduled[k])
        else:
            self.times.outcome[k] = FAILED
            self.recorder.failed(error or "failed")

    def run(self, task: BlockingTask, k: int) -> None:
        self.began(k)
        try:
            task()
        except Exception as error:
            self.ended(k, False, error)
            return
        self.ended(k, True)

    async def run_async(self, task: AsyncTask, k: int) -> None:
        self.began(k)
        try:
            await task()
        except Exception as error:
            self.ended(k, False, error)
            return
        self.ended(k, True)

    def generate(self, issue: Callable[[int], None], sleep: Callable[[float], Any]) -> None:
        """Issue each arrival at its time: sleep until it is due, or when late at once, never
        skipped. Runs on the calling thread (greenlet)."""
        start, issued, schedule = self.start, self.issued, self.times.scheduled
        for k, due in enumerate(schedule):
            delay = start + due - clock()
            if delay > 0:
                sleep(delay)
            issued(k)
            issue(k)


def run_blocking(
    config: RunnerConfig,
    recorder: TaskRecorder,
    phase: TaskPhase,
    make_task: Callable[[], BlockingTask],
    spawn: Callable[[Callable[[], None]], Any],
    join: Callable[[list[Any]], None],
) -> tuple[int, TaskTimes]:
    """An arrival run or a closed loop for a time on threads or greenlets: `spawn` starts a
    worker running the function given, `join` waits for the workers it returned. Returns the
    workers started and the tasks' times."""
    if config.closed_for_duration:
        return _closed_blocking(config, recorder, phase, make_task, spawn, join)
    arrivals = Arrivals(config, recorder)
    workers: list[Any] = []
    if config.one_per_task:
        task = make_task()
        phase.begin()
        arrivals.start = clock()
        arrivals.generate(lambda k: workers.append(spawn(lambda: arrivals.run(task, k))), _sleep)
        join(workers)
        phase.end()
        return len(workers), arrivals.times
    waiting: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    free = threading.Semaphore(config.workers)  # drop: an arrival takes one or is dropped

    def worker() -> None:
        task = make_task()
        while (k := waiting.get()) is not None:
            arrivals.run(task, k)
            if arrivals.drop:
                free.release()

    def issue(k: int) -> None:
        if arrivals.drop and not free.acquire(blocking=False):
            recorder.dropped()
            return
        waiting.put(k)
        arrivals.note_queue()

    phase.begin()
    arrivals.start = clock()
    workers = [spawn(worker) for _ in range(config.workers)]
    arrivals.generate(issue, _sleep)
    for _ in workers:
        waiting.put(None)
    join(workers)
    phase.end()
    return len(workers), arrivals.times


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at call time: gevent's once it has patched time


def _closed_blocking(
    config: RunnerConfig,
    recorder: TaskRecorder,
    phase: TaskPhase,
    make_task: Callable[[], BlockingTask],
    spawn: Callable[[Callable[[], None]], Any],
    join: Callable[[list[Any]], None],
) -> tuple[int, TaskTimes]:
    done: list[tuple[float, float, bool]] = []  # list.extend is atomic under the GIL
    budget = itertools.count()  # next() is atomic under the GIL

    def worker() -> None:
        task, mine = make_task(), []
        while (begin := clock()) < deadline and next(budget) < MAX_TASKS:
            mine.append(_one(task, recorder, begin, start))
        done.extend(mine)

    phase.begin()
    start = clock()
    deadline = start + config.duration
    workers = [spawn(worker) for _ in range(config.workers)]
    join(workers)
    phase.end()
    return len(workers), TaskTimes.closed(done)


def _one(
    task: BlockingTask, recorder: TaskRecorder, begin: float, start: float
) -> tuple[float, float, bool]:
    recorder.started()
    try:
        task()
    except Exception as error:
        end = clock()
        recorder.failed(error)
        return begin - start, end - start, False
    end = clock()
    recorder.ok(end - begin)
    return begin - start, end - start, True


def run_sequential(
    config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase, task: BlockingTask
) -> TaskTimes:
    """One worker, no generator beside it: sequential runs nothing concurrently. Between tasks
    it waits for the next arrival if it is not due yet; an arrival that came while the task
    before ran has waited in the queue (or, with --on-busy drop, was dropped)."""
    if config.closed_for_duration:
        done: list[tuple[float, float, bool]] = []
        phase.begin()
        start = clock()
        while (begin := clock()) < start + config.duration and len(done) < MAX_TASKS:
            done.append(_one(task, recorder, begin, start))
        phase.end()
        return TaskTimes.closed(done)
    arrivals = Arrivals(config, recorder)
    scheduled = arrivals.times.scheduled
    phase.begin()
    start = arrivals.start = clock()
    busy_until = 0.0  # offset at which the last task ended
    for k, due in enumerate(scheduled):
        if arrivals.drop and due < busy_until:  # it came while the worker was busy
            arrivals.times.issued[k] = due
            recorder.issued()
            recorder.dropped()
            continue
        delay = start + due - clock()
        if delay > 0:
            time.sleep(delay)
            arrivals.issued(k)
        else:  # it arrived while the last task ran and has waited since: issued on time
            arrivals.times.issued[k] = due
            recorder.issued()
            recorder.max_queue = max(recorder.max_queue, _due_by(scheduled, k, busy_until))
        arrivals.run(task, k)
        busy_until = arrivals.times.ended[k]
    phase.end()
    return arrivals.times


def _due_by(scheduled: list[float], k: int, now: float) -> int:
    """Arrivals from k on already due at `now`: the queue a lone worker finds."""
    n = k
    while n < len(scheduled) and scheduled[n] <= now:
        n += 1
    return n - k


async def run_async(
    config: RunnerConfig,
    recorder: TaskRecorder,
    phase: TaskPhase,
    make_task: Callable[[], AsyncTask],
) -> tuple[int, TaskTimes]:
    """asyncio: the generator and the workers are coroutines on one event loop."""
    if config.closed_for_duration:
        return await _closed_async(config, recorder, phase, make_task)
    return await _arrivals_async(config, recorder, phase, make_task)


async def _closed_async(
    config: RunnerConfig,
    recorder: TaskRecorder,
    phase: TaskPhase,
    make_task: Callable[[], AsyncTask],
) -> tuple[int, TaskTimes]:
    done: list[tuple[float, float, bool]] = []
    budget = itertools.count()

    async def loop_worker() -> None:
        task = make_task()
        while (begin := clock()) < deadline and next(budget) < MAX_TASKS:
            recorder.started()
            try:
                await task()
            except Exception as error:
                recorder.failed(error)
                done.append((begin - start, clock() - start, False))
                continue
            end = clock()
            recorder.ok(end - begin)
            done.append((begin - start, end - start, True))

    phase.begin()
    start = clock()
    deadline = start + config.duration
    await asyncio.gather(*(loop_worker() for _ in range(config.workers)))
    phase.end()
    return config.workers, TaskTimes.closed(done)


async def _arrivals_async(
    config: RunnerConfig,
    recorder: TaskRecorder,
    phase: TaskPhase,
    make_task: Callable[[], AsyncTask],
) -> tuple[int, TaskTimes]:
    arrivals = Arrivals(config, recorder)
    workers: list[asyncio.Task[None]] = []
    waiting: asyncio.Queue[int | None] = asyncio.Queue()
    free = config.workers  # drop: idle workers; one coroutine runs at a time, so no lock

    async def worker() -> None:
        nonlocal free
        task = make_task()
        while (k := await waiting.get()) is not None:
            await arrivals.run_async(task, k)
            free += 1

    if config.one_per_task:
        shared = make_task()

        def issue(k: int) -> None:
            workers.append(asyncio.create_task(arrivals.run_async(shared, k)))

    else:

        def issue(k: int) -> None:
            nonlocal free
            if arrivals.drop:
                if not free:
                    recorder.dropped()
                    return
                free -= 1
            waiting.put_nowait(k)
            arrivals.note_queue()

    phase.begin()
    arrivals.start = clock()
    if not config.one_per_task:
        workers = [asyncio.create_task(worker()) for _ in range(config.workers)]
    start, schedule = arrivals.start, arrivals.times.scheduled
    for k, due in enumerate(schedule):
        delay = start + due - clock()
        if delay > 0:
            await asyncio.sleep(delay)
        arrivals.issued(k)
        issue(k)
    if not config.one_per_task:
        for _ in range(config.workers):
            waiting.put_nowait(None)
    await asyncio.gather(*workers)
    phase.end()
    return len(workers), arrivals.times
