"""The trial host's one slot: trials started, listed, stopped and forgotten, one process at a
time, each a Pod's life as the kubelet leads it (start, deadline, stop, end)."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from http import HTTPStatus
from typing import Any

from cxlab_runner.trial_host.fork_server import Forked, ForkServer
from cxlab_runner.trial_host.manifest import parse_manifest, runner_only
from cxlab_runner.trial_host.pod_document import pod_document, termination_message
from cxlab_runner.trial_host.supervision import (
    end_session,
    inotify,
    kill_group,
    oom_kills,
    remove_files,
    signal_process,
    watch_result,
)
from cxlab_runner.trial_host.trial_record import FAILED, RUNNING, SUCCEEDED, Process, Trial

# How long a POST waits for the previous trial's process to end before answering 409. The
# previous runner exits right after the operator's final read, so a start normally waits only
# milliseconds; two trials must never share the slot's cores.
START_WAIT_SECONDS = 5.0


class Conflict(Exception):
    """Another trial's process still runs: 409."""


class Unavailable(Exception):
    """The host is shutting down: 503."""


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
        self.fork_server = ForkServer()

    @property
    def warm(self) -> threading.Event:
        """Set once the fork server is warm (GET /healthz)."""
        return self.fork_server.warm

    def warm_up(self) -> None:
        """Start the fork server and wait for its imports, so no trial pays for them."""
        try:
            self.fork_server.warm_up()
        except Exception as error:  # /healthz stays 503: the Pod never gets Ready
            log(f"the fork server did not start: {error!r}")
            return
        log("the fork server is warm")

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
                remove_files(trial.spec)
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
    # A trial's life

    def _spawn(self, trial: Trial) -> None:
        spec = trial.spec
        watch = wake_read = wake_write = None
        kills_before = oom_kills()
        try:
            wake_read, wake_write = os.pipe()  # closed by the waiter: wakes the result watch
            os.makedirs(os.path.dirname(spec.result_path), exist_ok=True)
            remove_files(spec)  # a fresh trial: nothing left from one of the same name
            with open(spec.log_path, "wb") as output:
                # before the start, so that no write of the Result can come before the watch
                watch = inotify(os.path.dirname(spec.result_path))
                process = self.fork_server.start(spec, output)
        except Exception as error:  # the kubelet's StartError: exit 128, the reason why
            for fd in (watch, wake_read, wake_write):
                if fd is not None:
                    os.close(fd)
            log(f"{spec.name} did not start: {error}")
            self._finish(trial, 128, "StartError", str(error))
            return
        with self._lock:
            trial.process = process
            trial.forked = isinstance(process, Forked)
            trial.phase = RUNNING
            trial.started_at = time.time()
            trial.started_monotonic = time.monotonic()
            stop = trial.stop_asked
            self._bump()
        how = "forked" if trial.forked else "exec'd"
        log(f"{spec.name} started: pid {process.pid}, {how}")
        ready = functools.partial(self._ready, trial)
        threading.Thread(
            target=watch_result,
            args=(spec.result_path, watch, wake_read, trial.exited, ready),
            daemon=True,
        ).start()
        threading.Thread(
            target=self._wait, args=(trial, process, wake_write, kills_before), daemon=True
        ).start()
        if stop:
            threading.Thread(target=self._stop, args=(trial,), daemon=True).start()

    def _wait(self, trial: Trial, process: Process, wake: int, kills_before: int | None) -> None:
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
            log(f"{trial.spec.name} outlived activeDeadlineSeconds {deadline}: stopping it")
            threading.Thread(target=self._stop, args=(trial,), daemon=True).start()
        trial.exited.set()
        os.close(wake)
        end_session(process.pid)
        exit_code = 128 - status if status < 0 else status  # a signal's, as a container's
        reason = "Completed" if exit_code == 0 else "Error"
        # OOMKilled: a SIGKILL the host did not send while the cgroup's OOM kill count rose
        # (cgroup v2's memory.events), as the runtime tells an OOM kill. Any other: Error.
        if exit_code == 128 + signal.SIGKILL and not trial.killed_by_host:
            after = oom_kills()
            if kills_before is not None and after is not None and after > kills_before:
                reason = "OOMKilled"
        self._finish(trial, exit_code, reason, termination_message(trial.spec, exit_code))

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
                remove_files(trial.spec)
            else:
                self._bump()
            if self._current is trial:
                self._current = None
        log(f"{trial.spec.name} ended: {trial.phase}, exit {exit_code} ({reason})")
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
        signal_process(process.pid, signal.SIGTERM)
        if not trial.exited.wait(trial.spec.grace_seconds):
            kill_group(process.pid)

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
        """The trial as a Pod, with the lock held."""
        return pod_document(trial, self.pod_ip)


def log(text: str) -> None:
    print(f"trial-host: {text}", file=sys.stderr, flush=True)
