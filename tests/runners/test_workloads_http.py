"""The http workload against a service of the test's own, as against a user's (CONTRACT.md,
Flags: --target-mode direct, --method, --header, --header-env, --body, --ok-status,
--request-timeout, --tls-ca, --insecure-skip-verify; "Failed tasks and their kinds"), both
runners and every model run for real. The service checks what reaches it; each failed task
must come back under its one kind, in the Result and on /metrics; the --header-env secret
never shows in what a runner prints or writes.

A model's runs start together (each is a process that mostly imports, waits or sleeps), so the
module stays fast on two cores."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import runner_argv, scrape, wait_at_barrier
from prometheus_client.parser import text_string_to_metric_families

from cxlab.analysis.outcome import parse_result
from cxlab.barrier import release
from cxlab.local.delay_target import free_port
from cxlab_contract import runner_contract
from cxlab_runner.config import UsageError, parse_config

MODELS = ["sequential", "threads", "processes", "gevent", "asyncio", "locust", "goroutines"]
KINDS = runner_contract().failure_kinds
SECRET = "s3cret-7f1d-never-printed"  # what --header-env sends, from the environment
ENV = {**os.environ, "CXLAB_TEST_TOKEN": SECRET, "CXLAB_TEST_EMPTY": ""}
TOKEN = ["--header-env", "X-Token=CXLAB_TEST_TOKEN"]
BODY = "the body, sent with Content-Length"
SLOW_SECONDS = 3.0  # how long /slow takes to answer: far past --request-timeout 200ms


@dataclass
class _Seen:
    """What the service saw: requests /echo found wrong, connections accepted."""

    wrong: list[str] = field(default_factory=list)
    echoed: int = 0
    accepted: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Service(http.server.ThreadingHTTPServer):
    """A user's service on loopback, over TLS with a context: each path answers in its own
    way (_Answer)."""

    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.tls = tls
        self.seen = _Seen()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.server_address[1]}{path}"

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.seen.lock:
            self.seen.accepted += 1
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The handshake on the connection's own thread: one client that refuses the
        # certificate (or stalls) holds up no other.
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except OSError:  # the client refused the certificate: what it counts is its own
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client gone at its --request-timeout leaves /slow a broken pipe."""


class _Answer(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the client says close
    disable_nagle_algorithm = True
    server: _Service

    def _any(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        route = path.strip("/") or "ok"
        getattr(self, f"_{route}")(body, query)

    do_GET = do_PUT = do_POST = do_HEAD = do_PATCH = do_DELETE = do_OPTIONS = _any

    def _reply(self, status: int, body: bytes = b"ok", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", headers.pop("length", str(len(body))))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(body)

    def _ok(self, body: bytes, query: str) -> None:
        self._reply(200)

    def _echo(self, body: bytes, query: str) -> None:
        """The request --method PUT, the two headers and --body build, as sent (direct):
        answered 500, 400 if anything is wrong."""
        want = {
            "method": ("PUT", self.command),
            "X-Token": (SECRET, self.headers.get("X-Token")),
            "X-Plain": ("plain value", self.headers.get("X-Plain")),
            "Content-Length": (str(len(BODY)), self.headers.get("Content-Length")),
            "body": (BODY.encode(), body),
            "query": ("q=1", query),  # direct: no rtt= added
        }
        wrong = [f"{what}: {got!r}" for what, (expected, got) in want.items() if got != expected]
        with self.server.seen.lock:
            self.server.seen.echoed += 1
            self.server.seen.wrong += [w.replace(SECRET, "<the secret>") for w in wrong]
        # 500 when right: the run counts it ok with --ok-status 200-299,500
        self._reply(400 if wrong else 500, b"; ".join(w.encode() for w in wrong) or b"right")

    def _delay(self, body: bytes, query: str) -> None:
        """--target-mode delay (the default) adds rtt=<rtt> to the URL's query."""
        self._reply(200 if sorted(query.split("&")) == ["q=1", "rtt=1ms"] else 400)

    def _fail(self, body: bytes, query: str) -> None:
        self._reply(500, b"failed")

    def _slow(self, body: bytes, query: str) -> None:
        """The head at once, then the body a byte at a time over SLOW_SECONDS: a request
        timeout must bound the whole exchange, not each read."""
        self.send_response(200)
        self.send_header("Content-Length", "30")
        self.end_headers()
        for _ in range(30):
            self.wfile.write(b"x")
            time.sleep(SLOW_SECONDS / 30)

    def _chunked(self, body: bytes, query: str) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")

    def _close(self, body: bytes, query: str) -> None:
        """No length: the body ends with the connection (RFC 9112 6.3)."""
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the close")
        self.close_connection = True

    def _head(self, body: bytes, query: str) -> None:
        self._reply(200, b"ten bytes!")  # HEAD: Content-Length 10, no body

    def _empty(self, body: bytes, query: str) -> None:
        self._reply(204)

    def _unchanged(self, body: bytes, query: str) -> None:
        self._reply(304, length="100")  # the length of what did not change; no body

    def _early(self, body: bytes, query: str) -> None:
        self.wfile.write(
            b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        )

    def log_message(self, *_: Any) -> None:
        pass


def _self_signed(folder: Path, name: str, san: str) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test's certificates")
    cert, key = folder / f"{name}.pem", folder / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName={san}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """For 127.0.0.1, where the runners find the service."""
    return _self_signed(tmp_path_factory.mktemp("tls"), "localhost", "IP:127.0.0.1,DNS:localhost")


@pytest.fixture(scope="module")
def misnamed_certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """For another name: trusted or not, not 127.0.0.1's."""
    return _self_signed(tmp_path_factory.mktemp("tls"), "elsewhere", "DNS:elsewhere.example")


@dataclass
class _Services:
    plain: _Service
    secure: _Service  # TLS with `certificate`
    misnamed: _Service  # TLS with `misnamed_certificate`


@pytest.fixture
def services(
    certificate: tuple[Path, Path], misnamed_certificate: tuple[Path, Path]
) -> Iterator[_Services]:
    """The service over plain HTTP, and over TLS with each certificate."""
    contexts = []
    for pair in (certificate, misnamed_certificate):
        contexts.append(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
        contexts[-1].load_cert_chain(*pair)
    running = _Services(_Service(), _Service(contexts[0]), _Service(contexts[1]))
    yield running
    for service in (running.plain, running.secure, running.misnamed):
        service.shutdown()
        service.server_close()


@dataclass
class _Run:
    """One runner, started with the secret in its environment."""

    name: str
    process: subprocess.Popen[str]
    stdout: str = ""
    stderr: str = ""

    def result(self) -> dict[str, Any]:
        self.stdout, self.stderr = self.process.communicate(timeout=90)
        assert self.process.returncode == 0, f"{self.name}: {self.stderr}"
        for where, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            assert SECRET not in text, f"{self.name}: the --header-env secret on {where}"
        result = parse_result(self.stdout)  # validated against the schema
        kinds = result["failureKinds"]
        assert list(kinds) == list(KINDS), f"{self.name}: {kinds}"
        assert sum(kinds.values()) == result["tasksFailed"], f"{self.name}: {kinds}"
        return result


def _start(name: str, model: str, url: str, *flags: str, tasks: int = 3, workers: int = 2) -> _Run:
    argv = runner_argv(model, "--workload", "http", "--tasks", str(tasks),
                       "--workers", str(workers), "--target-url", url, *TOKEN, *flags)  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=ENV)  # fmt: skip
    return _Run(name, process)


def _stop(runs: list[_Run]) -> None:
    for run in runs:
        if run.process.poll() is None:
            run.process.kill()
            run.process.communicate()


def _ok(run: _Run, tasks: int = 3) -> dict[str, Any]:
    result = run.result()
    assert (result["tasksOk"], result["tasksFailed"]) == (tasks, 0), (run.name, result["errors"])
    return result


def _failed(run: _Run, kind: str, tasks: int = 3) -> dict[str, Any]:
    result = run.result()
    want = {k: tasks if k == kind else 0 for k in KINDS}
    assert result["failureKinds"] == want, (run.name, result["errors"])
    assert result["tasksOk"] == 0
    if result["locustWorkers"] is None:  # (a Locust master's latencies are Locust's: all)
        assert result["latencySeconds"]["max"] == 0
    assert SECRET not in json.dumps(result)
    return result


@pytest.mark.parametrize("model", MODELS)
def test_requests_reach_the_service_and_failures_have_their_kind(
    model: str,
    services: _Services,
    certificate: tuple[Path, Path],
    misnamed_certificate: tuple[Path, Path],
) -> None:
    # Each run checks several things at once (a Locust start costs 1.5 s of CPU): the echo
    # run, the request as built, over TLS with --tls-ca, a 500 counted ok by --ok-status.
    plain, secure, misnamed = services.plain, services.secure, services.misnamed
    timeout = ["--request-timeout", "200ms"]
    runs = {
        "echo": _start("echo", model, secure.url("/echo?q=1"), "--target-mode", "direct",
                       "--method", "PUT", "--header", "X-Plain:  plain value ", "--body", BODY,
                       "--tls-ca", str(certificate[0]), "--ok-status", "200-299,500",
                       "--connection", "reuse", tasks=4),
        "refused": _start("refused", model, f"http://127.0.0.1:{free_port()}/"),
        "timeout": _start("timeout", model, plain.url("/slow"), "--target-mode", "direct",
                          *timeout, tasks=2),
        "status": _start("status", model, plain.url("/fail"), "--target-mode", "direct",
                         "--method", "POST", "--connection", "reuse", tasks=4),
        # the chain unknown; the chain trusted but the name another's; neither checked
        "unknown CA": _start("unknown CA", model, secure.url("/"), "--target-mode", "direct"),
        "wrong name": _start("wrong name", model, misnamed.url("/"), "--target-mode", "direct",
                             "--tls-ca", str(misnamed_certificate[0])),
        "insecure": _start("insecure", model, misnamed.url("/"), "--target-mode", "direct",
                           "--insecure-skip-verify"),
    }  # fmt: skip
    # (Locust's ?rtt=: tests/runners/test_result.py's delay target, at 1.5 s a start)
    if model != "locust":
        runs["delay"] = _start("delay", model, plain.url("/delay?q=1"), "--rtt", "1ms")
    try:
        echo = _ok(runs["echo"], tasks=4)
        assert secure.seen.wrong == [] and secure.seen.echoed == 4, secure.seen.wrong
        # the service's own time: no RTT simulated, so no floor and no efficiency
        assert (echo["rttSeconds"], echo["floorSeconds"], echo["efficiency"]) == (None,) * 3
        if "delay" in runs:
            delay = _ok(runs["delay"])
            assert delay["rttSeconds"] == 0.001 and delay["floorSeconds"] is not None
        _failed(runs["refused"], "connect")
        timed_out = _failed(runs["timeout"], "timeout", tasks=2)
        assert timed_out["wallSeconds"] < SLOW_SECONDS / 2  # it did not wait for the answer
        _failed(runs["status"], "status", tasks=4)
        _failed(runs["unknown CA"], "tls")
        _failed(runs["wrong name"], "tls")
        _ok(runs["insecure"])
    finally:
        _stop(list(runs.values()))


# asyncio's own client, http.client (the blocking models'), Go's
@pytest.mark.parametrize("model", ["asyncio", "threads", "goroutines"])
def test_every_framing_of_an_answer_is_read_whole(model: str, services: _Services) -> None:
    # One worker reusing its connection: an answer misread leaves the next one garbled (or
    # waiting for a body that never comes: --request-timeout fails it).
    plain = services.plain
    answers = {
        "chunked": ("/chunked", []),
        "close-delimited": ("/close", []),
        "HEAD with a length": ("/head", ["--method", "HEAD"]),
        "204": ("/empty", []),
        "304 with a length": ("/unchanged", ["--ok-status", "304"]),
        "103 then 200": ("/early", []),
    }
    runs = [
        _start(name, model, plain.url(path), "--target-mode", "direct", "--connection", "reuse",
               "--request-timeout", "5s", *flags, workers=1)
        for name, (path, flags) in answers.items()
    ]  # fmt: skip
    try:
        for run in runs:
            _ok(run)
    finally:
        _stop(runs)
    # one connection carried each run's three answers, but the close-delimited ones
    assert plain.seen.accepted == len(answers) - 1 + 3


def _kinds(text: str) -> dict[str, float]:
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "cxlab_task_failures_total"
    }


@pytest.mark.parametrize("model", ["asyncio", "processes", "goroutines"])
def test_failure_kinds_are_counted_on_metrics_from_the_start(model: str) -> None:
    port = free_port()
    argv = runner_argv(model, "--workload", "http", "--tasks", "3", "--workers", "3",
                       "--target-url", f"http://127.0.0.1:{free_port()}/",
                       "--metrics-port", str(port), "--barrier-timeout", "30s",
                       "--linger", "10s")  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_at_barrier(f"127.0.0.1:{port}", process, 30)
        before = _kinds(scrape(port))  # at the barrier: no task has run
        assert release([f"127.0.0.1:{port}"]) == []
        assert process.stdout is not None
        result = json.loads(process.stdout.readline())  # the tasks are done; it lingers
        after = _kinds(scrape(port))
    finally:
        process.terminate()
        process.communicate()
    assert before == dict.fromkeys(KINDS, 0.0)
    assert after == {**dict.fromkeys(KINDS, 0.0), "connect": 3.0}
    assert result["failureKinds"] == {**dict.fromkeys(KINDS, 0), "connect": 3}


def test_a_distributed_locust_master_counts_its_workers_failure_kinds(
    services: _Services,
) -> None:
    # The master's Result is Locust's aggregated statistics: a worker reports each failure
    # with its kind in it, and the master reads the kind back.
    plain = services.plain
    address = f"127.0.0.1:{free_port()}"
    flags = ["--target-mode", "direct", "--locust-master", address]
    master = _start("master", "locust", plain.url("/fail"), *flags, "--expect-workers", "1",
                    "--barrier-timeout", "60s", "--metrics-port", str(free_port()), "--pod", "1",
                    tasks=4)  # fmt: skip
    worker = _start("worker", "locust", plain.url("/fail"), *flags, "--pod", "0", tasks=4)
    try:
        for run in (master, worker):
            _failed(run, "status", tasks=4)
    finally:
        _stop([master, worker])


def test_a_scrape_during_a_processes_trial_sees_the_childrens_kinds() -> None:
    # Live counts come from the children's shared memory (the pipe brings theirs at the end
    # only); the parent adds its own (a task lost with its worker).
    from cxlab_runner.failures import HttpStatusError
    from cxlab_runner.models.processes_model import ProcessRecorder, SharedCounts, _Failures
    from cxlab_runner.recorder import TaskRecorder

    counts = SharedCounts(2)
    _Failures(0, counts).add(ConnectionRefusedError(111, "Connection refused"))
    second = _Failures(1, counts)
    second.add(TimeoutError("no whole answer within 200ms"))
    second.add(HttpStatusError("HTTP 500"))
    parent = TaskRecorder()
    parent.failed("task lost with its worker process")
    live = ProcessRecorder(counts, parent)
    assert live.failure_kinds() == {"connect": 1, "timeout": 1, "tls": 0, "status": 1, "other": 1}
    assert live.failed_count() == 4
    assert second.kinds == {"timeout": 1, "status": 1}  # what the pipe carries at the end


SHAPES = {
    "closed loop for a duration": ["--duration", "1s", "--workers", "2"],
    "arrivals with a warm-up": ["--arrival", "uniform", "--rate", "10", "--duration", "1s",
                                "--warmup", "300ms", "--workers", "4"],
}  # fmt: skip


# Each way a duration run counts its failed tasks: sequential and gevent run threads' (openloop.py's
# closed loop and Arrivals.run), asyncio, processes, Locust and Go their own.
SHAPE_MODELS = ["threads", "asyncio", "processes", "locust", "goroutines"]


def test_failure_kinds_sum_to_the_failed_tasks_in_every_shape() -> None:
    # A server that never accepts: every request times out (and costs no CPU meanwhile).
    with socket.create_server(("127.0.0.1", 0), backlog=64) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        runs = [
            _Run(f"{model}, {shape}", subprocess.Popen(
                runner_argv(model, "--workload", "http", "--target-url", url,
                            "--request-timeout", "200ms", *flags),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            ))
            for shape, flags in SHAPES.items()
            for model in SHAPE_MODELS
            if model != "locust" or "--arrival" not in flags  # Locust's users are closed loops
        ]  # fmt: skip
        try:
            for run in runs:
                result = run.result()  # failureKinds sums to tasksFailed
                assert result["failureKinds"]["timeout"] == result["tasksFailed"] > 0, run.name
                if "warm-up" in run.name:
                    assert result["warmup"]["tasksOk"] == 0 and result["tasksFailed"] == 10
        finally:
            _stop(runs)


# A bad http flag: what the runner is given beside it, and the flag its message must name.
_HTTP = ["--workload", "http", "--tasks", "1"]
_URL = ["--target-url", "http://127.0.0.1:1/"]
_HTTPS = ["--target-url", "https://127.0.0.1:1/"]
BAD = {
    "target-mode": ["target-mode", *_HTTP, *_URL, "--target-mode", "sideways"],
    "method": ["method", *_HTTP, *_URL, "--method", "FETCH"],
    "header without a colon": ["header", *_HTTP, *_URL, "--header", "X-Plain"],
    "header name not a token": ["header", *_HTTP, *_URL, "--header", "X Plain: v"],
    "header the runner sets": ["header", *_HTTP, *_URL, "--header", "Host: example.com"],
    "framing header in any case": ["header", *_HTTP, *_URL, "--header", "transfer-ENCODING: x"],
    "header value with a line break": ["header", *_HTTP, *_URL, "--header", "X-A: a\r\nX-B: b"],
    "header-env without a variable": ["header-env", *_HTTP, *_URL, "--header-env", "X-Token"],
    "header-env forbidden name": ["header-env", *_HTTP, *_URL, "--header-env",
                                  "Content-Length=CXLAB_TEST_TOKEN"],
    "header-env unset": ["CXLAB_TEST_UNSET", *_HTTP, *_URL, "--header-env",
                         "X-Token=CXLAB_TEST_UNSET"],
    "header-env empty": ["CXLAB_TEST_EMPTY", *_HTTP, *_URL, "--header-env",
                         "X-Token=CXLAB_TEST_EMPTY"],
    "too many headers": ["header", *_HTTP, *_URL,
                         *[a for i in range(runner_contract().max_headers + 1)
                           for a in ("--header", f"X-H{i}: v")]],
    "body too long": ["body", *_HTTP, *_URL, "--method", "POST", "--body",
                      "x" * (runner_contract().limits["body"].max + 1)],
    "ok-status not a code": ["ok-status", *_HTTP, *_URL, "--ok-status", "2xx"],
    "ok-status below 100": ["ok-status", *_HTTP, *_URL, "--ok-status", "99"],
    "ok-status above 599": ["ok-status", *_HTTP, *_URL, "--ok-status", "200-600"],
    "ok-status range reversed": ["ok-status", *_HTTP, *_URL, "--ok-status", "299-200"],
    "ok-status empty": ["ok-status", *_HTTP, *_URL, "--ok-status", ""],
    "request-timeout over 10m": ["request-timeout", *_HTTP, *_URL, "--request-timeout", "11m"],
    "request-timeout not a duration": ["request-timeout", *_HTTP, *_URL,
                                       "--request-timeout", "soon"],
    "tls-ca missing": ["tls-ca", *_HTTP, *_HTTPS, "--tls-ca", "/nonexistent/ca.pem"],
    "tls-ca not PEM": ["tls-ca", *_HTTP, *_HTTPS, "--tls-ca", "{garbage}"],
    "tls-ca beside insecure": ["insecure-skip-verify", *_HTTP, *_HTTPS, "--tls-ca", "{cert}",
                               "--insecure-skip-verify"],
    "tls-ca for http://": ["tls-ca", *_HTTP, *_URL, "--tls-ca", "{cert}"],
    "insecure for http://": ["insecure-skip-verify", *_HTTP, *_URL, "--insecure-skip-verify"],
    "target-url ftp": ["target-url", *_HTTP, "--target-url", "ftp://127.0.0.1:1/"],
    "method for sleep": ["method", "--workload", "sleep", "--tasks", "1", "--method", "POST"],
    "header-env for cpu": ["header-env", "--workload", "cpu", "--tasks", "1",
                           "--header-env", "X-Token=CXLAB_TEST_TOKEN"],
    "request-timeout for hold": ["request-timeout", "--workload", "hold", "--tasks", "1",
                                 "--request-timeout", "1s"],
}  # fmt: skip


@pytest.mark.parametrize("runner", ["python", "goroutines"])
@pytest.mark.parametrize("case", BAD)
def test_a_bad_http_flag_is_a_usage_error_naming_it(
    runner: str,
    case: str,
    certificate: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The Python runner's flags in this process (a start costs 0.2 s, and its usage errors
    # become exit 2 in one place, which the test below and tests/runners/test_result.py run for
    # real).
    garbage = tmp_path / "garbage.pem"
    garbage.write_text(
        "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n"
    )
    named, *flags = BAD[case]
    flags = [f.replace("{cert}", str(certificate[0])).replace("{garbage}", str(garbage))
             for f in flags]  # fmt: skip
    if runner == "python":
        for name in ("CXLAB_TEST_TOKEN", "CXLAB_TEST_EMPTY"):
            monkeypatch.setenv(name, ENV[name])
        with pytest.raises(UsageError) as refused:
            parse_config(["--model", "asyncio", *flags])
        message = f"cxlab-runner: {refused.value}"
    else:
        completed = subprocess.run(runner_argv(runner, *flags), capture_output=True, text=True,
                                   env=ENV, timeout=30)  # fmt: skip
        assert completed.returncode == 2, completed.stdout[:300] + completed.stderr
        assert completed.stdout == ""
        message = completed.stderr
    # the flag as either runner writes it (Go's flag package: -method), or the variable
    pattern = named if named.startswith("CXLAB_") else rf"(^|[^\w-])--?{re.escape(named)}(?![\w-])"
    assert re.search(pattern, message), message
    assert SECRET not in message


@pytest.mark.parametrize("runner", ["asyncio", "goroutines"])
def test_a_secret_with_a_line_break_is_refused_and_never_printed(runner: str) -> None:
    # A Secret made from a file often ends in a newline: a header value cannot hold one, and
    # the message names the variable, not its value.
    env = {**ENV, "CXLAB_TEST_NEWLINE": f"{SECRET}\r\nX-Evil: 1"}
    completed = subprocess.run(
        runner_argv(runner, *_HTTP, *_URL, "--header-env", "X-Token=CXLAB_TEST_NEWLINE"),
        capture_output=True, text=True, env=env, timeout=30,
    )  # fmt: skip
    assert completed.returncode == 2, completed.stderr
    assert "CXLAB_TEST_NEWLINE" in completed.stderr
    assert SECRET not in completed.stderr + completed.stdout
