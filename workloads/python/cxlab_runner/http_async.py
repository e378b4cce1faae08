"""The asyncio model's HTTP client: a minimal HTTP/1.1 client over asyncio streams, so the
model pays for nothing but its event loop (no third-party client in the measurement). It
reads what a user's service may answer, not only the delay target's fixed-length bodies:
chunked bodies, answers with none (HEAD, 1xx, 204, 304), and bodies that end with the
connection; the answer's head by http_head.py, as the blocking client reads it. The whole
exchange, connecting included, runs within --request-timeout."""

from __future__ import annotations

import asyncio

from cxlab_runner.config import RunnerConfig
from cxlab_runner.failures import HttpStatusError, tagged, while_connecting
from cxlab_runner.http_head import Body, Head, HeadReader, ProtocolError
from cxlab_runner.http_request import (
    BODY_METHODS,
    READ_BYTES,
    request_target,
    request_timeout,
    reuses,
    ssl_context,
    timed_out,
)


class AsyncHttp:
    """One request over asyncio streams; a reused connection is kept by the task function,
    which one worker (a coroutine) runs at a time."""

    def __init__(self, config: RunnerConfig) -> None:
        self.target = target = request_target(config)
        self.reuse = reuses(config)
        self.timeout = request_timeout(config)
        self.context = ssl_context(config)
        self.ok = config.ok_statuses
        self.head = config.method == "HEAD"
        lines = [f"{config.method} {target.path} HTTP/1.1".encode()]
        lines.append(b"Host: " + target.authority.encode())
        lines += [name.encode() + b": " + value for name, value in config.headers]
        lines.append(b"Connection: " + (b"keep-alive" if self.reuse else b"close"))
        if config.body or config.method in BODY_METHODS:
            lines.append(b"Content-Length: %d" % len(config.body))
        self.request = b"\r\n".join(lines) + b"\r\n\r\n" + config.body
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __call__(self) -> None:
        try:
            await asyncio.wait_for(self._exchange(), self.timeout)
        except TimeoutError as error:  # asyncio's TimeoutError is the builtin since 3.11
            raise timed_out(self.timeout) from error

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
            head = await _head(reader)
            closes = await self._body(reader, head)
        except BaseException:
            writer.close()
            raise
        if self.reuse and not closes:
            self.streams = (reader, writer)
        else:
            writer.close()
        if head.status not in self.ok:
            raise HttpStatusError(f"HTTP {head.status} {head.reason}")

    async def _body(self, reader: asyncio.StreamReader, head: Head) -> bool:
        """Reads the answer's body whole; whether the connection ends with it."""
        body, length = head.body(self.head)
        if body is Body.CHUNKED:
            await _chunked(reader)
        elif body is Body.LENGTH:
            await _exactly(reader, length)
        elif body is Body.CLOSE:  # RFC 9112 6.3: the body ends with the connection
            await _until_closed(reader)
            return True
        return head.closes


async def _head(reader: asyncio.StreamReader) -> Head:
    """The final answer's head, within the contract's bound (interim answers skipped)."""
    bounded = HeadReader()
    while (head := bounded.line(await _line(reader, bounded.left))) is None:
        pass
    return head


async def _line(reader: asyncio.StreamReader, most: int) -> bytes:
    """One line, its end included, or b"" at the connection's end; of more than `most` bytes,
    its first most + 1 (the caller refuses it), read no further. The stream's own limit (64
    KiB, asyncio's default) bounds a piece, not the line."""
    parts: list[bytes] = []
    size = 0
    while size <= most:
        try:
            piece = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as error:  # the connection ended: what came
            parts.append(error.partial)
            break
        except asyncio.LimitOverrunError as error:  # longer than a piece: its start
            piece = await reader.readexactly(error.consumed)
            parts.append(piece)
            size += len(piece)
            continue
        parts.append(piece)
        break
    return b"".join(parts)[: most + 1]


async def _headers(reader: asyncio.StreamReader) -> None:
    """A chunked body's trailer lines, up to the blank one (each within the stream's limit)."""
    while (line := await reader.readline()) not in (b"\r\n", b"\n"):
        if not line:
            raise ProtocolError("the connection closed in the answer's trailers")


async def _exactly(reader: asyncio.StreamReader, size: int) -> None:
    """Reads and drops size bytes, a piece at a time (a huge length never allocates at once)."""
    while size > 0:
        piece = min(size, READ_BYTES)
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
    while await reader.read(READ_BYTES):
        pass
