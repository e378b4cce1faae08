"""An answer's head (RFC 9112 4-6): its status line and header lines up to the blank line, read
within the contract's one bound (httpResponse.maxHeaderBytes, over the heads of any interim 1xx
answers before it too, as Go's client counts them), and how its body is framed. Sans I/O: the
blocking and the asyncio clients (http_blocking.py, http_async.py) feed it lines, and HeadMeter
counts the raw bytes of a client that parses them itself (geventhttpclient, in the locust
model), so that every model refuses the same heads."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from cxlab_contract import runner_contract

MAX_HEADER_BYTES = runner_contract().max_response_header_bytes
# What the clients read of the headers: the body's framing and the connection's end.
_FRAMING = frozenset({b"connection", b"content-length", b"transfer-encoding"})


class HeadTooLarge(Exception):
    """An answer's head over the bound: a failed task of kind other, read no further."""

    def __init__(self, limit: int = MAX_HEADER_BYTES) -> None:
        super().__init__(f"the answer's head is over {limit} bytes (httpResponse.maxHeaderBytes)")


class ProtocolError(Exception):
    """An answer that is not HTTP/1.x, or stops in the middle."""


class Body(Enum):
    """How an answer's body ends (RFC 9112 6.3)."""

    NONE = "none"  # HEAD, 101, 204, 304: with the head
    CHUNKED = "chunked"
    LENGTH = "length"  # after Content-Length bytes
    CLOSE = "close"  # with the connection


@dataclass(frozen=True)
class Head:
    """A final answer's head: what the clients act on."""

    version: bytes
    status: int
    reason: str
    fields: dict[bytes, bytes]  # the framing headers, names lower case, repeats joined ", "

    def tokens(self, name: bytes) -> set[bytes]:
        return {t.strip().lower() for t in self.fields.get(name, b"").split(b",")}

    @property
    def closes(self) -> bool:
        """Whether the connection ends with this answer, whatever its body."""
        connection = self.tokens(b"connection")
        http10 = self.version == b"HTTP/1.0" and b"keep-alive" not in connection
        return b"close" in connection or http10 or self.status == 101

    def body(self, head_request: bool) -> tuple[Body, int]:
        """How the body is framed, and for Body.LENGTH its length."""
        if head_request or self.status in (101, 204, 304):
            return Body.NONE, 0
        codings = self.fields.get(b"transfer-encoding")
        if codings is not None:  # RFC 9112 6.3: over Content-Length; chunked last, or to the close
            last = codings.split(b",")[-1].strip().lower()
            return (Body.CHUNKED, 0) if last == b"chunked" else (Body.CLOSE, 0)
        length = self.fields.get(b"content-length")
        if length is None:
            return Body.CLOSE, 0
        values = {v.strip() for v in length.split(b",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise ProtocolError(f"Content-Length {length[:40]!r}")
        return Body.LENGTH, int(next(iter(values)))


class HeadReader:
    """Fed an answer's lines one at a time (line endings included), refusing a head over the
    bound before it is read further; an interim answer (1xx but 101) is skipped, its head
    counted with the final one's (so a server sending 1xx answers without end is bounded too)."""

    def __init__(self, limit: int = MAX_HEADER_BYTES) -> None:
        self.limit = limit
        self.left = limit  # what the rest of this head may take: read a line of at most left + 1
        self._start: tuple[bytes, int, str] | None = None
        self._fields: dict[bytes, bytes] = {}

    def line(self, line: bytes) -> Head | None:
        """The final answer's head once its blank line has come, else None."""
        if len(line) > self.left:
            raise HeadTooLarge(self.limit)
        self.left -= len(line)
        if self._start is None:
            self._start = _status_line(line)
            return None
        if not line:
            raise ProtocolError("the connection closed in the answer's headers")
        if line not in (b"\r\n", b"\n"):
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name in _FRAMING:
                known = self._fields.get(name)
                self._fields[name] = value if known is None else known + b", " + value
            return None
        version, status, reason = self._start
        if 100 <= status < 200 and status != 101:  # interim (103 Early Hints): the final follows
            self._start, self._fields = None, {}
            return None
        return Head(version, status, reason, self._fields)


def _status_line(line: bytes) -> tuple[bytes, int, str]:
    if not line:
        raise ProtocolError("the connection closed before an answer")
    version, _, rest = line.strip().partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or not code.isdigit() or len(code) != 3:
        raise ProtocolError(f"not an HTTP/1.x answer: {line[:80]!r}")
    return version, int(code), reason.decode("latin-1")


@dataclass
class HeadMeter:
    """The same bound over raw bytes as they come, for a client that parses the head itself:
    an answer's head counted from its first byte to the end of its blank line, with the heads
    of the interim answers before it; `done` once a final answer's head has ended (its body is
    not counted)."""

    limit: int = MAX_HEADER_BYTES
    done: bool = False
    _count: int = 0  # the heads so far
    _line: int = 0  # bytes of the current line so far
    _last: int = 0  # the byte before, for a CRLF split between two reads
    _first: bytes = b""  # this answer's status line's start, for its code
    _since: int = 0  # where this answer began in the count

    def feed(self, data: bytes) -> None:
        position = 0
        while not self.done and position < len(data):
            end = data.find(b"\n", position)
            piece = data[position:] if end < 0 else data[position : end + 1]
            self._count += len(piece)
            if self._count > self.limit:
                raise HeadTooLarge(self.limit)
            if len(self._first) < 16 and self._count - self._since == self._line + len(piece):
                self._first += piece[: 16 - len(self._first)]  # (still the first line)
            if end < 0:
                self._line += len(piece)
                self._last = data[-1]
                return
            length = self._line + len(piece)
            before = data[end - 1] if end > position else self._last
            if length == 1 or (length == 2 and before == ord("\r")):
                self._answer_ended()
            self._line, self._last, position = 0, ord("\n"), end + 1

    def _answer_ended(self) -> None:
        code = self._first.split(b" ", 2)[1:2]
        interim = bool(code) and code[0][:1] == b"1" and code[0] != b"101"
        if interim:
            self._first, self._since = b"", self._count
        else:
            self.done = True
