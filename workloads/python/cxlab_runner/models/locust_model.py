"""Locust, used as a library: W FastHttpUsers (greenlets) share the tasks of the http workload
and the trial ends when the last task is done. Each request is timed by cxlab, the same way
as in every other model, rather than by Locust's own statistics."""

from __future__ import annotations

import time
from typing import Any

import gevent
from gevent.event import Event
from locust import FastHttpUser, constant, task
from locust.env import Environment
from locust.exception import StopUser

from cxlab_runner.config import RunnerConfig
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder
from cxlab_runner.workloads import HTTP_TIMEOUT_SECONDS, HttpStatusError, request_target


def run(config: RunnerConfig, recorder: TaskRecorder, phase: TaskPhase) -> int:
    host, port, path = request_target(config)
    headers = {"Connection": "keep-alive" if config.connection == "reuse" else "close"}
    remaining = iter(range(config.tasks))
    all_done = Event()
    started, ok, failed, clock = recorder.started, recorder.ok, recorder.failed, time.perf_counter

    def finish_if_last() -> None:
        if recorder.ok_count() + recorder.failed_count() >= config.tasks:
            all_done.set()

    class DeviceUser(FastHttpUser):
        wait_time = constant(0)
        network_timeout = HTTP_TIMEOUT_SECONDS
        connection_timeout = HTTP_TIMEOUT_SECONDS

        @task
        def one_request(self) -> None:
            if next(remaining, None) is None:
                raise StopUser()
            started()
            begin = clock()
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
            finish_if_last()

    environment = Environment(user_classes=[DeviceUser], host=f"http://{host}:{port}")
    runner = environment.create_local_runner()
    phase.begin()
    # Spawn every user at once: a ramp-up would be Locust's pacing, not the model's cost.
    runner.start(config.workers, spawn_rate=config.workers * 1000)
    all_done.wait()
    phase.end()
    runner.quit()
    gevent.sleep(0)
    return config.workers
