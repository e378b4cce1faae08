"""The trial host: runs trial Pods' runner commands as fresh processes in one long-lived Pod.

A Pod per trial costs about three seconds of start-up and teardown per trial. With
`isolation: process` the operator keeps one host Pod per parallel slot instead, with the
trial's resources and pinned cores, and runs each trial in it as a fresh process: what the
local backend does on a laptop (a fresh process on the same cores). The operator POSTs the
trial Pod's manifest; the host runs its container's command and reports the trial back as a
Pod document (the metadata as posted, a status shaped as the kubelet writes it), which the
operator reads with the Pod parser it reads trial Pods with
(operator/cxlab/experiments/pod_view.py).

    python3 -m cxlab_runner.trial_host --port 9101

HTTP API (JSON bodies). With a token in its environment (CXLAB_HOST_TOKEN, as the
operator's host Pods have), every request but /healthz must show it
(`Authorization: Bearer <token>`), else 401: whoever can reach the Pod's port cannot start or
stop its trials unless they can read its Pod too.

- `GET /healthz`: 200 once the fork server is warm, 503 before (a trial posted before then
  waits for it).
- `POST /trials`, a Pod manifest: starts its first container's command. 201 and the trial's
  document; 200 and the document already known for that name (the operator may POST again
  after a restart); 400 naming the field of a malformed manifest; 409 when another trial's
  process is still running after `--start-wait` (one trial at a time: the host is one slot).
- `GET /trials?version=V&wait=S`: `{"version": N, "items": [documents]}`, once N > V or
  after S seconds (at most 60); at once without `version`. `GET /trials/<name>`: one document.
- `DELETE /trials/<name>`: stops its process (SIGTERM, the grace period, SIGKILL), removes
  its files and forgets it. 200, 404 when unknown.

A Python runner of a model that does not monkey-patch the standard library comes from a warm
fork server, whose imports are done once (the first tens of milliseconds of a trial are
otherwise spent importing); everything else is exec'd.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hmac
import json
import math
import multiprocessing
import multiprocessing.forkserver
import os
import re
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.process import BaseProcess
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from cxlab_contract import HOST_TOKEN_ENV

# How long a POST waits for the previous trial's process to end before answering 409. The
# previous runner exits right after the operator's final read, so a start normally waits only
# milliseconds; two trials must never share the slot's cores.
START_WAIT_SECONDS = 5.0
MAX_POLL_SECONDS = 60.0
WARM_WAIT_SECONDS = 60.0  # a forked trial's wait for the fork server to be warm
DEFAULT_GRACE_SECONDS = 5  # the brief's default, not Kubernetes' 30: trial Pods set 5
READY_POLL_SECONDS = 0.05  # only where inotify is unavailable
# The kubelet's limits on a termination message (pkg/kubelet/container/runtime.go): the last
# 4096 bytes of the file; from the log, the last 80 lines, at most their last 2048 bytes.
MESSAGE_BYTES = 4096
LOG_LINES = 80
LOG_BYTES = 2048
# These monkey-patch the standard library before their imports (cxlab_runner.__main__): a
# process that already imported it unpatched cannot run them, so they are exec'd fresh.
EXEC_MODELS = frozenset({"gevent", "locust"})
# What a runner imports before its tasks start (python -X importtime -m cxlab_runner ...):
# the trial and the models dominate (prometheus_client, ssl, asyncio, http.client under them).
PRELOAD = [
    "cxlab_runner.__main__",
    "cxlab_runner.config",
    "cxlab_runner.trial",
    "cxlab_runner.models",
    "cxlab_runner.models.asyncio_model",
    "cxlab_runner.models.sequential_model",
    "cxlab_runner.models.threads_model",
    "cxlab_runner.models.processes_model",
    # what the processes model imports as it starts its pool
    "multiprocessing.heap",
    "multiprocessing.popen_fork",
    "multiprocessing.sharedctypes",
    "multiprocessing.synchronize",
    # multiprocessing re-runs the parent's main module in every child (as __mp_main__):
    # imported here, that costs no imports.
    "cxlab_runner.trial_host",
]

# multiprocessing re-runs the host's main module in each forked child (as __mp_main__), and
# runpy warns that it is imported already: preloaded in the fork server, on purpose.
warnings.filterwarnings(
    "ignore", r"'cxlab_runner\.trial_host' found in sys\.modules", RuntimeWarning
)

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # a DNS-1123 subdomain: a file name
_PYTHON = re.compile(r"python3?(\.\d+)?")
_IN_CLOSE_WRITE, _IN_MOVED_TO, _IN_Q_OVERFLOW = 0x8, 0x80, 0x4000
_EVENT = struct.Struct("iIII")  # struct inotify_event, before its name
_PR_SET_CHILD_SUBREAPER = 36


class BadRequest(Exception):
    """A malformed manifest: 400, naming the field."""


class Conflict(Exception):
    """Another trial's process still runs: 409."""


class Unavailable(Exception):
    """The host is shutting down: 503."""


@dataclass(frozen=True)
class TrialSpec:
    """What the host takes from a trial Pod's manifest."""

    name: str
    metadata: dict[str, Any]
    container: str
    argv: list[str]
    result_path: str  # the container's terminationMessagePath
    fallback_to_logs: bool  # terminationMessagePolicy FallbackToLogsOnError
    deadline_seconds: int | None  # activeDeadlineSeconds
    grace_seconds: int  # terminationGracePeriodSeconds

    @property
    def log_path(self) -> str:
        return os.path.join(os.path.dirname(self.result_path), f"{self.name}.log")


# What a host runs unless told --any-command: the runners, writing their Results in /tmp. Its
# API has no authentication (whoever reaches its port could post), so it runs nothing that a
# trial Pod of the same image could not, and deletes no file outside its results folder.
RUNNERS = (("python3", "-m", "cxlab_runner"), ("cxlab-runner-go",))
RESULTS_FOLDER = "/tmp"


def runner_only(spec: TrialSpec, folder: str = RESULTS_FOLDER) -> None:
    """BadRequest unless the trial runs a runner and writes its Result in `folder`."""
    where = "spec.containers[0]"
    if not any(tuple(spec.argv[: len(r)]) == r for r in RUNNERS):
        allowed = " or ".join(" ".join(r) for r in RUNNERS)
        raise BadRequest(f"{where}.command: a trial host runs only {allowed}")
    if os.path.dirname(os.path.normpath(spec.result_path)) != os.path.normpath(folder):
        raise BadRequest(f"{where}.terminationMessagePath: must be a file in {folder}")


def parse_manifest(body: Any) -> TrialSpec:
    """The trial Pod's manifest, checked; BadRequest names the field that is wrong."""
    metadata = _field(body, "metadata", dict, "body")
    name = _field(metadata, "name", str, "metadata")
    if not _NAME.fullmatch(name):
        raise BadRequest("metadata.name: must be a DNS-1123 subdomain (a-z, 0-9, '-', '.')")
    spec = _field(body, "spec", dict, "body")
    containers = _field(spec, "containers", list, "spec")
    if not containers or not isinstance(containers[0], dict):
        raise BadRequest("spec.containers: must hold at least one container object")
    container: dict[str, Any] = containers[0]
    where = "spec.containers[0]"
    command = container.get("command")
    args = container.get("args") or []
    if not _strings(command) or not command:
        raise BadRequest(f"{where}.command: must be a non-empty list of strings")
    if not _strings(args):
        raise BadRequest(f"{where}.args: must be a list of strings")
    result_path = _field(container, "terminationMessagePath", str, where)
    if not os.path.isabs(result_path) or result_path.endswith("/"):
        raise BadRequest(f"{where}.terminationMessagePath: must be an absolute file path")
    policy = container.get("terminationMessagePolicy", "File")
    if policy not in ("File", "FallbackToLogsOnError"):
        raise BadRequest(f"{where}.terminationMessagePolicy: File or FallbackToLogsOnError")
    deadline = _seconds(spec, "activeDeadlineSeconds", 1, None)
    grace = _seconds(spec, "terminationGracePeriodSeconds", 0, DEFAULT_GRACE_SECONDS)
    if not metadata.get("creationTimestamp"):  # as the apiserver would set it
        metadata = {**metadata, "creationTimestamp": _rfc3339(time.time())}
    return TrialSpec(
        name=name,
        metadata=metadata,
        container=str(container.get("name") or "runner"),
        argv=[*command, *args],  # as the kubelet runs command and args
        result_path=result_path,
        fallback_to_logs=policy == "FallbackToLogsOnError",
        deadline_seconds=deadline,
        grace_seconds=grace if grace is not None else DEFAULT_GRACE_SECONDS,
    )


def _field(parent: Any, key: str, kind: type, where: str) -> Any:
    path = key if where == "body" else f"{where}.{key}"
    if not isinstance(parent, dict):
        raise BadRequest(f"{where}: must be an object")
    value = parent.get(key)
    if not isinstance(value, kind):
        raise BadRequest(f"{path}: missing, or not a {kind.__name__}")
    return value


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _seconds(spec: dict[str, Any], key: str, low: int, default: int | None) -> int | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BadRequest(f"spec.{key}: must be an integer >= {low}")
    return value


def forks(argv: list[str]) -> bool:
    """Whether the command is the Python runner for a model the fork server can run: only
    when the model is known for sure (an exec is always right, only slower)."""
    if len(argv) < 3 or argv[1:3] != ["-m", "cxlab_runner"]:
        return False
    if not _PYTHON.fullmatch(os.path.basename(argv[0])):
        return False
    model = None
    flags = argv[3:]
    for index, flag in enumerate(flags):
        name, equals, value = flag.partition("=")
        # argparse takes the last --model, and takes it abbreviated (--mod gevent)
        if len(name) >= 4 and "--model".startswith(name):
            model = value if equals else (flags[index + 1] if index + 1 < len(flags) else None)
    return model is not None and model not in EXEC_MODELS


class _Process(Protocol):
    pid: int

    def wait(self, timeout: float | None) -> int | None:
        """The exit status (negative: the signal that killed it), None while it runs."""


class _Exec:
    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.pid, self._popen = popen.pid, popen

    def wait(self, timeout: float | None) -> int | None:
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class _Forked:
    def __init__(self, process: BaseProcess) -> None:
        assert process.pid is not None
        self.pid, self._process = process.pid, process

    def wait(self, timeout: float | None) -> int | None:
        # Through its sentinel: the fork server reports the exit once it has reaped it.
        self._process.join(timeout)
        return self._process.exitcode


def _run_forked(argv: list[str], log_path: str) -> None:
    """In the fork server's child: the runner, as `python3 -m cxlab_runner` runs it."""
    os.setsid()  # its own process group, which the host can kill whole, as exec'd trials
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    from cxlab_runner import __main__ as runner

    sys.argv = [runner.__file__, *argv[3:]]
    # SystemExit's code is the process's exit status (multiprocessing's bootstrap), as it is
    # for an exec'd interpreter.
    sys.exit(runner.main(argv[3:]))


def _warm() -> None:
    """Forked once at start-up: back only when the fork server has done its imports."""


@dataclass(eq=False)
class Trial:
    spec: TrialSpec
    accepted_at: float  # wall clock: the Pod's startTime
    phase: str = PENDING
    reason: str | None = None  # the Pod's: DeadlineExceeded
    process: _Process | None = None
    forked: bool = False
    started_at: float | None = None  # wall clock
    started_monotonic: float = 0.0
    written: bool = False  # the Result is in the termination message file
    exit_code: int | None = None
    termination_reason: str | None = None
    message: str = ""
    finished_at: float | None = None
    killed_by_host: bool = False
    deadline_exceeded: bool = False
    stop_asked: bool = False  # DELETE or shutdown before the process was started
    forgotten: bool = False
    finalized: bool = False  # its end recorded: its files are no longer written
    exited: threading.Event = field(default_factory=threading.Event)  # the process ended
    ended: threading.Event = field(default_factory=threading.Event)  # ... and is recorded


class TrialHost:
    def __init__(
        self,
        start_wait: float = START_WAIT_SECONDS,
        pod_ip: str | None = None,
        any_command: bool = False,
    ) -> None:
        self.start_wait = start_wait
        self.pod_ip = pod_ip
        self.any_command = any_command
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._starting = threading.Lock()  # one start at a time: the wait, the spawn
        self._trials: dict[str, Trial] = {}
        self._current: Trial | None = None  # the trial whose process runs
        self._closing = False
        # Starts from the clock, not 0: a restarted host's versions are past every one the
        # operator saw before the restart, so its long poll answers at once.
        self.version = time.time_ns() // 1000
        self.warm = threading.Event()
        self._forkserver = multiprocessing.get_context("forkserver")
        self._forkserver.set_forkserver_preload(PRELOAD)

    def warm_up(self) -> None:
        """Start the fork server and wait for its imports, so no trial pays for them."""
        try:
            multiprocessing.forkserver.ensure_running()
            process = self._forkserver.Process(target=_warm, name="warm-up")
            process.start()
            process.join()
        except Exception as error:  # /healthz stays 503: the Pod never gets Ready
            _log(f"the fork server did not start: {error!r}")
            return
        self.warm.set()
        _log("the fork server is warm")

    # The API

    def start(self, body: Any) -> tuple[int, dict[str, Any]]:
        spec = parse_manifest(body)
        if not self.any_command:
            runner_only(spec)
        with self._starting:
            with self._lock:
                if self._closing:
                    raise Unavailable("the trial host is shutting down")
                known = self._trials.get(spec.name)
                if known is not None:
                    return HTTPStatus.OK, self._document(known)
                current = self._current
            if current is not None and not current.ended.wait(self.start_wait):
                raise Conflict(f"trial {current.spec.name} is still running")
            trial = Trial(spec, time.time())
            with self._lock:
                self._trials[spec.name] = trial
                self._current = trial
                self._bump()
            self._spawn(trial)
            with self._lock:
                return HTTPStatus.CREATED, self._document(trial)

    def list(self, version: int | None, wait: float) -> dict[str, Any]:
        with self._changed:
            if version is not None:
                self._changed.wait_for(lambda: self.version > version, timeout=wait)
            items = [self._document(trial) for trial in self._trials.values()]
            return {"version": self.version, "items": items}

    def get(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            trial = self._trials.get(name)
            return None if trial is None else self._document(trial)

    def delete(self, name: str) -> bool:
        with self._lock:
            trial = self._trials.pop(name, None)
            if trial is None:
                return False
            trial.forgotten = True
            running = not trial.finalized
            if not running:  # else its waiter removes them once the process has ended
                _remove_files(trial.spec)
            self._bump()
        if running:
            threading.Thread(target=self._stop, args=(trial,), daemon=True).start()
        return True

    def shutdown(self) -> None:
        """Stop the running trial (SIGTERM, the grace period, SIGKILL) and take no more."""
        with self._lock:
            self._closing = True
        # a start under way ends first, then is stopped with the rest
        with self._starting, self._lock:
            current = self._current
        if current is not None:
            self._stop(current)
            current.ended.wait(current.spec.grace_seconds + 10)

    # A trial's life

    def _spawn(self, trial: Trial) -> None:
        spec = trial.spec
        watch = wake_read = wake_write = None
        oom_kills = _oom_kills()
        try:
            wake_read, wake_write = os.pipe()  # closed by the waiter: wakes the result watch
            os.makedirs(os.path.dirname(spec.result_path), exist_ok=True)
            _remove_files(spec)  # a fresh trial: nothing left from one of the same name
            with open(spec.log_path, "wb") as log:
                # before the start, so that no write of the Result can come before the watch
                watch = _inotify(os.path.dirname(spec.result_path))
                process: _Process
                if forks(spec.argv):
                    # a trial posted as the host starts (the operator does not wait for the
                    # readiness probe) waits for the fork server's imports, not the probe
                    self.warm.wait(WARM_WAIT_SECONDS)
                    forked = self._forkserver.Process(
                        target=_run_forked, args=(spec.argv, spec.log_path), name=spec.name
                    )
                    forked.start()
                    process = _Forked(forked)
                else:
                    popen = subprocess.Popen(
                        spec.argv,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own group, killed whole at its end
                    )
                    process = _Exec(popen)
        except Exception as error:  # the kubelet's StartError: exit 128, the reason why
            for fd in (watch, wake_read, wake_write):
                if fd is not None:
                    os.close(fd)
            _log(f"{spec.name} did not start: {error}")
            self._finish(trial, 128, "StartError", str(error))
            return
        with self._lock:
            trial.process = process
            trial.forked = isinstance(process, _Forked)
            trial.phase = RUNNING
            trial.started_at = time.time()
            trial.started_monotonic = time.monotonic()
            stop = trial.stop_asked
            self._bump()
        how = "forked" if trial.forked else "exec'd"
        _log(f"{spec.name} started: pid {process.pid}, {how}")
        threading.Thread(
            target=self._watch_result, args=(trial, watch, wake_read), daemon=True
        ).start()
        threading.Thread(
            target=self._wait, args=(trial, process, wake_write, oom_kills), daemon=True
        ).start()
        if stop:
            threading.Thread(target=self._stop, args=(trial,), daemon=True).start()

    def _wait(self, trial: Trial, process: _Process, wake: int, oom_kills: int | None) -> None:
        """Until the process ends, stopping it past activeDeadlineSeconds; then its end."""
        deadline = trial.spec.deadline_seconds
        status = None
        while status is None:
            timeout = None
            if deadline is not None and not trial.deadline_exceeded:
                timeout = max(0.0, trial.started_monotonic + deadline - time.monotonic())
            status = process.wait(timeout)
            if status is not None:
                break
            with self._lock:
                trial.deadline_exceeded = True
            _log(f"{trial.spec.name} outlived activeDeadlineSeconds {deadline}: stopping it")
            threading.Thread(target=self._stop, args=(trial,), daemon=True).start()
        trial.exited.set()
        os.close(wake)
        _end_session(process.pid)
        exit_code = 128 - status if status < 0 else status  # a signal's, as a container's
        reason = "Completed" if exit_code == 0 else "Error"
        # OOMKilled: a SIGKILL the host did not send while the cgroup's OOM kill count rose
        # (cgroup v2's memory.events), as the runtime tells an OOM kill. Any other: Error.
        if exit_code == 128 + signal.SIGKILL and not trial.killed_by_host:
            after = _oom_kills()
            if oom_kills is not None and after is not None and after > oom_kills:
                reason = "OOMKilled"
        self._finish(trial, exit_code, reason, _termination_message(trial.spec, exit_code))

    def _finish(self, trial: Trial, exit_code: int, reason: str, message: str) -> None:
        with self._lock:
            trial.exit_code = exit_code
            trial.termination_reason = reason
            trial.message = message
            trial.finished_at = time.time()
            if trial.deadline_exceeded:  # as the kubelet: the Pod failed, whatever the exit
                trial.phase, trial.reason = FAILED, "DeadlineExceeded"
            else:
                trial.phase = SUCCEEDED if exit_code == 0 else FAILED
            trial.finalized = True
            if trial.forgotten:
                _remove_files(trial.spec)
            else:
                self._bump()
            if self._current is trial:
                self._current = None
        _log(f"{trial.spec.name} ended: {trial.phase}, exit {exit_code} ({reason})")
        trial.exited.set()
        trial.ended.set()

    def _stop(self, trial: Trial) -> None:
        """As the kubelet stops a container: SIGTERM to its process, SIGKILL to all it runs
        once the grace period has passed."""
        with self._lock:
            trial.killed_by_host = True
            process = trial.process
            if process is None:  # not started yet: _spawn stops it once it has
                trial.stop_asked = True
                return
        # Only while it runs: once reaped, its pid may be another process's.
        if trial.exited.is_set():
            return
        _signal(process.pid, signal.SIGTERM)
        if not trial.exited.wait(trial.spec.grace_seconds):
            _kill_group(process.pid)

    def _watch_result(self, trial: Trial, watch: int | None, wake: int) -> None:
        """Ready once the runner has written its Result (which it does before its /done
        answers 200): woken by the kernel, not by polling, since the trial runs on the same
        cores and the host must not take CPU from it."""
        path = trial.spec.result_path
        try:
            if watch is None:
                while not trial.exited.wait(READY_POLL_SECONDS):
                    if _written(path):
                        self._ready(trial)
                        return
                return
            name = os.fsencode(os.path.basename(path))
            poller = select.poll()
            poller.register(watch, select.POLLIN)
            poller.register(wake, select.POLLIN)
            while True:
                if wake in {fd for fd, _ in poller.poll()}:
                    return  # the process has ended
                if _concerns(os.read(watch, 65536), name) and _written(path):
                    self._ready(trial)
                    return
        finally:
            if watch is not None:
                os.close(watch)
            os.close(wake)

    def _ready(self, trial: Trial) -> None:
        with self._lock:
            if trial.phase == RUNNING and not trial.written:
                trial.written = True
                self._bump()

    def _bump(self) -> None:
        """With the lock held: a trial changed; wake the long polls."""
        self.version += 1
        self._changed.notify_all()

    def _document(self, trial: Trial) -> dict[str, Any]:
        """The trial as a Pod, with the lock held. Its metadata is never changed after the
        POST, so the document shares it."""
        running = trial.phase == RUNNING
        ready = running and trial.written
        container: dict[str, Any] = {
            "name": trial.spec.container,
            "image": "",
            "imageID": "",
            "ready": ready,
            "started": running,
            "restartCount": 0,
        }
        if trial.process is not None:
            container["containerID"] = f"process://{trial.process.pid}"
        if trial.exit_code is not None:
            terminated: dict[str, Any] = {
                "exitCode": trial.exit_code,
                "reason": trial.termination_reason,
                "finishedAt": _rfc3339(trial.finished_at or time.time()),
            }
            if trial.started_at is not None:
                terminated["startedAt"] = _rfc3339(trial.started_at)
            if trial.message:  # the kubelet leaves an empty message out
                terminated["message"] = trial.message
            container["state"] = {"terminated": terminated}
        elif running:
            container["state"] = {"running": {"startedAt": _rfc3339(trial.started_at or 0)}}
        else:
            container["state"] = {"waiting": {"reason": "ContainerCreating"}}
        status: dict[str, Any] = {
            "phase": trial.phase,
            "startTime": _rfc3339(trial.accepted_at),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [container],
        }
        if trial.reason:
            status["reason"] = trial.reason
        if self.pod_ip:  # the runner's metrics port is the host Pod's
            status["podIP"] = self.pod_ip
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": trial.spec.metadata,
            "status": status,
        }


# Files and processes


def _remove_files(spec: TrialSpec) -> None:
    for path in (spec.result_path, f"{spec.result_path}.partial", spec.log_path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _written(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def _termination_message(spec: TrialSpec, exit_code: int) -> str:
    """As the kubelet: the end of the termination message file; with FallbackToLogsOnError,
    a failed process and nothing in that file, the tail of its output."""
    message = _tail(spec.result_path, MESSAGE_BYTES)
    if not message and spec.fallback_to_logs and exit_code != 0:
        lines = _tail(spec.log_path, LOG_BYTES).splitlines(keepends=True)
        message = b"".join(lines[-LOG_LINES:])
    return message.decode("utf-8", "replace")


def _tail(path: str, size: int) -> bytes:
    try:
        with open(path, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - size))
            return file.read()
    except OSError:
        return b""


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # not yet its group's leader (a forked child starting)
        _signal(pid, signal.SIGKILL)


def _end_session(session: int) -> None:
    """After a trial's process has ended: kill what it left running (the kubelet ends every
    process of a container with its main one) and reap those left to the host, which is PID 1
    in its container (a subreaper elsewhere): each would stay a zombie otherwise."""
    try:
        os.killpg(session, signal.SIGKILL)
    except ProcessLookupError:
        return  # nothing left
    for _ in range(20):
        if not _reap(session):
            return
        time.sleep(0.05)  # SIGKILL is delivered, and the zombies made, asynchronously


def _reap(session: int) -> int:
    """Reap the host's zombie children of the session; how many of its processes are left."""
    left, me = 0, os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[3]) != session:  # state, ppid, pgrp, session
            continue
        if fields[0] == b"Z" and int(fields[1]) == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry), os.WNOHANG)
        else:
            left += 1
    return left


def _oom_kills() -> int | None:
    """The host's cgroup's count of OOM kills (cgroup v2); None where it cannot be read."""
    try:
        with open("/proc/self/cgroup") as cgroup:
            path = next(line[3:].strip() for line in cgroup if line.startswith("0::"))
        with open(f"/sys/fs/cgroup{path.rstrip('/')}/memory.events") as events:
            for line in events:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, StopIteration, ValueError):
        pass
    return None


_libc: ctypes.CDLL | None = None


def _inotify(folder: str) -> int | None:
    """An inotify descriptor watching the folder for files written and closed, or renamed
    into it; None where inotify is unavailable (then the host checks every 50 ms)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.inotify_init1.argtypes = [ctypes.c_int]
            _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = int(_libc.inotify_init1(os.O_CLOEXEC))  # IN_CLOEXEC is O_CLOEXEC
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if int(_libc.inotify_add_watch(fd, os.fsencode(folder), _IN_CLOSE_WRITE | _IN_MOVED_TO)) < 0:
        os.close(fd)
        return None
    return fd


def _concerns(events: bytes, name: bytes) -> bool:
    """Whether the inotify events read name the file (or were too many to tell)."""
    offset = 0
    while offset + _EVENT.size <= len(events):
        _, mask, _, length = _EVENT.unpack_from(events, offset)
        start = offset + _EVENT.size
        if mask & _IN_Q_OVERFLOW or events[start : start + length].rstrip(b"\0") == name:
            return True
        offset = start + length
    return False


def _become_subreaper() -> None:
    """Outside a container too, what a trial leaves behind comes to the host to reap, as it
    does to PID 1 in one."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _rfc3339(moment: float) -> str:
    """As Kubernetes writes a time, with milliseconds (cxlab.times.parse_time reads both)."""
    text = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def _log(text: str) -> None:
    print(f"trial-host: {text}", file=sys.stderr, flush=True)


# HTTP


class _Handler(BaseHTTPRequestHandler):
    host: TrialHost
    token: str | None  # None: every request is answered (a host run by hand, the tests)
    protocol_version = "HTTP/1.1"  # the operator's polls keep their connection

    def _allowed(self) -> bool:
        """Whether the request shows the host's token; if not, it is answered 401."""
        if self.token is None:
            return True
        shown = self.headers.get("Authorization") or ""
        if hmac.compare_digest(shown.encode(), f"Bearer {self.token}".encode()):
            return True
        self.close_connection = True  # a body it did not read must not be taken for a request
        self._send(HTTPStatus.UNAUTHORIZED, {"error": "this trial host answers its operator only"})
        return False

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/healthz":  # the kubelet's probe
            if self.host.warm.is_set():
                self._send(HTTPStatus.OK, "ok")
            else:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, "warming")
        elif not self._allowed():
            return
        elif url.path == "/trials":
            query = parse_qs(url.query)
            try:
                version = int(query["version"][0]) if "version" in query else None
                wait = float(query["wait"][0]) if "wait" in query else 0.0
                if math.isnan(wait):
                    raise ValueError(wait)
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, {"error": "version and wait must be numbers"})
                return
            wait = min(max(wait, 0.0), MAX_POLL_SECONDS)
            self._send(HTTPStatus.OK, self.host.list(version, wait))
        elif url.path.startswith("/trials/"):
            document = self.host.get(url.path.removeprefix("/trials/"))
            if document is None:
                self._send(HTTPStatus.NOT_FOUND, {"error": "no such trial"})
            else:
                self._send(HTTPStatus.OK, document)
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": "no such path"})

    def do_POST(self) -> None:
        if not self._allowed():
            return
        if urlsplit(self.path).path != "/trials":
            self._send(HTTPStatus.NOT_FOUND, {"error": "no such path"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._send(HTTPStatus.BAD_REQUEST, {"error": "body: not a JSON document"})
            return
        try:
            status, document = self.host.start(body)
        except BadRequest as error:
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(error)})
        except Conflict as error:
            self._send(HTTPStatus.CONFLICT, {"error": str(error)})
        except Unavailable as error:
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(error)})
        else:
            self._send(status, document)

    def do_DELETE(self) -> None:
        if not self._allowed():
            return
        path = urlsplit(self.path).path
        if path.startswith("/trials/") and self.host.delete(path.removeprefix("/trials/")):
            self._send(HTTPStatus.OK, {"deleted": path.removeprefix("/trials/")})
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": "no such trial"})

    def _send(self, status: int, body: str | dict[str, Any]) -> None:
        if isinstance(body, str):
            data, kind = f"{body}\n".encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(body).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a long poll every few seconds: the log keeps the trials' starts and ends


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cxlab-trial-host", description="Run trial Pods' runner commands as processes."
    )
    parser.add_argument("--port", type=int, default=9101)
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument(
        "--start-wait",
        type=float,
        default=START_WAIT_SECONDS,
        help="how long a start waits for the previous trial's process to end (seconds)",
    )
    parser.add_argument(
        "--pod-ip",
        default=os.environ.get("POD_IP"),
        help="the host Pod's IP, reported as each trial's podIP (default: $POD_IP)",
    )
    parser.add_argument(
        "--any-command",
        action="store_true",
        help=f"run any command, writing its Result anywhere (tests); by default only the "
        f"runners, their Results in {RESULTS_FOLDER}",
    )
    args = parser.parse_args(argv)
    # Out of the environment before any trial's process starts: its trials never see it.
    token = os.environ.pop(HOST_TOKEN_ENV, None) or None
    _become_subreaper()
    host = TrialHost(args.start_wait, args.pod_ip, args.any_command)
    handler = type("Handler", (_Handler,), {"host": host, "token": token})
    server = ThreadingHTTPServer((args.address, args.port), handler)
    server.daemon_threads = True
    # PID 1 in its container: the kernel delivers it no signal that has no handler.
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: stopping.set())
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    threading.Thread(target=host.warm_up, name="warm-up", daemon=True).start()
    _log(f"listening on {args.address}:{args.port}")
    stopping.wait()
    _log("stopping")
    host.shutdown()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
