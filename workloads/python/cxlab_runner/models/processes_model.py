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
from multiprocessing.connection import Connection
from typing import Any

from cxlab_runner import measure
from cxlab_runner.config import RunnerConfig
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


def _worker(
    slot: int, config: RunnerConfig, next_task: Any, counts: SharedCounts, results: Connection
) -> None:
    task, clock = blocking_task(config), time.perf_counter
    before = measure.thread_switches()
    latencies: list[float] = []
    errors: Counter[str] = Counter()
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
            errors[f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH]] += 1
            counts.failed[slot] += 1
            continue
        latencies.append(clock() - begin)
        counts.ok[slot] += 1
    switches = measure.thread_switches() - before
    results.send((latencies, errors, switches, measure.peak_vm_bytes()))
    results.close()


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    counts = SharedCounts(config.workers)
    next_task = _CONTEXT.Value("q", 0)
    live = ProcessRecorder(counts, recorder)
    recorder.live_view = live  # the metrics endpoint reads the children's counters
    workers: list[tuple[Any, Connection]] = []
    phase.sampler.child_pids = lambda: [p.pid for p, _ in workers if p.pid is not None]
    phase.tasks_off_main_thread = True
    phase.begin()
    for slot in range(config.workers):
        receive, send = _CONTEXT.Pipe(duplex=False)
        process = _CONTEXT.Process(
            target=_worker, args=(slot, config, next_task, counts, send), daemon=True
        )
        try:
            process.start()
        except OSError as error:  # out of pids or memory
            missing = config.workers - slot
            recorder.note(f"{missing} of {config.workers} worker processes not started: {error}")
            break
        send.close()
        workers.append((process, receive))
    for process, receive in workers:
        try:
            latencies, errors, switches, peak_vm = receive.recv()
            recorder.merge(latencies, errors)
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
