"""The trial host (cxlab_runner.trial_host), driven over HTTP as the operator drives it: a real
host process, real runners, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cxlab.analysis.outcome import parse_result
from cxlab.experiments.pod_view import view_pod
from cxlab.experiments.pods import COMPONENT_TRIAL, LABEL_COMPONENT, LABEL_TRIAL
from cxlab.local.delay_target import free_port
from cxlab.times import parse_time
from cxlab_contract import HOST_TOKEN_ENV
from cxlab_runner.trial_host import (
    LOG_BYTES,
    LOG_LINES,
    MESSAGE_BYTES,
    START_WAIT_SECONDS,
    BadRequest,
    parse_manifest,
    runner_only,
)

# The host's wait for a previous trial's end, shortened: a 409 costs the test this long.
START_WAIT = min(START_WAIT_SECONDS, 1.0)
PYTHON_RUNNER = ["python3", "-m", "cxlab_runner"]  # as the operator writes it


class Host:
    def __init__(self, folder: Path, *flags: str, token: str | None = None) -> None:
        self.folder = folder
        self.port = free_port()
        self.token = token  # shown on every call unless told otherwise
        self.log = open(folder / "host.log", "wb")  # noqa: SIM115 (open while the host runs)
        command = [sys.executable, "-m", "cxlab_runner.trial_host", "--address", "127.0.0.1",
                   "--any-command"]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != HOST_TOKEN_ENV}
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), "--start-wait", str(START_WAIT), *flags],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env if token is None else {**env, HOST_TOKEN_ENV: token},
        )
        deadline = time.monotonic() + 30
        while self.call("GET", "/healthz")[0] != 200:
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, "the fork server never got warm"
            time.sleep(0.05)

    def output(self) -> str:
        return (self.folder / "host.log").read_text()

    def call(
        self, method: str, path: str, body: Any = None, timeout: float = 30, token: Any = ...
    ) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method
        )
        shown = self.token if token is ... else token
        if shown is not None:
            request.add_header("Authorization", f"Bearer {shown}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                status, text = reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        except OSError:
            return 0, None
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def post(self, manifest: dict[str, Any]) -> tuple[int, Any]:
        return self.call("POST", "/trials", manifest, timeout=START_WAIT + 30)

    def until(
        self, name: str, check: Callable[[dict[str, Any]], bool], seconds: float = 30
    ) -> dict[str, Any]:
        """Long-poll GET /trials until the trial's document passes check."""
        version = 0
        seen: dict[str, Any] | None = None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status, body = self.call("GET", f"/trials?version={version}&wait=5")
            assert status == 200, body
            version = body["version"]
            items: list[dict[str, Any]] = body["items"]
            seen = next((d for d in items if d["metadata"]["name"] == name), None)
            if seen is not None and check(seen):
                return seen
        raise AssertionError(f"{name} never got there; last seen {json.dumps(seen)}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        finally:
            self.log.close()


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    running = Host(tmp_path_factory.mktemp("trial-host"))
    yield running
    assert running.stop() == 0, running.output()


@pytest.fixture(autouse=True)
def clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test ends with its trials forgotten and their processes gone."""
    yield
    if "host" not in request.fixturenames:
        return
    host: Host = request.getfixturevalue("host")
    _, body = host.call("GET", "/trials")
    pids = [pid_of(d) for d in body["items"] if "containerID" in container(d)]
    for document in body["items"]:
        host.call("DELETE", f"/trials/{document['metadata']['name']}")
    for pid in pids:
        wait_gone(pid)


def manifest(folder: Path, name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    """A trial Pod's manifest, as the operator would post it."""
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {LABEL_COMPONENT: COMPONENT_TRIAL, LABEL_TRIAL: name},
        },
        "spec": {
            "activeDeadlineSeconds": 60,
            "terminationGracePeriodSeconds": 5,
            **spec,
            "containers": [
                {
                    "name": "runner",
                    "command": command,
                    "terminationMessagePath": str(folder / f"{name}.result"),
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }
            ],
        },
    }


def runner(*flags: str, python: list[str] = PYTHON_RUNNER) -> list[str]:
    return [*python, "--workload", "sleep", "--workers", "1", *flags]


def container(document: dict[str, Any]) -> dict[str, Any]:
    statuses: list[dict[str, Any]] = document["status"]["containerStatuses"]
    return statuses[0]


def pid_of(document: dict[str, Any]) -> int:
    return int(container(document)["containerID"].removeprefix("process://"))


def terminated(document: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = container(document)["state"]["terminated"]
    return state


def ended(document: dict[str, Any]) -> bool:
    return document["status"]["phase"] in ("Succeeded", "Failed")


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat.rpartition(b")")[2].split()[1])


def wait_gone(pid: int, seconds: float = 10) -> None:
    """Until the process is gone, zombie included (its /proc entry lasts until reaped)."""
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"process {pid} is still there"
        time.sleep(0.02)


def read(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
        return reply.status, reply.read().decode()


def test_a_trial_is_reported_as_its_pod_would_be(host: Host) -> None:
    port = free_port()
    result_path = host.folder / "asyncio-20.result"
    command = runner(
        "--model", "asyncio", "--tasks", "20", "--rtt", "5ms", "--workers", "2",
        "--metrics-port", str(port), "--final-read", "10s", "--result-path", str(result_path),
    )  # fmt: skip
    status, document = host.post(manifest(host.folder, "asyncio-20", command))
    assert status == 201, document
    assert document["status"]["phase"] == "Running"
    assert document["metadata"]["labels"][LABEL_TRIAL] == "asyncio-20"
    parse_time(document["status"]["startTime"])
    # Ready once the Result is written, while the runner waits for its final read.
    ready = host.until("asyncio-20", lambda d: view_pod(d).ready)
    assert ready["status"]["phase"] == "Running"
    assert container(ready)["state"]["running"]["startedAt"]
    status, result = read(port, "/result")
    assert status == 200
    assert read(port, "/metrics?final=1")[0] == 200  # the final read: the runner exits
    done = host.until("asyncio-20", ended)
    view = view_pod(done)
    assert (view.phase, view.exit_code, view.termination_reason) == ("Succeeded", 0, "Completed")
    assert not view.ready and view.started is not None and view.finished is not None
    assert view.trial == "asyncio-20"
    assert view.termination_message == result == result_path.read_text()
    assert parse_result(result)["tasksOk"] == 20


def test_python_runners_are_forked_and_the_others_execd(host: Host) -> None:
    forked = runner("--model", "asyncio", "--tasks", "1", "--rtt", "500ms")
    status, document = host.post(manifest(host.folder, "forked", forked))
    assert status == 201, document
    parent = parent_of(pid_of(document))
    assert parent != host.process.pid
    assert b"forkserver" in Path(f"/proc/{parent}/cmdline").read_bytes()
    assert terminated(host.until("forked", ended))["exitCode"] == 0

    gevent = runner(
        "--model", "gevent", "--tasks", "1", "--rtt", "500ms",
        "--result-path", str(host.folder / "execd.result"),
        python=[sys.executable, "-m", "cxlab_runner"],
    )  # fmt: skip
    status, document = host.post(manifest(host.folder, "execd", gevent))
    assert status == 201, document
    assert parent_of(pid_of(document)) == host.process.pid
    done = host.until("execd", ended)
    assert done["status"]["phase"] == "Succeeded", done
    assert json.loads(terminated(done)["message"])["model"] == "gevent"


def test_a_trial_past_its_deadline_is_killed(host: Host) -> None:
    command = runner("--model", "asyncio", "--tasks", "1", "--rtt", "60s")
    status, _ = host.post(manifest(host.folder, "late", command, activeDeadlineSeconds=1))
    assert status == 201
    done = host.until("late", ended, seconds=15)
    assert (done["status"]["phase"], done["status"]["reason"]) == ("Failed", "DeadlineExceeded")
    lived = parse_time(terminated(done)["finishedAt"]) - parse_time(done["status"]["startTime"])
    assert 0.9 < lived.total_seconds() < 4


def test_a_failed_command_reports_the_tail_of_its_output(host: Host) -> None:
    command = runner("--model", "asyncio", "--tasks", "5", "--no-such-flag")
    status, _ = host.post(manifest(host.folder, "bad-flag", command))
    assert status == 201
    done = host.until("bad-flag", ended)
    assert done["status"]["phase"] == "Failed"
    assert (terminated(done)["exitCode"], terminated(done)["reason"]) == (2, "Error")
    log = (host.folder / "bad-flag.log").read_text()
    assert "--no-such-flag" in log
    assert terminated(done)["message"] == log

    # A command that cannot start: as the kubelet's StartError.
    status, document = host.post(manifest(host.folder, "no-program", ["/no/such/program"]))
    assert (status, document["status"]["phase"]) == (201, "Failed")
    assert (terminated(document)["exitCode"], terminated(document)["reason"]) == (128, "StartError")

    # The kubelet's bounds: the last 80 lines, at most their last 2048 bytes.
    lines = "import sys; [print(f'line {i}') for i in range(100)]; sys.exit(3)"
    wide = "import sys; [print(f'{i:039}') for i in range(100)]; sys.exit(3)"
    for name, program in (("many-lines", lines), ("long-lines", wide)):
        status, _ = host.post(manifest(host.folder, name, [sys.executable, "-c", program]))
        assert status == 201
        done = host.until(name, ended)
        output = (host.folder / f"{name}.log").read_bytes()
        tail = b"".join(output.splitlines(keepends=True)[-LOG_LINES:])[-LOG_BYTES:]
        assert (terminated(done)["exitCode"], terminated(done)["message"]) == (3, tail.decode())
        assert len(tail) < len(output)


def test_the_message_is_the_end_of_the_termination_message_file(host: Host) -> None:
    # Not the log (which has the Python runner's Result too): the file, at most its end.
    path = host.folder / "file-message.result"
    program = f"open({str(path)!r}, 'w').write('x' * 5000 + 'end'); print('the log')"
    status, _ = host.post(manifest(host.folder, "file-message", [sys.executable, "-c", program]))
    assert status == 201
    done = host.until("file-message", ended)
    assert terminated(done)["message"] == path.read_text()[-MESSAGE_BYTES:]
    assert terminated(done)["message"].endswith("xend")


def test_delete_stops_and_forgets_a_trial(host: Host) -> None:
    command = runner("--model", "asyncio", "--tasks", "1", "--rtt", "60s")
    status, document = host.post(manifest(host.folder, "doomed", command))
    assert status == 201
    pid = pid_of(document)
    assert Path(f"/proc/{pid}").exists()
    assert host.call("DELETE", "/trials/doomed")[0] == 200
    _, listed = host.call("GET", "/trials")
    assert [d["metadata"]["name"] for d in listed["items"]] == []
    wait_gone(pid)
    deadline = time.monotonic() + 5  # its files go once its process has ended
    while (host.folder / "doomed.log").exists():
        assert time.monotonic() < deadline, "the trial's log is still there"
        time.sleep(0.02)
    assert host.call("DELETE", "/trials/doomed")[0] == 404


def test_one_trial_at_a_time_and_posts_are_idempotent(host: Host) -> None:
    command = runner("--model", "asyncio", "--tasks", "1", "--rtt", "60s")
    status, first = host.post(manifest(host.folder, "first", command))
    assert status == 201
    status, again = host.post(manifest(host.folder, "first", command))
    assert status == 200
    assert pid_of(again) == pid_of(first)  # the same process, not a second one
    status, refused = host.post(manifest(host.folder, "second", command))
    assert status == 409, refused
    _, listed = host.call("GET", "/trials")
    assert [d["metadata"]["name"] for d in listed["items"]] == ["first"]
    # Once the first is deleted, the second starts after its process has ended.
    assert host.call("DELETE", "/trials/first")[0] == 200
    status, second = host.post(manifest(host.folder, "second", command))
    assert status == 201, second
    assert not Path(f"/proc/{pid_of(first)}").exists()


def test_the_long_poll_answers_on_a_change(host: Host) -> None:
    _, now = host.call("GET", "/trials")
    version = now["version"]
    # Behind: at once (a client timeout far below wait= fails it otherwise).
    _, behind = host.call("GET", f"/trials?version={version - 1}&wait=60", timeout=5)
    assert behind["version"] == version
    # Nothing changes: the same version, after the wait.
    _, same = host.call("GET", f"/trials?version={version}&wait=0.5")
    assert same["version"] == version
    # A change during the wait ends it, with the new version.
    answers: list[Any] = []
    poll = threading.Thread(
        target=lambda: answers.append(host.call("GET", f"/trials?version={version}&wait=20"))
    )
    poll.start()
    time.sleep(0.5)  # the poll waits by now
    command = runner("--model", "asyncio", "--tasks", "1", "--rtt", "1ms")
    assert host.post(manifest(host.folder, "change", command))[0] == 201
    poll.join(10)
    assert answers and answers[0][1]["version"] > version
    assert "change" in [d["metadata"]["name"] for d in answers[0][1]["items"]]
    host.until("change", ended)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "runner"}]}}, "command"),
        ({"spec": {"containers": []}}, "metadata"),
        ({"metadata": {"name": "Not_A_Name"}, "spec": {}}, "metadata.name"),
        ({"metadata": {"name": "x"}, "spec": {"containers": []}}, "spec.containers"),
        (b"{not json", "body"),
    ],
)
def test_a_malformed_manifest_is_refused_naming_the_field(
    host: Host, body: Any, field: str
) -> None:
    status, answer = host.post(body)
    assert status == 400
    assert field in answer["error"]


def test_a_manifest_without_a_command_is_refused(host: Host) -> None:
    body = manifest(host.folder, "no-command", ["x"])
    del body["spec"]["containers"][0]["command"]
    status, answer = host.post(body)
    assert status == 400
    assert answer["error"].startswith("spec.containers[0].command:")
    assert host.call("GET", "/trials")[1]["items"] == []


def test_what_a_trial_leaves_running_is_killed_and_reaped(host: Host) -> None:
    # A background process outliving the trial's own, its pid as the termination message.
    result = host.folder / "leaves.result"
    script = f"sleep 60 & echo $! > {result}; exit 0"
    status, _ = host.post(manifest(host.folder, "leaves", ["sh", "-c", script]))
    assert status == 201
    done = host.until("leaves", ended)
    assert done["status"]["phase"] == "Succeeded"
    wait_gone(int(terminated(done)["message"]), seconds=3)  # not even a zombie


def test_sigterm_stops_the_running_trial_and_the_host(tmp_path: Path) -> None:
    host = Host(tmp_path)
    try:
        command = runner("--model", "asyncio", "--tasks", "1", "--rtt", "60s")
        status, document = host.post(manifest(tmp_path, "running", command))
        assert status == 201
        pid = pid_of(document)
        assert host.stop() == 0, host.output()
        assert not Path(f"/proc/{pid}").exists()
    finally:
        if host.process.poll() is None:
            host.process.kill()
            host.process.wait()


@pytest.mark.parametrize(
    ("command", "path", "refused"),
    [
        (["python3", "-m", "cxlab_runner", "--model", "asyncio"], "/tmp/t.result", None),
        (["cxlab-runner-go", "--model", "goroutines"], "/tmp/t.result", None),
        (["sh", "-c", "id"], "/tmp/t.result", "command: a trial host runs only"),
        (["python3", "-c", "print(1)"], "/tmp/t.result", "command: a trial host runs only"),
        (["cxlab-runner-go"], "/etc/passwd", "terminationMessagePath: must be a file in /tmp"),
        (["cxlab-runner-go"], "/tmp/../etc/x", "terminationMessagePath: must be a file in /tmp"),
    ],
)
def test_by_default_a_host_runs_only_the_runners_and_writes_only_in_tmp(
    command: list[str], path: str, refused: str | None
) -> None:
    """Its API has no authentication: whoever reaches it runs nothing a trial Pod of the same
    image could not, and no file outside its results folder is removed."""
    body = manifest(Path("/tmp"), "t", command)
    body["spec"]["containers"][0]["terminationMessagePath"] = path
    spec = parse_manifest(body)
    if refused is None:
        runner_only(spec)
    else:
        with pytest.raises(BadRequest, match=re.escape(refused)):
            runner_only(spec)


def test_with_a_token_it_answers_only_who_shows_it_and_its_trials_never_see_it(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path, token="the-operators-own")  # /healthz answered it without one
    try:
        calls = [
            ("GET", "/trials", None), ("GET", "/trials/t", None), ("DELETE", "/trials/t", None),
            ("POST", "/trials", manifest(tmp_path, "t", ["true"])),
        ]  # fmt: skip
        for token in (None, "a-guess"):
            for method, path, body in calls:
                assert host.call(method, path, body, token=token)[0] == 401, (method, path)
        status, listed = host.call("GET", "/trials")
        assert status == 200 and listed["items"] == []  # the refused POST started nothing
        env_file = tmp_path / "env.txt"
        command = ["sh", "-c", f"env > {env_file}"]
        assert host.post(manifest(tmp_path, "env", command))[0] == 201
        assert host.until("env", ended)["status"]["phase"] == "Succeeded"
        seen = env_file.read_text()
        assert "PATH=" in seen and HOST_TOKEN_ENV not in seen and "the-operators-own" not in seen
    finally:
        assert host.stop() == 0, host.output()
