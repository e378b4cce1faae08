"""How a failed task failed (CONTRACT.md, "Failed tasks and their kinds"): each one is counted
under exactly one kind, in the Result's failureKinds and cxlab_task_failures_total{kind}.

The type of an error mostly says it: a timeout is a timeout wherever it struck, a refused
connection or an unknown name can only come from connecting. Where the type alone does not
say (an OSError such as a reset: before the request went out, no connection; after it, the
answer broke off), the HTTP clients tag the error with the phase it came from (`tagged`)."""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl

from cxlab_contract import runner_contract
from cxlab_contract.result import FAILURE_KINDS

KINDS: tuple[str, ...] = runner_contract().failure_kinds
assert KINDS == FAILURE_KINDS, "runner-contract.json and the Result's schema disagree"
CONNECT, TIMEOUT, TLS, STATUS, OTHER = KINDS

_ATTRIBUTE = "cxlab_failure_kind"
# No route to the server: connecting failed, whenever the error surfaced.
_UNREACHABLE = {
    errno.ECONNREFUSED,
    errno.ENETUNREACH,
    errno.EHOSTUNREACH,
    errno.EHOSTDOWN,
    errno.ENETDOWN,
    errno.EADDRNOTAVAIL,
}


class HttpStatusError(Exception):
    """An answer whose status is not one of --ok-status."""


def tagged(error: BaseException, kind: str) -> BaseException:
    """The error, marked with its kind (the phase it came from decides it)."""
    with contextlib.suppress(AttributeError):  # a type without a __dict__: its type decides
        setattr(error, _ATTRIBUTE, kind)
    return error


def while_connecting(error: BaseException) -> str:
    """The kind of an error raised before the request went out: connecting, the TLS
    handshake, or sending on a connection reset."""
    if isinstance(error, TimeoutError):
        return TIMEOUT
    if isinstance(error, ssl.SSLError | ssl.CertificateError):
        return TLS
    if isinstance(error, OSError):
        return CONNECT
    return OTHER


def kind_of(error: BaseException | str) -> str:
    """A failed task's kind: its tag, else its type's. A message alone (a task lost with its
    worker process, a thread never started) is `other`."""
    if isinstance(error, str):
        return OTHER
    kind = getattr(error, _ATTRIBUTE, None)
    if kind in KINDS:
        return str(kind)
    if isinstance(error, HttpStatusError):
        return STATUS
    if isinstance(error, TimeoutError):  # socket.timeout and asyncio's TimeoutError too
        return TIMEOUT
    if isinstance(error, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return OTHER  # the connection closed mid-answer, after the handshake
    if isinstance(error, ssl.SSLError | ssl.CertificateError):
        return TLS
    if isinstance(error, ConnectionRefusedError | socket.gaierror | socket.herror):
        return CONNECT
    if isinstance(error, OSError) and error.errno in _UNREACHABLE:
        return CONNECT
    return OTHER
