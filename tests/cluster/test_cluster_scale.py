"""A thousand trials in one experiment, on KWOK's fake nodes (hack/kwok.sh): the status keeps
compact entries, the Results go to ConfigMaps, and `cxlab summary cx/NAME` shows them all."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from helpers.cluster import ROOT, Lab, experiment_spec

# KWOK, 1000 trials: not beside the cluster phase, but beside the Prometheus module (paired):
# its fake nodes are tainted, so that module's trials never go there.
pytestmark = [pytest.mark.cluster, pytest.mark.solo(tool="kwok"), pytest.mark.paired]

FAKE_NODES = {"nodeSelector": {"type": "kwok"},
              "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                               "effect": "NoSchedule"}]}  # fmt: skip


def _kwok(action: str) -> None:
    done = subprocess.run(["hack/kwok.sh", action], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"hack/kwok.sh {action} failed:\n{done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def fake_nodes(cluster: None) -> Iterator[None]:
    """100 fake nodes for this module only: other tests see just the real node."""
    _kwok("start")
    yield
    _kwok("stop")


def test_a_thousand_trial_experiment_on_fake_nodes_is_summarized_whole(
    lab: Lab, fake_nodes: None
) -> None:
    workload = {"type": "sleep", "tasks": 10, "rtts": ["1ms", "2ms", "3ms", "4ms"]}
    models = [{"model": "asyncio", "workers": list(range(1, 26))}]  # 25 x 4 RTTs x 10 = 1000
    lab.apply("thousand", experiment_spec(models, workload, repetitions=10, parallelism=32,
                                          placement=FAKE_NODES))  # fmt: skip
    lab.wait_finished("thousand", timeout=600)
    experiment = lab.stored("thousand")
    status = experiment["status"]
    failed = [(e["name"], e.get("message")) for e in status["trials"] if e["phase"] == "Failed"]
    assert status["phase"] == "Succeeded", failed[:5] or status.get("conditions")
    assert status["progress"]["trialsDone"] == 1000 and len(status["trials"]) == 1000
    assert not any("result" in e for e in status["trials"])  # compact: Results elsewhere
    assert status["summary"]["summaryIn"] == "thousand-summary"  # points and knees too
    assert status["summary"]["pointCount"] == 100 and "points" not in status["summary"]
    size = len(json.dumps(experiment))
    chunks = lab.core.list_namespaced_config_map(
        lab.namespace, label_selector="cxlab.dev/experiment=thousand"
    ).items
    names = sorted(c.metadata.name for c in chunks)
    assert names == [f"thousand-results-{k}" for k in range(10)] + ["thousand-summary"]
    assert all(len(c.binary_data) == 100 for c in chunks if "-results-" in c.metadata.name)
    biggest = max(len(json.dumps(c.binary_data)) for c in chunks)
    print(f"\n1000 trials: the experiment object {size / 1024:.0f} KiB, "
          f"its largest results ConfigMap {biggest / 1024:.0f} KiB")  # fmt: skip
    summary = subprocess.run(
        [sys.executable, "-m", "cxlab.cli", "summary", "cx/thousand", "-n", lab.namespace],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout  # fmt: skip
    assert summary.startswith("thousand: Succeeded — 1000/1000 trials, 0 failed"), summary[:200]
    rows = [line.split() for line in summary.splitlines() if line.startswith("asyncio ")]
    points = [r for r in rows if len(r) > 4 and r[3].isdigit()]  # model workers rtt reps ...
    assert len(points) == 100 and sum(int(r[3]) for r in points) == 1000, summary[:2000]
