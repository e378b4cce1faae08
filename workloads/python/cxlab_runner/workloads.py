"""What one task does, in a blocking form (sequential, threads, processes, gevent — which
monkey-patches the blocking calls) and an asyncio form. `--connection reuse` keeps one
connection per worker: a pool worker builds its own task function once, or shares one that
keeps its connections per thread; with one worker per task every connection is fresh.

An http task sends --method to --target-url (with ?rtt= for the delay target, as given with
--target-mode direct), --header and --header-env, --body with Content-Length, over TLS for
https; it succeeds on a whole answer whose status is one of --ok-status, read within
--request-timeout. A failure carries its kind (failures.py): the clients tag what the type of
an error does not say, the phase it came from."""

from __future__ import annotations

import asyncio
import http.client
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from cxlab_contract.durations import format_duration
from cxlab_runner.config import RunnerConfig
from cxlab_runner.failures import HttpStatusError, tagged, while_connecting

# --request-timeout 0s: a task waits at most this long for the delay target before it fails.
HTTP_TIMEOUT_SECONDS = 300.0
# Methods whose request carries Content-Length even with no body (as http.client and Go send).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_READ_BYTES = 65536

BlockingTask = Callable[[], None]
AsyncTask = Callable[[], Awaitable[None]]


def count_down(iterations: int) -> None:
    """The GIL seed's loop: pure interpreter work, no I/O, nothing to release the GIL."""
    n = iterations
    while n > 0:
        n -= 1


@dataclass(frozen=True)
class Target:
    """Where an http task's request goes."""

    scheme: str
    host: str
    port: int
    path: str  # with the query: the request line's target

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def authority(self) -> str:
        """The Host header: the port only when it is not the scheme's own."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.tls else 80) else f"{host}:{self.port}"


def request_target(config: RunnerConfig) -> Target:
    """--target-url, with ?rtt= added for the delay target (--target-mode delay)."""
    assert config.target_url is not None  # checked with the flags (config.py)
    url = urlsplit(config.target_url)
    assert url.hostname is not None
    host = url.hostname if url.hostname.isascii() else url.hostname.encode("idna").decode()
    query = url.query
    if config.target_mode == "delay":
        rtt = f"rtt={format_duration(config.rtt)}"
        query = f"{query}&{rtt}" if query else rtt
    path = (url.path or "/") + (f"?{query}" if query else "")
    port = url.port or (443 if url.scheme == "https" else 80)
    return Target(url.scheme, host, port, path)


def request_timeout(config: RunnerConfig) -> float:
    """The most one request may take: --request-timeout, or the runner's own allowance."""
    return config.request_timeout or HTTP_TIMEOUT_SECONDS


_CONTEXTS: dict[tuple[bool, str | None], ssl.SSLContext] = {}


def ssl_context(config: RunnerConfig) -> ssl.SSLContext | None:
    """For an https target: the system's CA certificates, --tls-ca's instead, or with
    --insecure-skip-verify no check at all. None for http. One per process, as a client
    keeps one: loading the system's certificates takes some 50 ms of CPU, and gevent's and
    asyncio's workers build their task functions within the task phase. Built after gevent's
    patching (the models build their tasks then), so it is gevent's context under gevent and
    Locust."""
    if not request_target(config).tls:
        return None
    key = (config.insecure_skip_verify, config.tls_ca_pem)
    context = _CONTEXTS.get(key)  # (two threads may both build one: either will do)
    if context is None:
        if config.insecure_skip_verify:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no certificates to load
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cadata=config.tls_ca_pem)
        context = _CONTEXTS.setdefault(key, context)
    return context


def _reuses(config: RunnerConfig) -> bool:
    # A worker that runs one task has nothing to reuse a connection for; staying stateless
    # lets one task function serve every worker.
    return config.connection == "reuse" and not config.one_per_task


def _timed_out(timeout: float) -> TimeoutError:
    return TimeoutError(f"no whole answer within {format_duration(timeout)}")


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


class _Response(http.client.HTTPResponse):
    """http.client skips a 100 Continue before the final answer but takes any other interim
    one (103 Early Hints) for the final answer, leaving the real one unread: every 1xx but
    101 is skipped here, as the asyncio client and Go's do."""

    def _read_status(self) -> tuple[str, int, str]:
        version, status, reason = super()._read_status()  # type: ignore[misc]  # (untyped)
        if 100 < status < 200 and status != 101:
            return version, http.client.CONTINUE, reason  # begin() skips its headers
        return version, status, reason


class _BlockingHttp:
    """One request with http.client (cooperative under gevent). One instance may serve
    several threads at once (threads' onDemand pool shares its task function), so a reused
    connection is kept per thread (per greenlet under gevent, whose monkey-patching makes
    threading.local greenlet-local): an http.client connection carries one request at a time,
    and two threads on one fail or, once one closes it under the other, hang.

    --request-timeout bounds the whole exchange: each step (connect and handshake, send, each
    read of the answer) may wait only for what is left of it, and an answer read whole after
    it, trickling in, fails all the same."""

    def __init__(self, config: RunnerConfig) -> None:
        self.target = target = request_target(config)
        self.reuse = _reuses(config)
        self.method = config.method
        self.timeout = request_timeout(config)
        self.context = ssl_context(config)
        self.ok = config.ok_statuses
        headers = [*config.headers, ("Connection", b"keep-alive" if self.reuse else b"close")]
        if config.body or config.method in _BODY_METHODS:
            headers.append(("Content-Length", str(len(config.body)).encode()))
        self.headers = headers
        self.body = config.body or None
        # http.client adds Accept-Encoding: identity unless the user sends one
        self.skip_accept_encoding = any(n.lower() == "accept-encoding" for n, _ in headers)
        self.path = target.path
        self.kept = threading.local()

    def _connect(self, deadline: float) -> http.client.HTTPConnection:
        target = self.target
        timeout = self._left(deadline)
        connection: http.client.HTTPConnection
        if self.context is not None:
            connection = http.client.HTTPSConnection(
                target.host, target.port, timeout=timeout, context=self.context
            )
        else:
            connection = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
        connection.response_class = _Response
        try:
            connection.connect()  # TCP, then for https the TLS handshake
        except TimeoutError as error:
            connection.close()
            raise _timed_out(self.timeout) from error
        except Exception as error:
            connection.close()
            raise tagged(error, while_connecting(error)) from None
        return connection

    def _left(self, deadline: float) -> float:
        left = deadline - time.perf_counter()
        if left <= 0:  # settimeout(0) would make the socket non-blocking
            raise _timed_out(self.timeout)
        return left

    def __call__(self) -> None:
        deadline = time.perf_counter() + self.timeout
        connection: http.client.HTTPConnection | None = getattr(self.kept, "connection", None)
        self.kept.connection = None
        if connection is None:
            connection = self._connect(deadline)
        sock = connection.sock  # kept: a closing answer takes it from the connection
        try:
            sock.settimeout(self._left(deadline))
            try:
                connection.putrequest(
                    self.method, self.path, skip_accept_encoding=self.skip_accept_encoding
                )
                for name, value in self.headers:
                    connection.putheader(name, value)
                connection.endheaders(self.body)
            except OSError as error:  # reset or closed before the request went out
                raise tagged(error, while_connecting(error)) from None
            sock.settimeout(self._left(deadline))
            response = connection.getresponse()
            while True:  # one read at a time, each within what is left (read() would loop)
                sock.settimeout(self._left(deadline))
                if not response.read1(_READ_BYTES):
                    break
            response.read()  # closes what read1 leaves open (HEAD, an empty body)
            if response.length:  # cut short: read1 leaves that to its caller
                raise http.client.IncompleteRead(b"", response.length)
            if time.perf_counter() > deadline:
                raise _timed_out(self.timeout)
        except TimeoutError as error:
            connection.close()
            raise _timed_out(self.timeout) from error
        except BaseException:
            connection.close()
            raise
        # An answer that closes the connection has taken it (http.client's will_close).
        if self.reuse and connection.sock is not None:
            self.kept.connection = connection
        else:
            connection.close()
        if response.status not in self.ok:
            raise HttpStatusError(f"HTTP {response.status} {response.reason}")


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


class ProtocolError(Exception):
    """An answer that is not HTTP/1.x, or stops in the middle."""


class _AsyncHttp:
    """One request over asyncio streams: a minimal HTTP/1.1 client, so the asyncio model pays
    for nothing but its event loop (no third-party client in the measurement). It reads what
    a user's service may answer, not only the delay target's fixed-length bodies: chunked
    bodies, answers with none (HEAD, 1xx, 204, 304), and bodies that end with the connection.
    The whole exchange, connecting included, runs within --request-timeout."""

    def __init__(self, config: RunnerConfig) -> None:
        self.target = target = request_target(config)
        self.reuse = _reuses(config)
        self.timeout = request_timeout(config)
        self.context = ssl_context(config)
        self.ok = config.ok_statuses
        self.head = config.method == "HEAD"
        lines = [f"{config.method} {target.path} HTTP/1.1".encode()]
        lines.append(b"Host: " + target.authority.encode())
        lines += [name.encode() + b": " + value for name, value in config.headers]
        lines.append(b"Connection: " + (b"keep-alive" if self.reuse else b"close"))
        if config.body or config.method in _BODY_METHODS:
            lines.append(b"Content-Length: %d" % len(config.body))
        self.request = b"\r\n".join(lines) + b"\r\n\r\n" + config.body
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __call__(self) -> None:
        try:
            await asyncio.wait_for(self._exchange(), self.timeout)
        except TimeoutError as error:  # asyncio's TimeoutError is the builtin since 3.11
            raise _timed_out(self.timeout) from error

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        target = self.target
        try:
            if self.context is None:
                return await asyncio.open_connection(target.host, target.port)
            return await asyncio.open_connection(
                target.host,
                target.port,
                ssl=self.context,
                server_hostname=target.host,
                ssl_handshake_timeout=self.timeout,
            )
        except Exception as error:  # (a cancellation is the timeout's, above)
            raise tagged(error, while_connecting(error)) from None

    async def _exchange(self) -> None:
        streams, self.streams = self.streams, None
        reader, writer = streams or await self._connect()
        try:
            writer.write(self.request)
            try:
                await writer.drain()
            except OSError as error:  # reset or closed before the request went out
                raise tagged(error, while_connecting(error)) from None
            status, reason, closes = await self._answer(reader)
        except BaseException:
            writer.close()
            raise
        if self.reuse and not closes:
            self.streams = (reader, writer)
        else:
            writer.close()
        if status not in self.ok:
            raise HttpStatusError(f"HTTP {status} {reason}")

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, str, bool]:
        """Reads one whole answer: (status, reason, whether the connection ends with it)."""
        while True:
            line = await reader.readline()
            if not line:
                raise ProtocolError("the connection closed before an answer")
            version, _, rest = line.strip().partition(b" ")
            code, _, reason = rest.partition(b" ")
            if not version.startswith(b"HTTP/1.") or not code.isdigit() or len(code) != 3:
                raise ProtocolError(f"not an HTTP/1.x answer: {line[:80]!r}")
            status = int(code)
            headers = await _headers(reader)
            if not 100 <= status < 200 or status == 101:
                break  # 1xx but 101: an interim answer (103 Early Hints), the final one follows
        connection = {t.strip().lower() for t in headers.get(b"connection", b"").split(b",")}
        closes = b"close" in connection
        closes |= version == b"HTTP/1.0" and b"keep-alive" not in connection
        text = reason.decode("latin-1")
        if self.head or status in (101, 204, 304):
            return status, text, closes or status == 101
        codings = headers.get(b"transfer-encoding")
        length = headers.get(b"content-length")
        if codings is not None:
            if codings.split(b",")[-1].strip().lower() != b"chunked":
                await _until_closed(reader)  # RFC 9112 6.3: the body ends with the connection
                return status, text, True
            await _chunked(reader)
        elif length is not None:
            values = {v.strip() for v in length.split(b",")}
            if len(values) != 1 or not next(iter(values)).isdigit():
                raise ProtocolError(f"Content-Length {length[:40]!r}")
            await _exactly(reader, int(next(iter(values))))
        else:
            await _until_closed(reader)
            return status, text, True
        return status, text, closes


async def _headers(reader: asyncio.StreamReader) -> dict[bytes, bytes]:
    """An answer's header lines up to the blank one; a name given twice is joined with ", "."""
    headers: dict[bytes, bytes] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n"):
        if not line:
            raise ProtocolError("the connection closed in the answer's headers")
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip()
        headers[name] = headers[name] + b", " + value if name in headers else value
    return headers


async def _exactly(reader: asyncio.StreamReader, size: int) -> None:
    """Reads and drops size bytes, a piece at a time (a huge length never allocates at once)."""
    while size > 0:
        piece = min(size, _READ_BYTES)
        await reader.readexactly(piece)
        size -= piece


async def _chunked(reader: asyncio.StreamReader) -> None:
    """A chunked body (RFC 9112 7.1): sized chunks up to the last, then trailer lines."""
    while True:
        line = await reader.readline()
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ProtocolError(f"not a chunk size: {line[:40]!r}") from None
        if size == 0:
            break
        await _exactly(reader, size + 2)  # the chunk and its CRLF
    await _headers(reader)  # the trailers, up to the blank line


async def _until_closed(reader: asyncio.StreamReader) -> None:
    while await reader.read(_READ_BYTES):
        pass
