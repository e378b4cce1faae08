"""A trial host's trials in the operator's Pod index (cxlab.controller.host_watch), against
a real trial host (python -m cxlab_runner.trial_host) running a real runner: the index has
the trial as a Pod on the host's address, Running, Ready once its Result is written,
Succeeded with the Result after the final read; a trial let go leaves the index; a host
that stops answering is lost, with its trials. The apiserver's side is scripted (one host
Pod, Ready); the Pod watch's own protocol is tests/controller/test_pod_watch.py's."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import until
from helpers.specs import document

from cxlab.analysis.outcome import parse_result
from cxlab.config import OperatorConfig
from cxlab.controller import host_watch
from cxlab.controller.host_watch import forget_trial, start_trial
from cxlab.controller.pod_watch import PodIndex
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import LABEL_EXPERIMENT, build_trial_pod
from cxlab.experiments.resource import parse_experiment
from cxlab.local.delay_target import free_port
from cxlab.scrape import final_read, result_of
from cxlab_contract import HOST_TOKEN_ENV

ROOT = Path(__file__).resolve().parents[2]
KEY = ("lab", "exp")
TOKEN = "the-hosts-token"  # the host asks it of every call: the index shows it on each


def host_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "exp-host0", "namespace": "lab", "resourceVersion": "5",
            "labels": {LABEL_EXPERIMENT: "exp", "app.kubernetes.io/component": "trial-host"},
        },
        "spec": {"nodeName": "node-1", "containers": [
            {"name": "host", "env": [{"name": HOST_TOKEN_ENV, "value": TOKEN}]}]},
        "status": {"phase": "Running", "podIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip


class OneHost:
    """An apiserver that lists the one host Pod, then has nothing more to say."""

    def __init__(self) -> None:
        self.cut = threading.Event()

    def request(self, method: str, path: str, query: dict[str, Any]) -> dict[str, Any]:
        return {"items": [host_pod()], "metadata": {"resourceVersion": "5"}}

    def stream(
        self, path: str, *, query: dict[str, Any], timeout: float, opened: Any
    ) -> Iterator[Any]:
        opened(self)
        self.cut.wait(60)
        return iter(())

    def shutdown(self) -> None:
        self.cut.set()


@pytest.fixture
def trial_host() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workloads" / "python"), HOST_TOKEN_ENV: TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "cxlab_runner.trial_host", "--port", str(port)], env=env
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield port, process
    finally:
        process.terminate()
        process.wait(10)


def manifest(metrics_port: int) -> dict[str, Any]:
    spec = parse_experiment(
        document(workload={"type": "sleep", "tasks": 20, "rtt": "5ms"},
                 models=[{"model": "asyncio", "workers": [2]}], isolation="process")
    ).spec  # fmt: skip
    config = OperatorConfig(metrics_port=metrics_port, final_read="10s")
    name = f"exp{os.getpid()}"  # its Result goes to /tmp/<Pod name>.result on this machine
    return build_trial_pod(
        experiment=name, namespace="lab", uid="u", spec=spec, trial=plan_trials(spec)[0],
        attempt=1, config=config, hosted=True,
    )  # fmt: skip


def test_a_hosted_trial_is_in_the_index_as_a_pod_from_start_to_end(
    trial_host: tuple[int, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, process = trial_host
    metrics_port = free_port()
    pod = manifest(metrics_port)
    name = pod["metadata"]["name"]
    told: list[tuple[str, str | None, str | None]] = []

    def on_change(key: tuple[str, str], before: PodView | None, after: PodView | None) -> None:
        assert key == KEY
        view = after or before
        assert view is not None
        told.append((view.name, before and before.phase, after and after.phase))

    def view(pod_name: str) -> PodView | None:
        return next((p for p in index.pods(KEY) if p.name == pod_name), None)

    monkeypatch.setattr(host_watch, "UNREACHABLE_SECONDS", 1.0)
    monkeypatch.setattr(host_watch, "POLL_SECONDS", 0.5)
    index = PodIndex(OneHost(), on_change, clusterwide=False, host_port=port)  # type: ignore[arg-type]

    async def main() -> None:
        await index.ready("lab")
        host = await until(lambda: (h := view("exp-host0")) and h.trials_listed and h)
        started = await asyncio.to_thread(start_trial, host, port, pod)
        assert started.name == name and started.host == "exp-host0"
        ready = await until(lambda: (t := view(name)) and t.ready and t)
        assert ready.phase == "Running" and ready.ip == "127.0.0.1" and ready.node == "node-1"
        assert ready.trial == pod["metadata"]["labels"]["cxlab.dev/trial"] and ready.attempt == 1
        # the operator's final read, as LiveReads makes it: then the runner exits
        result = await asyncio.to_thread(result_of, "127.0.0.1", metrics_port, 2.0)
        assert result is not None
        assert await asyncio.to_thread(final_read, "127.0.0.1", metrics_port, 2.0)
        ended = await until(lambda: (t := view(name)) and t.phase == "Succeeded" and t)
        assert ended.exit_code == 0 and ended.termination_reason == "Completed"
        assert parse_result(ended.termination_message or "")["tasksOk"] == 20
        await asyncio.to_thread(forget_trial, host, port, name)
        await until(lambda: view(name) is None)
        # the host stops answering: lost, as a Pod of a lost node
        process.kill()
        lost = await until(lambda: (h := view("exp-host0")) and h.phase == "Failed" and h, 15)
        assert lost.reason == "HostUnreachable" and not lost.live

    try:
        asyncio.run(main())
    finally:
        index.stop()
    phases = [(before, after) for pod_name, before, after in told if pod_name == name]
    assert phases[-1] == ("Succeeded", None)
    assert ("Running", "Succeeded") in phases
