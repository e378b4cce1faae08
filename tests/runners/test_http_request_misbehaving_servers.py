"""Every model against servers that misbehave (CONTRACT.md, "Failed tasks and their kinds",
"--request-timeout", "The answer's head"): a server that dribbles its headers is cut off at
--request-timeout, the whole request's bound, in every model; an answer's head over the
contract's one bound (httpResponse.maxHeaderBytes) is a failed task of kind `other`, read no
further than the bound, and a head within it (however many headers, however long a line) is
read whole, in every model alike.

Each server is a raw socket of the test's own that writes bytes no HTTP library would."""

from __future__ import annotations

import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import runner_argv

from cxlab.analysis.outcome import parse_result
from cxlab_contract import runner_contract

MODELS = ["sequential", "threads", "processes", "gevent", "asyncio", "locust", "goroutines"]
KINDS = runner_contract().failure_kinds
MAX_HEAD = runner_contract().max_response_header_bytes
DRIBBLE_SECONDS = 5.5  # how long /dribble takes over its head: far past --request-timeout 1s
LINE = 4096  # a filler header line, CRLF included


def _filler(size: int, name: str = "X-Filler") -> bytes:
    """Header lines of LINE bytes each (the last one shorter) making exactly `size` bytes."""
    lines, k = [], 0
    while size > 0:
        part = min(size, LINE)
        head = f"{name}-{k}: ".encode()
        if part < len(head) + 3:  # too short for a line of its own: widen the one before
            lines[-1] = lines[-1][:-2] + b"y" * part + b"\r\n"
            break
        lines.append(head + b"x" * (part - len(head) - 2) + b"\r\n")
        size -= part
        k += 1
    return b"".join(lines)


def _head(status: bytes, size: int, *fixed: bytes) -> bytes:
    """An answer's head of exactly `size` bytes: its status line, the fixed header lines, filler
    lines, and the blank line that ends it."""
    start = b"HTTP/1.1 " + status + b"\r\n" + b"".join(line + b"\r\n" for line in fixed)
    return start + _filler(size - len(start) - 2) + b"\r\n"


OK_HEADERS = (b"Content-Length: 2", b"Connection: close")


def _exactly(size: int) -> bytes:
    head = _head(b"200 OK", size, *OK_HEADERS)
    assert len(head) == size
    return head + b"ok"


def _dribble(send: Callable[[bytes], None]) -> None:
    """A header line every 0.1 s for DRIBBLE_SECONDS: each read gets bytes at once, and only
    a bound on the whole request stops the client."""
    send(b"HTTP/1.1 200 OK\r\n")
    lines = int(DRIBBLE_SECONDS / 0.1)
    for k in range(lines):
        send(f"X-Slow-{k}: 1\r\n".encode())
        time.sleep(0.1)
    send(b"Content-Length: 2\r\nConnection: close\r\n\r\nok")


# path → what the server writes after it has read the request's head
ANSWERS: dict[str, Callable[[Callable[[bytes], None]], None]] = {
    "/dribble": _dribble,
    # 2,000 headers of 4 KiB: an 8 MiB head, eight times the bound
    "/bomb": lambda send: send(_head(b"200 OK", 2000 * LINE, *OK_HEADERS) + b"ok"),
    # 256 headers (more than http.client's 100) making a head of the bound exactly
    "/at-the-bound": lambda send: send(_exactly(MAX_HEAD)),
    "/over-the-bound": lambda send: send(_exactly(MAX_HEAD + 1)),
    # one header line of 512 KiB (past asyncio's and http.client's 64 KiB a line)
    "/long-line": lambda send: send(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\nX-Long: "
        + b"z" * (512 << 10)
        + b"\r\n\r\nok"
    ),
    # the bound is over the heads of an answer's interim answers and its own, together
    "/interim": lambda send: send(_head(b"103 Early Hints", 400 << 10) + _exactly(600 << 10)),
    "/interims": lambda send: send(_head(b"103 Early Hints", 600 << 10) + _exactly(600 << 10)),
}


class _Misbehaving(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(30)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                piece = sock.recv(65536)
                if not piece:
                    return
                data += piece
            path = data.split(b" ", 2)[1].decode().partition("?")[0]
            ANSWERS[path](sock.sendall)
        except OSError:  # the client gave up (its timeout, its bound): what it counts is its own
            pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    running = _Misbehaving(("127.0.0.1", 0), _Handler)
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{running.server_address[1]}"
    running.shutdown()
    running.server_close()


@dataclass
class _Run:
    name: str
    process: subprocess.Popen[str]

    def result(self) -> dict[str, Any]:
        stdout, stderr = self.process.communicate(timeout=120)
        assert self.process.returncode == 0, (
            f"{self.name}: exit {self.process.returncode}: {stderr}"
        )
        result = parse_result(stdout)
        kinds = result["failureKinds"]
        assert sum(kinds.values()) == result["tasksFailed"], f"{self.name}: {kinds}"
        return result


def _start(model: str, url: str, *flags: str, tasks: int = 2) -> _Run:
    argv = runner_argv(model, "--workload", "http", "--target-mode", "direct", "--target-url",
                       url, "--tasks", str(tasks), "--workers", str(tasks), *flags)  # fmt: skip
    return _Run(url, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))  # fmt: skip


def _ok(run: _Run, tasks: int) -> dict[str, Any]:
    result = run.result()
    assert (result["tasksOk"], result["tasksFailed"]) == (tasks, 0), (run.name, result["errors"])
    return result


def _failed(run: _Run, kind: str, tasks: int) -> dict[str, Any]:
    result = run.result()
    want = {k: tasks if k == kind else 0 for k in KINDS}
    assert result["failureKinds"] == want, (run.name, result["errors"])
    return result


@pytest.mark.parametrize("model", MODELS)
def test_a_misbehaving_server_is_bounded_alike_in_every_model(model: str, server: str) -> None:
    bound = ["--request-timeout", "10s"]
    runs = {
        "dribble": _start(model, f"{server}/dribble", "--request-timeout", "1s"),
        "bomb": _start(model, f"{server}/bomb", *bound, tasks=4),
        "at": _start(model, f"{server}/at-the-bound", *bound, tasks=4),
        "over": _start(model, f"{server}/over-the-bound", *bound),
        "long line": _start(model, f"{server}/long-line", *bound),
        "interim": _start(model, f"{server}/interim", *bound),
        "interims": _start(model, f"{server}/interims", *bound),
    }
    try:
        # --request-timeout is the whole request's: the dribbled head is cut off at 1 s
        dribbled = _failed(runs["dribble"], "timeout", tasks=2)
        waves = -(-2 // dribbled["workers"])  # sequential's one worker: two requests in turn
        assert dribbled["wallSeconds"] < waves * 1.0 + 1.0 < DRIBBLE_SECONDS, dribbled

        # a head within the bound is read whole, however many headers and however long a line
        at = _ok(runs["at"], tasks=4)
        _ok(runs["long line"], tasks=2)
        _ok(runs["interim"], tasks=2)
        # one byte over it fails as the 8 MiB head does: kind other, the bound in the message
        failed = {}
        for name, tasks in (("over", 2), ("interims", 2), ("bomb", 4)):
            failed[name] = _failed(runs[name], "other", tasks=tasks)
            messages = " ".join(e["message"] for e in failed[name]["errors"])
            assert str(MAX_HEAD) in messages, (name, failed[name]["errors"])
    finally:
        for run in runs.values():
            if run.process.poll() is None:
                run.process.kill()
                run.process.communicate()
    # and read no further than the bound: four 8 MiB heads cost no more memory than four heads
    # of the bound read whole (32 MiB read would show)
    grown = failed["bomb"]["peakRssBytes"] - at["peakRssBytes"]
    assert grown < 8 << 20, f"{grown / 2**20:.1f} MiB more for the 8 MiB heads"
