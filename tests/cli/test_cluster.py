"""The commands that read a cluster, run where there is none (no KUBECONFIG, an empty home,
not in a Pod): one line naming what was looked for, exit 2, never the kubernetes client's
traceback; a kubeconfig that is there but broken is named with the client's own words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from cxlab.cli.exits import USAGE_ERROR

COMMANDS = [
    ["summary", "cx/web"],
    ["report", "cx/web", "-n", "lab"],
    ["wait", "cx/web", "--timeout", "5s"],
    ["plan", "--capacity", "cx/web"],
    ["compare", "cx/before", "cx/after"],
    ["operator", "--health-port", "0", "--metrics-port", "0"],
]
# What a cluster's configuration may come from: none of it reaches the command.
CLUSTER_VARIABLES = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


def cxlab(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    kept = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", "cxlab.cli", *args],
        capture_output=True, text=True, timeout=60, cwd=home,
        env={**kept, "HOME": str(home), "PYTHONPATH": str(ROOT / "operator"), **env},
    )  # fmt: skip


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0] if a[0] != "plan" else "capacity")
def test_no_cluster_configuration_is_one_line(args: list[str], tmp_path: Path) -> None:
    done = cxlab(args, tmp_path)
    assert done.returncode == USAGE_ERROR, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    line = done.stderr
    assert line.startswith("cxlab: ") and "no cluster configuration found" in line, line
    assert "in-cluster" in line and "KUBECONFIG (not set)" in line, line
    assert str(tmp_path / ".kube" / "config") in line, "the file looked for, as the home has it"
    assert done.stdout == ""
    assert sorted(tmp_path.iterdir()) == [], "nothing written"


def test_a_broken_kubeconfig_is_named_in_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    for text, says in (("clusters: [\n", "while parsing"), ("kind: Config\n", "current-context")):
        broken.write_text(text)
        done = cxlab(["summary", "cx/web"], tmp_path, KUBECONFIG=str(broken))
        assert done.returncode == USAGE_ERROR, done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert "cannot use the cluster configuration" in done.stderr, done.stderr
        assert f"KUBECONFIG={broken}" in done.stderr and says in done.stderr, done.stderr
