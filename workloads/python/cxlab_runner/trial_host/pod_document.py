"""A trial as the kubelet would report it: a Pod document (the metadata as posted, a status
shaped as the kubelet writes it) and its container's termination message, which the operator
reads with the Pod parser it reads trial Pods with (operator/cxlab/experiments/pod_view.py)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from cxlab_runner.trial_host.manifest import rfc3339
from cxlab_runner.trial_host.trial_record import RUNNING, Trial

if TYPE_CHECKING:
    from cxlab_runner.trial_host.manifest import TrialSpec

# The kubelet's limits on a termination message (pkg/kubelet/container/runtime.go): the last
# 4096 bytes of the file; from the log, the last 80 lines, at most their last 2048 bytes.
MESSAGE_BYTES = 4096
LOG_LINES = 80
LOG_BYTES = 2048


def pod_document(trial: Trial, pod_ip: str | None) -> dict[str, Any]:
    """The trial as a Pod, with the host's lock held. Its metadata is never changed after the
    POST, so the document shares it."""
    running = trial.phase == RUNNING
    ready = running and trial.written
    status: dict[str, Any] = {
        "phase": trial.phase,
        "startTime": rfc3339(trial.accepted_at),
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [_container_status(trial, running, ready)],
    }
    if trial.reason:
        status["reason"] = trial.reason
    if pod_ip:  # the runner's metrics port is the host Pod's
        status["podIP"] = pod_ip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": trial.spec.metadata,
        "status": status,
    }


def _container_status(trial: Trial, running: bool, ready: bool) -> dict[str, Any]:
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
            "finishedAt": rfc3339(trial.finished_at or time.time()),
        }
        if trial.started_at is not None:
            terminated["startedAt"] = rfc3339(trial.started_at)
        if trial.message:  # the kubelet leaves an empty message out
            terminated["message"] = trial.message
        container["state"] = {"terminated": terminated}
    elif running:
        container["state"] = {"running": {"startedAt": rfc3339(trial.started_at or 0)}}
    else:
        container["state"] = {"waiting": {"reason": "ContainerCreating"}}
    return container


def termination_message(spec: TrialSpec, exit_code: int) -> str:
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
