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
import re
import ssl
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
import locust.runners
from gevent.event import Event
from geventhttpclient import client as gevent_client
from geventhttpclient.response import HTTPSocketPoolResponse
from geventhttpclient.useragent import RetriesExceeded
from locust import FastHttpUser, constant, task
from locust.env import Environment
from locust.exception import StopUser

from cxlab_contract.durations import format_duration
from cxlab_runner.barrier import NOT_RELEASED
from cxlab_runner.config import RunnerConfig
from cxlab_runner.duration import MAX_TASKS, TaskTimes
from cxlab_runner.failures import KINDS, OTHER, STATUS, TIMEOUT, kind_of
from cxlab_runner.http_head import HeadMeter
from cxlab_runner.http_request import request_target, request_timeout, ssl_context
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder

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
    _bound_answer_heads()
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


class _BoundedResponse(HTTPSocketPoolResponse):
    """geventhttpclient's answer with its head counted against the contract's one bound as it
    comes (http_head.HeadMeter), as every other model bounds it: its parser (llhttp) takes a
    head of any size."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._meter = HeadMeter()  # before super(): its __init__ reads the head
        super().__init__(*args, **kwargs)

    def feed(self, data: str | bytes) -> None:
        if not self._meter.done:  # the head, interim answers' included; never the body
            self._meter.feed(data.encode("latin-1") if isinstance(data, str) else data)
        super().feed(data)


def _bound_answer_heads() -> None:
    """geventhttpclient's HTTPClient makes its answers from its module's global class: ours, in
    this runner's process (a locust runner runs nothing else over geventhttpclient)."""
    gevent_client.HTTPSocketPoolResponse = _BoundedResponse  # type: ignore[attr-defined]  # (imported there, not exported)


class _Failed(Exception):
    """A failed request as cxlab counts it, reported to Locust's statistics as well: its repr
    (what a Locust worker sends its master) carries the kind, which the master reads back."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message

    def __repr__(self) -> str:
        return f"[{self.kind}] {self.message}"


_REPORTED = re.compile(r"\[(" + "|".join(KINDS) + r")\] (.*)", re.DOTALL)


def _failure(error: BaseException, timeout: float) -> _Failed:
    """What went wrong with a request: geventhttpclient wraps a timeout (and errors it would
    retry) in RetriesExceeded, and gevent's Timeout is --request-timeout's whole bound."""
    original = getattr(error, "original", None)
    if isinstance(error, RetriesExceeded) and isinstance(original, BaseException):
        error = original
    if isinstance(error, gevent.Timeout | TimeoutError):
        return _Failed(TIMEOUT, f"TimeoutError: no whole answer within {format_duration(timeout)}")
    return _Failed(kind_of(error), f"{type(error).__name__}: {error}")


def _environment(
    config: RunnerConfig, recorder: TaskRecorder, all_done: Event, loop: _Loop | None = None
) -> tuple[Environment, list[int]]:
    """Users that take this runner's tasks (its share, on a worker) until none is left — or,
    for a closed loop (`loop`), that send requests back to back until its time is up — and a
    list that grows by one as each user starts."""
    target = request_target(config)
    share = _Share(config, recorder, all_done, loop, iter(range(config.tasks)))
    user = _user_class(config, share, _Request.of(config))
    environment = Environment(user_classes=[user], host=f"{target.scheme}://{target.authority}")
    return environment, share.users_started


@dataclass
class _Share:
    """What the users of one runner share: the tasks left (or a closed loop's time), the
    users started and stopped, where each request is counted."""

    config: RunnerConfig
    recorder: TaskRecorder
    all_done: Event
    loop: _Loop | None
    remaining: Iterator[int]
    users_started: list[int] = field(default_factory=list)
    users_stopped: list[int] = field(default_factory=list)

    def another(self) -> bool:
        """Whether a user sends another request."""
        if self.loop is None:
            return next(self.remaining, None) is not None
        return time.perf_counter() < self.loop.until and next(self.loop.budget) < MAX_TASKS

    def finish_if_last(self) -> None:
        recorder = self.recorder
        if self.loop is None and recorder.ok_count() + recorder.failed_count() >= self.config.tasks:
            self.all_done.set()

    def stopped(self) -> None:
        # A closed loop's phase ends when its last user has stopped (after the time).
        self.users_stopped.append(1)
        if self.loop is not None and len(self.users_stopped) >= len(self.users_started):
            self.all_done.set()


@dataclass(frozen=True)
class _Request:
    """The request every user sends: the other models' (workloads.py), --method, the headers,
    --body, success for a status in --ok-status (every status is an answer to
    geventhttpclient, and no redirect is followed, as http.client follows none), all within
    --request-timeout: the users' network and connection timeouts, and a gevent Timeout over
    the whole request (theirs bound each socket operation, not the exchange)."""

    method: str
    path: str
    body: Any  # bytes, which geventhttpclient sends as they are; None for none
    headers: dict[str, str]
    ok: frozenset[int]
    timeout: float

    @classmethod
    def of(cls, config: RunnerConfig) -> _Request:
        headers = {name: value.decode("latin-1") for name, value in config.headers}  # as sent
        headers["Connection"] = "keep-alive" if config.connection == "reuse" else "close"
        return cls(
            method=config.method,
            path=request_target(config).path,
            body=config.body or None,
            headers=headers,
            ok=config.ok_statuses,
            timeout=request_timeout(config),
        )

    def send(self, user: FastHttpUser) -> _Failed | None:
        """One request, reported to Locust's statistics (a master counts them) as a success
        or as the failure it returns."""
        timer = gevent.Timeout.start_new(self.timeout)
        begin = time.perf_counter()
        try:
            response: Any = user.client.request(
                self.method, self.path, data=self.body, headers=self.headers, catch_response=True
            )
        except (Exception, gevent.Timeout) as error:  # not one Locust reports itself
            failure = _failure(error, self.timeout)
            user.environment.events.request.fire(
                request_type=self.method, name=self.path,
                response_time=(time.perf_counter() - begin) * 1000, response_length=0,
                response=None, context={}, exception=failure,
            )  # fmt: skip
            return failure
        finally:
            timer.close()
        with response:
            problem = response.request_meta["exception"]
            if problem is not None:
                failure = _failure(problem, self.timeout)
            elif response.status_code not in self.ok:
                failure = _Failed(STATUS, f"HttpStatusError: HTTP {response.status_code}")
            else:
                response.success()
                return None
            response.failure(failure)
            return failure


def _user_class(config: RunnerConfig, share: _Share, request: _Request) -> type[FastHttpUser]:
    """A FastHttpUser (a greenlet) that sends `request` while the share says another, each
    timed by cxlab."""
    target = request_target(config)
    recorder, clock = share.recorder, time.perf_counter

    def contexts(cafile: str | None = None, **_: Any) -> ssl.SSLContext:
        """geventhttpclient's ssl_context_factory: the context the other models use (the CA
        file it offers, its own bundle's, is not the one asked for)."""
        context = ssl_context(config)
        assert context is not None  # only asked for an https target
        return context

    class DeviceUser(FastHttpUser):
        wait_time = constant(0)
        network_timeout = request.timeout
        connection_timeout = request.timeout
        insecure = config.insecure_skip_verify
        ssl_context_factory: Callable[..., ssl.SSLContext] | None = (
            staticmethod(contexts) if target.tls else None
        )

        def on_start(self) -> None:
            share.users_started.append(1)  # a worker's users: the master decides how many
            agent: Any = self.client.client
            agent.valid_response_codes = frozenset(range(1000))  # --ok-status decides
            agent.redirect_response_codes = frozenset()

        def on_stop(self) -> None:
            share.stopped()

        @task
        def one_request(self) -> None:
            if not share.another():
                raise StopUser()
            recorder.started()
            begin = clock()
            failure = request.send(self)
            if failure is None:
                recorder.ok(clock() - begin)
            else:
                recorder.failed(failure.message, failure.kind)
            if share.loop is not None:
                loop = share.loop
                loop.done.append((begin - loop.origin, clock() - loop.origin, failure is None))
            share.finish_if_last()

    return DeviceUser


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
        # a worker's _Failed, as its repr came over: "[kind] message"
        reported = _REPORTED.fullmatch(str(error.error))
        kind, message = reported.groups() if reported else (OTHER, str(error.error))
        for _ in range(error.occurrences):
            recorder.failed(message, kind)
