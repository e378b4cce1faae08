"""Objectives on the real cluster: `kubectl wait --for=condition=ObjectivesMet` returns as a
pipeline expects for a met and a broken experiment, abortOnFail skips on the operator as it
does locally, and `cxlab wait cx/NAME` exits as `cxlab run` does (cxlab.cli's docstring)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.cluster import KUBECONFIG, ROOT, SHARED_POOL, TIMEOUT_SCALE, Lab, experiment_spec, why

KUBECTL = str(ROOT / "build" / "k8s" / "bin" / "kubectl")
ENV = {**os.environ, "KUBECONFIG": str(KUBECONFIG)}
QUICK = {"type": "sleep", "tasks": 5, "rtt": "20ms"}


def kubectl_wait(lab: Lab, name: str, condition: str, seconds: int = 240) -> int:
    timeout = f"--timeout={int(seconds * TIMEOUT_SCALE)}s"
    return subprocess.run(
        [KUBECTL, "-n", lab.namespace, "wait", f"--for=condition={condition}", timeout,
         f"cx/{name}"],
        capture_output=True, env=ENV, check=False,
    ).returncode  # fmt: skip


def cxlab_wait(
    lab: Lab, name: str, *flags: str, kubeconfig: Path = KUBECONFIG
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxlab.cli", "wait", f"cx/{name}", "-n", lab.namespace, *flags],
        capture_output=True, text=True, env={**ENV, "KUBECONFIG": str(kubeconfig)}, check=False,
    )  # fmt: skip


def reader_kubeconfig(lab: Lab, path: Path) -> Path:
    """A kubeconfig of a ServiceAccount that may read experiments and nothing else (no
    ConfigMaps): what a pipeline given too little is."""
    kubectl = [KUBECTL, "-n", lab.namespace]
    rules = "--verb=get,list,watch --resource=concurrencyexperiments.cxlab.dev"
    for command in (
        "create serviceaccount reader",
        f"create role reader {rules}",
        "create rolebinding reader --role=reader --serviceaccount=" + lab.namespace + ":reader",
    ):
        subprocess.run([*kubectl, *command.split()], env=ENV, check=True, capture_output=True)
    token = subprocess.run(
        [*kubectl, "create", "token", "reader"], env=ENV, check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip
    config = yaml.safe_load(KUBECONFIG.read_text())
    config["users"] = [{"name": "reader", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "reader"
    path.write_text(yaml.safe_dump(config))
    return path


def printer_column(lab: Lab, name: str) -> str:
    """The Objectives column of `kubectl get cx NAME`."""
    table = subprocess.run(
        [KUBECTL, "-n", lab.namespace, "get", "cx", name], capture_output=True, text=True,
        env=ENV, check=True,
    ).stdout.splitlines()  # fmt: skip
    header, row = table[0], table[1]
    start = header.index("OBJECTIVES")
    return row[start:].split()[0]


@pytest.mark.long
def test_kubectl_wait_and_cxlab_wait_gate_on_the_verdict(lab: Lab, tmp_path: Path) -> None:
    """Met and broken (with trials skipped), applied together so they run side by side, each
    waited for as a pipeline would. Inconclusive's exit status is the same function's
    (tests/analysis/test_objectives.py), shown end to end locally (tests/local/test_backend.py)."""
    met: dict[str, Any] = experiment_spec(
        [{"model": "asyncio"}], QUICK, objectives=[{"latency": {"max": "1s"}}], **SHARED_POOL
    )
    # every task sleeps 20 ms, so no p50 is 5 ms: 1 worker breaks it and 2 and 4 workers can
    # only do worse (skipped)
    broken = experiment_spec(
        [{"model": "threads", "workers": [1, 2, 4]}], QUICK,
        objectives=[{"name": "p50-5ms", "latency": {"percentile": "p50", "max": "5ms"},
                     "abortOnFail": True}], **SHARED_POOL,
    )  # fmt: skip
    lab.apply("broken", broken)
    lab.apply("met", met)
    # one task of 60 s on a quarter of a core (the shared pool: beside the others, not before
    # them): surely not finished within wait's second; a 5-task experiment was, once, in CI
    slow = experiment_spec([{"model": "asyncio"}], {"type": "sleep", "tasks": 1, "rtt": "60s"},
                           **SHARED_POOL)  # fmt: skip
    lab.apply("slow", slow)
    early = cxlab_wait(lab, "slow", "--timeout", "1s")
    assert early.returncode == 124 and "not finished after 1s" in early.stderr
    lab.delete("slow")
    assert kubectl_wait(lab, "met", "ObjectivesMet") == 0
    assert kubectl_wait(lab, "broken", "ObjectivesMet=False") == 0
    # a pipeline waiting for True on the broken one is not let through
    assert kubectl_wait(lab, "broken", "ObjectivesMet", seconds=3) != 0

    done = lab.get("broken")
    status = done["status"]
    assert status["phase"] == "Succeeded", why(done)  # it ran; what it measured is the verdict
    phases = {t["name"]: t["phase"] for t in status["trials"]}
    assert sorted(n for n, p in phases.items() if p == "Skipped") == [
        "001-threads-w2-rtt20ms-r1", "002-threads-w4-rtt20ms-r1",
    ], why(done)  # fmt: skip
    assert status["progress"]["trialsSkipped"] == 2
    assert not [p for p in lab.pods("broken") if "-w2-" in p.metadata.name]  # never started
    [objective] = status["objectives"]
    assert (objective["verdict"], objective["skippedTrials"]) == ("Broken", 2)
    assert printer_column(lab, "met") == "True" and printer_column(lab, "broken") == "False"

    ran = cxlab_wait(lab, "met")
    assert ran.returncode == 0, ran.stderr
    assert "Objectives: met" in ran.stdout
    ran = cxlab_wait(lab, "broken")
    assert ran.returncode == 3, ran.stderr
    assert "Objectives: NOT MET" in ran.stdout and "Skipped trials:" in ran.stdout
    # given the right to read experiments but not their ConfigMaps: the verdict all the same
    reader = reader_kubeconfig(lab, tmp_path / "reader")
    ran = cxlab_wait(lab, "broken", kubeconfig=reader)
    assert ran.returncode == 3, ran.stderr
    assert "may not list its ConfigMaps (403)" in ran.stderr and "Objectives: NOT MET" in ran.stdout
    missing = cxlab_wait(lab, "nothing-here")
    assert missing.returncode == 2 and "no ConcurrencyExperiment nothing-here" in missing.stderr
