"""What one task does, in a blocking form (sequential, threads, processes, gevent — which
monkey-patches the blocking calls) and an asyncio form. `--connection reuse` keeps one
connection per worker: a pool worker builds its own task function once, or shares one that
keeps its connections per thread; with one worker per task every connection is fresh.

An http task sends --method to --target-url (with ?rtt= for the delay target, as given with
--target-mode direct), --header and --header-env, --body with Content-Length, over TLS for
https (http_request.py); it succeeds on a whole answer whose status is one of --ok-status, read
within --request-timeout (http_blocking.py, http_async.py; the answer's head: http_head.py). A
failure carries its kind (failures.py): the clients tag what the type of an error does not
say, the phase it came from."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from cxlab_runner.config import RunnerConfig
from cxlab_runner.http_async import AsyncHttp
from cxlab_runner.http_blocking import BlockingHttp

BlockingTask = Callable[[], None]
AsyncTask = Callable[[], Awaitable[None]]


def count_down(iterations: int) -> None:
    """The GIL seed's loop: pure interpreter work, no I/O, nothing to release the GIL."""
    n = iterations
    while n > 0:
        n -= 1


def blocking_task(config: RunnerConfig) -> BlockingTask:
    if config.workload == "sleep":
        return _sleep(config.rtt)
    if config.workload == "hold":
        return _sleep(config.hold)
    if config.workload == "cpu":
        iterations = config.iterations
        return lambda: count_down(iterations)
    return BlockingHttp(config)


def _sleep(seconds: float) -> BlockingTask:
    sleep = time.sleep  # bound at build time: under gevent it is gevent's sleep
    return lambda: sleep(seconds)


def async_task(config: RunnerConfig) -> AsyncTask:
    if config.workload in ("sleep", "hold"):
        seconds = config.rtt if config.workload == "sleep" else config.hold
        sleep = asyncio.sleep

        async def wait() -> None:
            await sleep(seconds)

        return wait
    if config.workload == "cpu":
        iterations = config.iterations

        async def count() -> None:
            count_down(iterations)

        return count
    return AsyncHttp(config)
