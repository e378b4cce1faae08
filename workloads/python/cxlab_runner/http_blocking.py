"""The blocking models' HTTP client (sequential, threads, processes, gevent — whose
monkey-patching makes it cooperative): http.client for the request and the body, with the
answer's head read by http_head.py, as the asyncio client reads it.

--request-timeout bounds the whole request: the connection, the TLS handshake, sending, and
every read of the answer, each waiting only for what is left of it (a server that dribbles
its head a byte at a time is cut off at the bound, not at the bound per read)."""

from __future__ import annotations

import functools
import http.client
import io
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from cxlab_runner.config import RunnerConfig
from cxlab_runner.failures import HttpStatusError, tagged, while_connecting
from cxlab_runner.http_head import Body, HeadReader
from cxlab_runner.http_request import (
    BODY_METHODS,
    READ_BYTES,
    request_target,
    request_timeout,
    reuses,
    ssl_context,
    timed_out,
)


class BlockingHttp:
    """One request with http.client. One instance may serve several threads at once (threads'
    onDemand pool shares its task function), so a reused connection is kept per thread (per
    greenlet under gevent, whose monkey-patching makes threading.local greenlet-local): an
    http.client connection carries one request at a time, and two threads on one fail or,
    once one closes it under the other, hang."""

    def __init__(self, config: RunnerConfig) -> None:
        self.target = request_target(config)
        self.reuse = reuses(config)
        self.method = config.method
        self.timeout = request_timeout(config)
        self.context = ssl_context(config)
        self.ok = config.ok_statuses
        headers = [*config.headers, ("Connection", b"keep-alive" if self.reuse else b"close")]
        if config.body or config.method in BODY_METHODS:
            headers.append(("Content-Length", str(len(config.body)).encode()))
        self.headers = headers
        self.body = config.body or None
        # http.client adds Accept-Encoding: identity unless the user sends one
        self.skip_accept_encoding = any(n.lower() == "accept-encoding" for n, _ in headers)
        self.kept = threading.local()

    def _left(self, deadline: float) -> float:
        left = deadline - time.perf_counter()
        if left <= 0:  # settimeout(0) would make the socket non-blocking
            raise timed_out(self.timeout)
        return left

    def _connect(self, deadline: float) -> _Connection:
        """TCP, then for https the TLS handshake, within what is left of the deadline."""
        target = self.target
        connection = _Connection(target.host, target.port)
        if self.context is not None:
            connection.default_port = 443  # as HTTPSConnection's: no :443 in the Host header
        try:
            sock = _open(target.host, target.port, lambda: self._left(deadline))
            if self.context is not None:
                sock.settimeout(self._left(deadline))
                sock = self.context.wrap_socket(sock, server_hostname=target.host)
        except TimeoutError as error:
            raise timed_out(self.timeout) from error
        except Exception as error:
            raise tagged(error, while_connecting(error)) from None
        connection.sock = sock
        return connection

    def __call__(self) -> None:
        deadline = time.perf_counter() + self.timeout
        connection: _Connection | None = getattr(self.kept, "connection", None)
        self.kept.connection = None
        if connection is None:
            connection = self._connect(deadline)
        connection.deadline = deadline
        sock = connection.sock  # kept: a closing answer takes it from the connection
        try:
            sock.settimeout(self._left(deadline))  # sendall's bound for the whole request
            try:
                connection.putrequest(
                    self.method, self.target.path, skip_accept_encoding=self.skip_accept_encoding
                )
                for name, value in self.headers:
                    connection.putheader(name, value)
                connection.endheaders(self.body)
            except OSError as error:  # reset or closed before the request went out
                raise tagged(error, while_connecting(error)) from None
            response = connection.getresponse()
            while response.read1(READ_BYTES):  # one read at a time (read() would keep it all)
                pass
            response.read()  # closes what read1 leaves open (HEAD, an empty body)
            if response.length:  # cut short: read1 leaves that to its caller
                raise http.client.IncompleteRead(b"", response.length)
        except TimeoutError as error:
            connection.close()
            raise timed_out(self.timeout) from error
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


def _open(host: str, port: int, left: Callable[[], float]) -> socket.socket:
    """A TCP connection to the first of the host's addresses that takes one, each try within
    what is left (socket.create_connection gives each the whole timeout). socket is looked up
    at call time: gevent's once it has patched it."""
    failure: OSError | None = None
    for family, kind, protocol, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, protocol)
        try:
            sock.settimeout(left())
            sock.connect(address)
        except TimeoutError:
            sock.close()
            raise
        except OSError as error:
            sock.close()
            failure = error
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client does
        return sock
    raise failure or OSError(f"no address for {host}")


class _Connection(http.client.HTTPConnection):
    """An http.client connection whose socket BlockingHttp opened (TLS included), and whose
    answers are read within the deadline of the request they answer."""

    deadline = math.inf

    # A class attribute in http.client, which getresponse() calls with the socket alone: read
    # here, it hands the answer its request's deadline.
    @property
    def response_class(self) -> Callable[..., _Response]:  # type: ignore[override]
        return functools.partial(_Response, deadline=self.deadline)


class _Response(http.client.HTTPResponse):
    """An answer read within its request's deadline, its head by http_head.HeadReader: the
    contract's one bound on its size (http.client's own limits, 100 headers and 64 KiB a line,
    are not the other models'), every 1xx but 101 skipped (http.client skips only 100 and takes
    a 103 for the final answer). Its body is http.client's to read."""

    def __init__(self, sock: socket.socket, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(_Timed(sock, deadline), *args, **kwargs)  # type: ignore[arg-type]

    def begin(self) -> None:
        if self.headers is not None:  # already read
            return
        reader = HeadReader()
        while (head := reader.line(self.fp.readline(reader.left + 1))) is None:
            pass
        self.code = self.status = head.status
        self.reason = head.reason
        self.version = 10 if head.version == b"HTTP/1.0" else 11
        self.headers = self.msg = http.client.HTTPMessage()
        for name, value in head.fields.items():
            self.msg[name.decode("latin-1")] = value.decode("latin-1")
        body, length = head.body(self._method == "HEAD")
        self.chunked = body is Body.CHUNKED
        self.chunk_left = None
        self.length = {Body.NONE: 0, Body.LENGTH: length}.get(body)
        self.will_close = head.closes or body is Body.CLOSE


class _Timed:
    """What http.client.HTTPResponse asks of its socket (makefile): a reader whose every read
    of the socket waits only for what is left of the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline = sock, deadline

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline = sock, deadline
        self._raw = sock.makefile(
            "rb", buffering=0
        )  # counts as the socket's file, as http.client's

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        self._sock.settimeout(left)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()
