"""The task phase: the only span a trial measures. Imports, start-up and the lingering
metrics endpoint stay outside it. Each model calls begin() right before it starts its first
worker and end() once the last one has been joined (children reaped, so their CPU counts).
begin() is also where a runner waits at the start barrier."""

from __future__ import annotations

import threading
import time

from cxlab_runner import measure
from cxlab_runner.barrier import StartBarrier
from cxlab_runner.duration import TaskTimes


class TaskPhase:
    def __init__(self, sampler: measure.Sampler, barrier: StartBarrier | None = None) -> None:
        self.sampler = sampler
        self.barrier = barrier or StartBarrier(0.0)
        self.started_at_unix = 0.0  # wall clock, comparable across a trial's Pods
        self.started: float | None = None
        self.finished: float | None = None
        self.baseline_rss = 0
        self._usage_at_start = measure.usage()
        self.used = measure.Usage(0.0, 0.0, 0, 0)
        # Models whose tasks run on threads of their own set this and add each thread's
        # switches; the others run tasks on the main thread, whose switches begin/end count.
        self.tasks_off_main_thread = False
        self._task_switches = measure.Switches()
        self._task_switches_lock = threading.Lock()
        self._main_at_start = measure.Switches()
        self._main_used = measure.Switches()
        self.children_peak_vm = 0  # VmPeak of child processes, summed (processes)
        self.locust_workers: int | None = None  # a distributed Locust master's workers
        self.times: TaskTimes | None = None  # a duration run's tasks (openloop.py), for the Result

    def begin(self) -> None:
        """Wait at the start barrier (if any): everything before it is set-up, not measured."""
        self.barrier.wait()
        self.started_at_unix = time.time()
        self.sampler.start()
        self.baseline_rss = self.sampler.timeline[0]
        self._usage_at_start = measure.usage()
        self._main_at_start = measure.thread_switches()
        self.started = time.monotonic()

    def end(self) -> None:
        self.finished = time.monotonic()
        self.used = measure.usage() - self._usage_at_start
        self._main_used = measure.thread_switches() - self._main_at_start
        self.sampler.stop()

    def add_task_switches(self, switches: measure.Switches) -> None:
        """From a task thread (or a child process's) at its end."""
        with self._task_switches_lock:
            self._task_switches = self._task_switches + switches

    def task_switches(self) -> measure.Switches:
        """Context switches of the threads that ran tasks, and only those."""
        return self._task_switches if self.tasks_off_main_thread else self._main_used

    def peak_vm(self) -> int:
        """VmPeak of this process plus its children's: each one's own high-water mark, so
        an upper bound of the peak at any one moment."""
        return measure.peak_vm_bytes() + self.children_peak_vm

    def elapsed(self) -> float:
        """Seconds since begin(); frozen at end()."""
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started
