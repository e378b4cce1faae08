"""`cxlab run` against the user's own service (workload.target.url) end to end: real runners
of both kinds, a real server that demands a header whose value only cxlab run's environment
holds; the value is nowhere in what cxlab run writes or prints."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import BIN

CXLAB = [sys.executable, "-m", "cxlab.cli"]
TOKEN = "tok-3f9a1c0be2d74d55"


class _Api(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, bytes]] = []  # noqa: RUF012 - per server, reset by the fixture

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("X-Api-Key", "")
        self.seen.append((self.command, key, body))
        status = 200 if key == TOKEN else 401
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    _Api.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/items?page=1", _Api.seen
    server.shutdown()
    server.server_close()


def _run(
    tmp_path: Path, spec: dict[str, Any], *flags: str, **env: str
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "target.yaml"
    document = {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
                "metadata": {"name": "target"}, "spec": spec}  # fmt: skip
    path.write_text(yaml.safe_dump(document))
    environ = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **env}
    return subprocess.run(
        [*CXLAB, "run", str(path), *flags], capture_output=True, text=True, cwd=tmp_path,
        env=environ, timeout=300,
    )  # fmt: skip


def _spec(url: str, **target: Any) -> dict[str, Any]:
    return {
        "workload": {
            "type": "http",
            "tasks": 10,
            "target": {
                "url": url,
                "method": "POST",
                "body": '{"q": "cxlab"}',
                "headers": [{"name": "X-Api-Key", "valueFrom": {"env": "API_TOKEN"}}],
                **target,
            },
        },
        "models": [
            {"model": "threads", "workers": [1, 2]},
            {"model": "goroutines", "workers": [2]},
        ],
        "pinning": "preferred",
    }


def test_a_url_target_with_a_header_from_the_environment(tmp_path: Path, api: Any) -> None:
    url, seen = api
    completed = _run(tmp_path, _spec(url), API_TOKEN=TOKEN)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads((tmp_path / "out" / "target" / "result.json").read_text())
    trials = document["status"]["trials"]
    assert [t["result"]["tasksOk"] for t in trials] == [10, 10, 10], trials
    assert all(t["result"]["failureKinds"]["status"] == 0 for t in trials)
    # every request reached the service as written: method, body, the secret header
    assert len(seen) == 30
    assert set(seen) == {("POST", TOKEN, b'{"q": "cxlab"}')}
    written = [p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*") if p.is_file()]
    for text in [completed.stdout, completed.stderr, *written]:
        assert TOKEN not in text
    assert len(written) >= 5  # result.json, the report, each trial's Result
    report = (tmp_path / "out" / "target" / "report.html").read_text()
    assert "X-Api-Key: &lt;from env API_TOKEN&gt;" in report
    assert (
        "the latencies below are the service&#x27;s, the CPU and memory the client&#x27;s" in report
    )


def test_failed_requests_fail_the_trial_naming_their_kind(tmp_path: Path, api: Any) -> None:
    url, _ = api
    # the wrong key: the service answers 401 to all; a closed port refuses all
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    spec = _spec(url)
    spec["models"] = [{"model": "asyncio", "workers": [2]}]
    wrong = _run(tmp_path, spec, API_TOKEN="not-the-key")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "10 of 10 requests failed (100%: status 10)" in wrong.stdout
    assert (
        "Failed tasks by kind" in wrong.stdout
        and "000-asyncio-w2-r1: 10 of 10 (status 10)" in wrong.stdout
    )
    spec["workload"]["target"]["url"] = f"http://127.0.0.1:{closed}/"
    refused = _run(tmp_path, spec, API_TOKEN=TOKEN)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "(100%: connect 10)" in refused.stdout
    assert "workload.target.maxFailureRatio 0.5" in refused.stdout


def test_a_remote_target_needs_the_users_word(tmp_path: Path) -> None:
    spec = _spec("http://192.0.2.1:9/")  # TEST-NET-1: never answers
    refused = _run(tmp_path, spec, API_TOKEN=TOKEN)
    assert refused.returncode == 2
    assert "spec.workload.target.url: 192.0.2.1 is not a loopback address" in refused.stderr
    assert not (tmp_path / "out").exists()
    missing = _run(tmp_path, _spec("http://127.0.0.1:9/"))
    assert missing.returncode == 2
    assert "valueFrom.env: the environment variable API_TOKEN is not set" in missing.stderr
