"""Helpers shared by the tests: run the real runners as subprocesses, read their Results.
(Kept out of conftest.py: tests/cluster has a conftest of its own, and two modules named
conftest cannot both be imported by name.)"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cxlab.analysis.outcome import parse_result
from cxlab.barrier import is_ready
from cxlab.controller.kube import StaleStatus

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "build" / "bin"
EXAMPLES = ROOT / "manifests" / "examples"
# One roomy Node, as the apiserver lists it, for fakes of the operator's Kube.
NODE = {"metadata": {"name": "node-1"}, "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}}


class ApiserverBase:
    """What a fake of the operator's Kube answers unless a test says otherwise: one roomy
    Node, no ConfigMaps kept, no Pod found by a read."""

    def add_to_config_map(self, manifest: dict[str, Any]) -> None:
        pass

    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return []

    def list_nodes(self) -> list[dict[str, Any]]:
        return [NODE]

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None


class Apiserver(ApiserverBase):
    """The operator's Kube in memory, for passes run step by step: the experiment (status
    writes checked against its resourceVersion, as the apiserver does), its Pods, the
    ConfigMaps beside it, and every request in the order sent (`calls`)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = copy.deepcopy(body)
        self.body["metadata"].setdefault("resourceVersion", "1")
        self.pods: dict[str, dict[str, Any]] = {}
        self.config_maps: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    def write_status(
        self, namespace: str, name: str, document: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        self.calls.append("write status")
        if version != self.body["metadata"]["resourceVersion"]:
            raise StaleStatus(f"{name} changed since version {version}")
        self.body = json.loads(json.dumps(self.body | {"status": document}))
        self.body["metadata"]["resourceVersion"] = str(int(version or 0) + 1)
        return copy.deepcopy(self.body)

    def get_experiment(self, namespace: str, name: str, full: bool = False) -> dict[str, Any]:
        return copy.deepcopy(self.body)

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        self.calls.append(f"create {manifest['metadata']['name']}")
        self.pods[manifest["metadata"]["name"]] = copy.deepcopy(manifest)
        return True

    def delete_pod(self, namespace: str, name: str) -> None:
        self.calls.append(f"delete {name}")
        self.pods.pop(name, None)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get(name)

    def add_to_config_map(self, manifest: dict[str, Any]) -> None:
        self.calls.append(f"add to {manifest['metadata']['name']}")
        kept = self.config_maps.setdefault(manifest["metadata"]["name"], copy.deepcopy(manifest))
        kept.setdefault("binaryData", {}).update(manifest["binaryData"])

    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        self.calls.append("list ConfigMaps")
        return copy.deepcopy(list(self.config_maps.values()))


def program(name: str) -> str:
    path = shutil.which(name) or str(BIN / name)
    if not Path(path).exists():
        pytest.fail(f"{name} is not built: run `make deps`")
    return path


def runner_argv(model: str, *flags: str) -> list[str]:
    if model == "goroutines":
        return [program("cxlab-runner-go"), "--model", model, *flags]
    return [sys.executable, "-m", "cxlab_runner", "--model", model, *flags]


def run_runner(model: str, *flags: str, timeout: float = 120) -> dict[str, Any]:
    """Run one trial to the end; its Result, validated against the schema."""
    completed = subprocess.run(
        runner_argv(model, *flags), capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, completed.stderr
    return parse_result(completed.stdout)


def wait_at_barrier(address: str, process: subprocess.Popen[Any], seconds: float = 30) -> None:
    """Until the runner at `address` waits at its start barrier (GET /ready), while it runs."""
    deadline = time.monotonic() + seconds
    while not is_ready(address):
        assert process.poll() is None and time.monotonic() < deadline, "never ready"
        time.sleep(0.02)


def scrape(port: int, deadline_seconds: float = 10) -> str:
    deadline = time.monotonic() + deadline_seconds
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
                return str(reply.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def until(check: Callable[[], Any], seconds: float = 30) -> Any:
    """On the event loop: check() until it gives something true, which is returned; an
    AssertionError after `seconds`."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, "not within the time given"
        await asyncio.sleep(0.02)
    return found
