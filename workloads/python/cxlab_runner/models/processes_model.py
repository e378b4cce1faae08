"""OS processes: W forked workers pulling task numbers from a shared counter. Live counts go
through shared memory so a scrape sees progress; latencies, errors, the child's own context
switches and its VmPeak come back through a pipe when each worker ends. The children's CPU,
memory and threads are the trial's.

The pool is prestarted, which is what concurrent.futures.ProcessPoolExecutor does on Linux
with Python 3.11: with the fork start method it starts all max_workers processes at the
first submit (it spawns on demand only with spawn or forkserver, which re-import the runner
in every child and would measure start-up, not concurrency)."""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any, cast

from cxlab_contract.result import FailureKinds
from cxlab_runner import measure
from cxlab_runner.config import RunnerConfig
from cxlab_runner.duration import FAILED, MAX_TASKS, OK, TaskTimes
from cxlab_runner.failures import KINDS, kind_of
from cxlab_runner.openloop import Arrivals, clock
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import MAX_ERROR_LENGTH, TaskRecorder
from cxlab_runner.workloads import blocking_task

# fork is Linux's default start method in Python 3.11, the one a ProcessPoolExecutor user gets.
_CONTEXT = multiprocessing.get_context("fork")


class SharedCounts:
    """Per-worker counters in shared memory; each slot is written by one child only."""

    def __init__(self, workers: int) -> None:
        self.started: Any = _CONTEXT.Array("q", workers, lock=False)
        self.ok: Any = _CONTEXT.Array("q", workers, lock=False)
        self.failed: Any = _CONTEXT.Array("q", workers, lock=False)
        # failed tasks by kind: worker w's count of KINDS[i] at w * len(KINDS) + i
        self.kinds: Any = _CONTEXT.Array("q", workers * len(KINDS), lock=False)


class _Failures:
    """A child's failed tasks, by message and by kind, counted live in its shared slots too;
    both go back to the parent through the pipe at the end, as the latencies do."""

    def __init__(self, slot: int, counts: SharedCounts) -> None:
        self.slot, self.counts = slot, counts
        self.errors: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()

    def add(self, error: Exception) -> None:
        kind = kind_of(error)
        self.errors[f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH]] += 1
        self.kinds[kind] += 1
        self.counts.kinds[self.slot * len(KINDS) + KINDS.index(kind)] += 1
        self.counts.failed[self.slot] += 1


class ProcessRecorder(TaskRecorder):
    """Reads live counts from the children's shared memory."""

    def __init__(self, counts: SharedCounts, parent: TaskRecorder) -> None:
        super().__init__()
        self.counts = counts
        self.parent = parent

    def started_count(self) -> int:
        return int(sum(self.counts.started))

    def ok_count(self) -> int:
        return int(sum(self.counts.ok))

    def failed_count(self) -> int:
        return int(sum(self.counts.failed)) + self.parent.failed_count()

    def failure_kinds(self) -> FailureKinds:
        parent: Mapping[str, int] = cast(Mapping[str, int], self.parent.failure_kinds())
        shared = self.counts.kinds[:]
        kinds = {k: parent[k] + sum(shared[i :: len(KINDS)]) for i, k in enumerate(KINDS)}
        return cast(FailureKinds, kinds)

    def issued_count(self) -> int:
        return self.parent.issued_count()

    def dropped_count(self) -> int:
        return self.parent.dropped_count()


class SharedTimes:
    """An arrival run's started and ended offsets and outcomes, written by the children (one
    writer per arrival) and read by the parent once they have ended."""

    def __init__(self, n: int) -> None:
        self.started: Any = _CONTEXT.Array("d", n, lock=False)
        self.ended: Any = _CONTEXT.Array("d", n, lock=False)
        self.outcome: Any = _CONTEXT.Array("b", n, lock=False)


def _arrival_worker(
    slot: int,
    config: RunnerConfig,
    start: float,
    waiting: Any,
    free: Any,
    shared: SharedTimes,
    counts: SharedCounts,
    results: Connection,
) -> None:
    task, clock = blocking_task(config), time.perf_counter  # CLOCK_MONOTONIC: the parent's too
    before = measure.thread_switches()
    failures = _Failures(slot, counts)
    while (k := waiting.get()) is not None:
        counts.started[slot] += 1
        shared.started[k] = clock() - start
        try:
            task()
        except Exception as error:
            shared.ended[k] = clock() - start
            shared.outcome[k] = FAILED
            failures.add(error)
        else:
            shared.ended[k] = clock() - start
            shared.outcome[k] = OK
            counts.ok[slot] += 1
        if free is not None:
            free.release()
    switches = measure.thread_switches() - before
    results.send(([], failures.errors, failures.kinds, switches, measure.peak_vm_bytes()))
    results.close()


def _loop_worker(
    slot: int,
    config: RunnerConfig,
    start: float,
    budget: Any,
    counts: SharedCounts,
    results: Connection,
) -> None:
    """A closed loop for a time: tasks back to back until the run's duration has passed (or
    MAX_TASKS have started, `budget` counting them over the workers)."""
    task, clock = blocking_task(config), time.perf_counter
    before = measure.thread_switches()
    done: list[tuple[float, float, bool]] = []
    failures = _Failures(slot, counts)
    deadline = start + config.duration
    while (begin := clock()) < deadline:
        with budget.get_lock():
            if budget.value >= MAX_TASKS:
                break
            budget.value += 1
        counts.started[slot] += 1
        try:
            task()
        except Exception as error:
            failures.add(error)
            done.append((begin - start, clock() - start, False))
            continue
        done.append((begin - start, clock() - start, True))
        counts.ok[slot] += 1
    switches = measure.thread_switches() - before
    results.send((done, failures.errors, failures.kinds, switches, measure.peak_vm_bytes()))
    results.close()


def _worker(
    slot: int, config: RunnerConfig, next_task: Any, counts: SharedCounts, results: Connection
) -> None:
    task, clock = blocking_task(config), time.perf_counter
    before = measure.thread_switches()
    latencies: list[float] = []
    failures = _Failures(slot, counts)
    while True:
        with next_task.get_lock():
            number = next_task.value
            next_task.value += 1
        if number >= config.tasks:
            break
        counts.started[slot] += 1
        begin = clock()
        try:
            task()
        except Exception as error:
            failures.add(error)
            continue
        latencies.append(clock() - begin)
        counts.ok[slot] += 1
    switches = measure.thread_switches() - before
    results.send((latencies, failures.errors, failures.kinds, switches, measure.peak_vm_bytes()))
    results.close()


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    if config.duration:
        return _run_for_duration(config, recorder, phase)
    counts = SharedCounts(config.workers)
    next_task = _CONTEXT.Value("q", 0)
    live = ProcessRecorder(counts, recorder)
    recorder.live_view = live  # the metrics endpoint reads the children's counters
    workers: list[tuple[Any, Connection]] = []
    phase.sampler.child_pids = lambda: [p.pid for p, _ in workers if p.pid is not None]
    phase.tasks_off_main_thread = True
    phase.begin()
    workers += _fork_workers(
        config, recorder, lambda slot, send: (_worker, (slot, config, next_task, counts, send))
    )
    for process, receive in workers:
        try:
            latencies, errors, kinds, switches, peak_vm = receive.recv()
            recorder.merge(latencies, errors, kinds)
            phase.add_task_switches(switches)
            phase.children_peak_vm += peak_vm
        except EOFError:  # the child died before reporting: its tasks are lost, and said so
            recorder.note(f"worker process {process.pid} died (exit {process.exitcode})")
        process.join()
    phase.end()
    recorder.live_view = None
    lost = config.tasks - recorder.ok_count() - recorder.failed_count()
    for _ in range(max(0, lost)):
        recorder.failed("task lost with its worker process")
    return len(workers)


def _run_for_duration(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    """Arrivals issued by the parent into a queue the forked workers share, or closed loops for
    a time in each worker; the tasks' times come back through shared memory or the pipe."""
    counts = SharedCounts(config.workers)
    live = ProcessRecorder(counts, recorder)
    recorder.live_view = live
    workers: list[tuple[Any, Connection]] = []
    phase.sampler.child_pids = lambda: [p.pid for p, _ in workers if p.pid is not None]
    phase.tasks_off_main_thread = True
    arrivals = None if config.closed_for_duration else Arrivals(config, recorder)
    shared = SharedTimes(config.tasks) if arrivals else None
    waiting = _CONTEXT.SimpleQueue()
    budget = _CONTEXT.Value("q", 0)  # a closed loop's tasks started, over the workers
    drop = arrivals is not None and arrivals.drop
    free = _CONTEXT.Semaphore(config.workers) if drop else None
    phase.begin()
    start = clock()

    def worker_of(slot: int, send: Connection) -> tuple[Any, tuple[Any, ...]]:
        if arrivals is None:
            return _loop_worker, (slot, config, start, budget, counts, send)
        return _arrival_worker, (slot, config, start, waiting, free, shared, counts, send)

    workers += _fork_workers(config, recorder, worker_of)
    if arrivals is not None:
        arrivals.start = start

        def issue(k: int) -> None:
            if free is not None and not free.acquire(block=False):
                recorder.dropped()
                return
            waiting.put(k)
            arrivals.note_queue()

        arrivals.generate(issue, time.sleep)
        for _ in workers:
            waiting.put(None)
    done = _receive_times(workers, recorder, phase)
    phase.end()
    recorder.live_view = None
    phase.times = _phase_times(arrivals, shared, done)
    _count_ended(recorder, phase.times)
    return len(workers)


def _fork_workers(
    config: RunnerConfig,
    recorder: TaskRecorder,
    worker_of: Callable[[int, Connection], tuple[Any, tuple[Any, ...]]],
) -> list[tuple[Any, Connection]]:
    """config.workers processes, each with the pipe it reports on; fewer if the kernel
    refuses one (out of pids or memory), and the Result says so."""
    workers: list[tuple[Any, Connection]] = []
    for slot in range(config.workers):
        receive, send = _CONTEXT.Pipe(duplex=False)
        target, args = worker_of(slot, send)
        process = _CONTEXT.Process(target=target, args=args, daemon=True)
        try:
            process.start()
        except OSError as error:
            missing = config.workers - slot
            recorder.note(f"{missing} of {config.workers} worker processes not started: {error}")
            break
        send.close()
        workers.append((process, receive))
    return workers


def _receive_times(
    workers: list[tuple[Any, Connection]], recorder: TaskRecorder, phase: TaskPhase
) -> list[tuple[float, float, bool]]:
    """Each worker's report, once it ends: a closed loop's tasks' (started, ended, ok), its
    errors, kinds, context switches and peak VM."""
    done: list[tuple[float, float, bool]] = []
    for process, receive in workers:
        try:
            tasks, errors, kinds, switches, peak_vm = receive.recv()
            done.extend(tasks)
            recorder.merge([], errors, kinds)
            phase.add_task_switches(switches)
            phase.children_peak_vm += peak_vm
        except EOFError:
            recorder.note(f"worker process {process.pid} died (exit {process.exitcode})")
        process.join()
    return done


def _phase_times(
    arrivals: Arrivals | None, shared: SharedTimes | None, done: list[tuple[float, float, bool]]
) -> TaskTimes:
    """A closed loop's times from the workers' reports; an arrival run's from shared memory."""
    if arrivals is None:
        return TaskTimes.closed(done)
    assert shared is not None
    times = arrivals.times
    times.started[:] = shared.started[:]
    times.ended[:] = shared.ended[:]
    times.outcome[:] = bytes(b & 0xFF for b in shared.outcome[:])
    return times


def _count_ended(recorder: TaskRecorder, times: TaskTimes) -> None:
    """The live figures the children could not keep: tasks started, latencies and waits."""
    for k, outcome in enumerate(times.outcome):
        if outcome:
            recorder.started()
        if outcome == OK:
            recorder.latencies.append(times.ended[k] - times.scheduled[k])
            recorder.waits.append(max(0.0, times.started[k] - times.scheduled[k]))
