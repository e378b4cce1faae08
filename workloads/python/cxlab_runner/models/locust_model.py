"""Locust, used as a library: W FastHttpUsers (greenlets) share the tasks of the http workload
and the trial ends when the last task is done. Each request is timed by cxlab, the same way
as in every other model, rather than by Locust's own statistics.

A trial of several Pods runs Locust's own distributed mode (workloads/CONTRACT.md,
"Distributed Locust"): a master (--expect-workers) that waits for its workers, starts the
users on them and reports Locust's aggregated statistics, and workers (--locust-master) that
run the users and time their own requests as a local Locust does."""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
import locust.runners
from gevent.event import Event
from locust import FastHttpUser, constant, task
from locust.env import Environment
from locust.exception import StopUser

from cxlab_contract.durations import format_duration
from cxlab_runner.barrier import NOT_RELEASED
from cxlab_runner.config import RunnerConfig
from cxlab_runner.duration import MAX_TASKS, TaskTimes
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import HTTP_TIMEOUT_SECONDS, HttpStatusError, request_target

# A worker reports its statistics to the master this often (Locust's default is 3 s): the
# master sees the last task within this long of its end.
REPORT_SECONDS = 0.05
POLL_SECONDS = 0.01


@dataclass
class _Loop:
    """A closed loop for a time (--duration): when the task phase began and ends, and each
    request's (started, ended, ok) from its beginning, for the Result's timeline."""

    origin: float = 0.0
    until: float = math.inf
    done: list[tuple[float, float, bool]] = field(default_factory=list)
    budget: Iterator[int] = field(default_factory=itertools.count)

    def begin(self, duration: float) -> None:
        self.origin = time.perf_counter()
        self.until = self.origin + duration


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    if config.expect_workers:
        return _master(config, recorder, phase)
    all_done = Event()
    loop = _Loop() if config.closed_for_duration else None
    environment, users_started = _environment(config, recorder, all_done, loop)
    if config.locust_master:
        _worker(config, environment, phase, all_done)
        return len(users_started)
    runner = environment.create_local_runner()
    phase.begin()
    if loop is not None:
        loop.begin(config.duration)
    # Spawn every user at once: a ramp-up would be Locust's pacing, not the model's cost.
    runner.start(config.workers, spawn_rate=config.workers * 1000)
    all_done.wait()
    phase.end()
    runner.quit()
    gevent.sleep(0)
    if loop is not None:
        phase.times = TaskTimes.closed(loop.done)
    return config.workers


def _environment(
    config: RunnerConfig, recorder: TaskRecorder, all_done: Event, loop: _Loop | None = None
) -> tuple[Environment, list[int]]:
    """Users that take this runner's tasks (its share, on a worker) until none is left — or,
    for a closed loop (`loop`), that send requests back to back until its time is up — and a
    list that grows by one as each user starts."""
    host, port, path = request_target(config)
    headers = {"Connection": "keep-alive" if config.connection == "reuse" else "close"}
    remaining = iter(range(config.tasks))
    users_started: list[int] = []
    users_stopped: list[int] = []
    started, ok, failed, clock = recorder.started, recorder.ok, recorder.failed, time.perf_counter

    def finish_if_last() -> None:
        if loop is None and recorder.ok_count() + recorder.failed_count() >= config.tasks:
            all_done.set()

    def another() -> bool:
        """Whether this user sends another request."""
        if loop is None:
            return next(remaining, None) is not None
        return clock() < loop.until and next(loop.budget) < MAX_TASKS

    class DeviceUser(FastHttpUser):
        wait_time = constant(0)
        network_timeout = HTTP_TIMEOUT_SECONDS
        connection_timeout = HTTP_TIMEOUT_SECONDS

        def on_start(self) -> None:
            users_started.append(1)  # a worker's users: the master decides how many

        def on_stop(self) -> None:
            # A closed loop's phase ends when its last user has stopped (after the time).
            users_stopped.append(1)
            if loop is not None and len(users_stopped) >= len(users_started):
                all_done.set()

        @task
        def one_request(self) -> None:
            if not another():
                raise StopUser()
            started()
            begin = clock()
            success = False
            try:
                response: Any = self.client.get(path, headers=headers)
                if not 200 <= (response.status_code or 0) < 300:
                    raise getattr(response, "error", None) or HttpStatusError(
                        f"HTTP {response.status_code}"
                    )
            except Exception as error:
                failed(error)
            else:
                ok(clock() - begin)
                success = True
            if loop is not None:
                loop.done.append((begin - loop.origin, clock() - loop.origin, success))
            finish_if_last()

    environment = Environment(user_classes=[DeviceUser], host=f"http://{host}:{port}")
    return environment, users_started


def _address(config: RunnerConfig) -> tuple[str, int]:
    assert config.locust_master is not None  # checked with the flags
    host, _, port = config.locust_master.rpartition(":")
    return host, int(port)


def _worker(
    config: RunnerConfig, environment: Environment, phase: TaskPhase, all_done: Event
) -> None:
    """Runs the users the master starts here; its task phase begins with the master's start
    (Locust's test_start on a worker) and ends with its share. It then waits for the master's
    quit, which sends Locust's final statistics report, before the runner writes its Result."""
    locust.runners.WORKER_REPORT_INTERVAL = REPORT_SECONDS
    runner = environment.create_worker_runner(*_address(config))
    environment.events.test_start.add_listener(lambda **_: phase.begin())  # type: ignore[no-untyped-call]
    all_done.wait()
    phase.end()
    # Until the master's quit, as Locust's workers do: leaving earlier would make the master
    # hand this worker's users to the others. A master gone for good is Locust's heartbeat
    # timeout's to notice; the Pod's trialTimeout bounds it all.
    runner.greenlet.join()


def _master(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    """Waits for --expect-workers workers (Locust's --expect-workers, bounded by
    --barrier-timeout), starts N x workers users on them and ends once its aggregated
    statistics count every task. The recorder then holds Locust's view of the trial."""
    host, port = _address(config)
    environment, _ = _environment(config, TaskRecorder(), Event())
    runner = environment.create_master_runner(host, port)
    phase.barrier.arrived = True  # GET /ready: waiting for the workers, its start barrier
    began = time.monotonic()
    while runner.worker_count < config.expect_workers:
        if time.monotonic() - began > config.barrier_timeout:
            print(
                f"cxlab-runner: expected {config.expect_workers} Locust workers, "
                f"{runner.worker_count} connected within {format_duration(config.barrier_timeout)}",
                file=sys.stderr,
            )
            runner.quit()
            raise SystemExit(NOT_RELEASED)
        gevent.sleep(POLL_SECONDS)
    phase.locust_workers = runner.worker_count
    phase.barrier.release()  # the workers were the barrier: begin() does not wait again
    phase.begin()
    phase.barrier.waited = time.monotonic() - began
    users = config.workers * config.expect_workers
    runner.start(users, spawn_rate=users * 1000)
    # (stats.total afresh each time: a start clears the statistics into new objects)
    while environment.stats.total.num_requests < config.tasks and runner.worker_count > 0:
        gevent.sleep(POLL_SECONDS)
    phase.end()
    runner.quit()
    gevent.sleep(0)
    _record(recorder, environment)
    return users


def _record(recorder: TaskRecorder, environment: Environment) -> None:
    """Locust's aggregated statistics as the Result counts them: every request's response
    time as Locust keeps it (rounded above 100 ms to two significant digits), failed ones
    too as in Locust's Aggregated row; the failures with their messages."""
    total = environment.stats.total
    for milliseconds, count in sorted(total.response_times.items()):
        recorder.latencies.extend([milliseconds / 1000] * count)
    recorder.failed_latencies = total.num_failures
    for error in environment.stats.errors.values():
        for _ in range(error.occurrences):
            recorder.failed(str(error.error))
