"""A trial Pod's manifest as the host takes it: the fields it runs, checked, and what a host
runs at all unless told --any-command."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

DEFAULT_GRACE_SECONDS = 5  # the brief's default, not Kubernetes' 30: trial Pods set 5
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # a DNS-1123 subdomain: a file name


class BadRequest(Exception):
    """A malformed manifest: 400, naming the field."""


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
        metadata = {**metadata, "creationTimestamp": rfc3339(time.time())}
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


def rfc3339(moment: float) -> str:
    """As Kubernetes writes a time, with milliseconds (cxlab.times.parse_time reads both)."""
    text = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")
