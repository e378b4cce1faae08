"""What one task does, in a blocking form (sequential, threads, processes, gevent — which
monkey-patches the blocking calls) and an asyncio form. `--connection reuse` keeps one
connection per worker: a pool worker builds its own task function once, or shares one that
keeps its connections per thread; with one worker per task every connection is fresh."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from cxlab_contract.durations import format_duration
from cxlab_runner.config import RunnerConfig

# A task waits at most this long for the delay target before it counts as failed.
HTTP_TIMEOUT_SECONDS = 300.0

BlockingTask = Callable[[], None]
AsyncTask = Callable[[], Awaitable[None]]


class HttpStatusError(Exception):
    pass


def count_down(iterations: int) -> None:
    """The GIL seed's loop: pure interpreter work, no I/O, nothing to release the GIL."""
    n = iterations
    while n > 0:
        n -= 1


def request_target(config: RunnerConfig) -> tuple[str, int, str]:
    """Host, port and path (with ?rtt=) of the delay target."""
    assert config.target_url is not None  # checked with the flags (config.py)
    url = urlsplit(config.target_url)
    assert url.hostname is not None
    query = f"rtt={format_duration(config.rtt)}"
    path = (url.path or "/") + "?" + (f"{url.query}&{query}" if url.query else query)
    return url.hostname, url.port or 80, path


def _reuses(config: RunnerConfig) -> bool:
    # A worker that runs one task has nothing to reuse a connection for; staying stateless
    # lets one task function serve every worker.
    return config.connection == "reuse" and not config.one_per_task


def blocking_task(config: RunnerConfig) -> BlockingTask:
    if config.workload == "sleep":
        return _sleep(config.rtt)
    if config.workload == "hold":
        return _sleep(config.hold)
    if config.workload == "cpu":
        iterations = config.iterations
        return lambda: count_down(iterations)
    return _BlockingHttp(config)


def _sleep(seconds: float) -> BlockingTask:
    sleep = time.sleep  # bound at build time: under gevent it is gevent's sleep
    return lambda: sleep(seconds)


class _BlockingHttp:
    """One GET to the delay target with http.client (cooperative under gevent). One instance
    may serve several threads at once (threads' onDemand pool shares its task function), so a
    reused connection is kept per thread (per greenlet under gevent, whose monkey-patching
    makes threading.local greenlet-local): an http.client connection carries one request at
    a time, and two threads on one fail or, once one closes it under the other, hang."""

    def __init__(self, config: RunnerConfig) -> None:
        self.host, self.port, self.path = request_target(config)
        self.reuse = _reuses(config)
        self.headers = {"Connection": "keep-alive" if self.reuse else "close"}
        self.kept = threading.local()

    def __call__(self) -> None:
        connection = getattr(self.kept, "connection", None) or http.client.HTTPConnection(
            self.host, self.port, timeout=HTTP_TIMEOUT_SECONDS
        )
        self.kept.connection = None
        try:
            connection.request("GET", self.path, headers=self.headers)
            response = connection.getresponse()
            response.read()
            if not 200 <= response.status < 300:
                raise HttpStatusError(f"HTTP {response.status} {response.reason}")
        except BaseException:
            connection.close()
            raise
        if self.reuse:
            self.kept.connection = connection
        else:
            connection.close()


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
    return _AsyncHttp(config)


class _AsyncHttp:
    """One GET over asyncio streams: a minimal HTTP/1.1 client, so the asyncio model pays for
    nothing but its event loop (no third-party client in the measurement)."""

    def __init__(self, config: RunnerConfig) -> None:
        self.host, self.port, path = request_target(config)
        self.reuse = _reuses(config)
        self.request = (
            f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Connection: {'keep-alive' if self.reuse else 'close'}\r\n\r\n"
        ).encode()
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __call__(self) -> None:
        await asyncio.wait_for(self._exchange(), HTTP_TIMEOUT_SECONDS)

    async def _exchange(self) -> None:
        reader, writer = self.streams or await asyncio.open_connection(self.host, self.port)
        try:
            writer.write(self.request)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            parts = status_line.split(None, 2)
            if len(parts) < 2 or not parts[1].startswith(b"2"):
                raise HttpStatusError(status_line.decode(errors="replace").strip() or "no reply")
        except BaseException:
            writer.close()
            self.streams = None
            raise
        if self.reuse:
            self.streams = (reader, writer)
        else:
            writer.close()
