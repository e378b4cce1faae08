"""`make bench-pass`: the CPU of the operator's passes alone, without a cluster, on
bench-scale's experiment (100 trials, parallelism 10).

The real Reconciler runs against an apiserver in memory (status writes round-trip through
JSON, as the apiserver's answer does) and a kubelet that ends each trial Pod with a Result
of the real Python runner's. Each pass records what ended, as it would when several trials
end between two passes (`--batch`: trials ended per pass, 1 by default; `--calibration`: two
trials follow the sweep, one at a time). Prints the CPU per trial and per pass, and how often
the Results were read back from their ConfigMaps; `--profile` adds cProfile's top functions.
What kopf costs around the passes (watch events, indexes) is not in it: bench-scale has that.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import json
import pstats
import re
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

from cxlab.config import OperatorConfig
from cxlab.controller.experiment_pass import Reconciler
from cxlab.controller.kube import StaleStatus
from cxlab.controller.metrics import OperatorMetrics
from cxlab.experiments.pod_view import PodView, view_pod
from cxlab.times import now

WORKERS = list(range(1, 11))


def experiment(calibration: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "s000", "namespace": "lab", "uid": "u-1", "generation": 1,
                     "resourceVersion": "1", "creationTimestamp": "2026-11-27T09:00:00Z"},
        "spec": {
            "workload": {"type": "sleep", "tasks": 10, "rtt": "100ms"},
            "models": [{"model": "asyncio", "workers": WORKERS}],
            "repetitions": 10,
            "parallelism": 10,
        } | ({"calibration": True} if calibration else {}),
    }  # fmt: skip


def results() -> dict[int, dict[str, Any]]:
    """A real Result of the Python runner for each worker count (1 ms tasks)."""
    found = {}
    for workers in WORKERS:
        out = subprocess.run(
            [sys.executable, "-m", "cxlab_runner", "--model", "asyncio", "--workload", "sleep",
             "--tasks", "10", "--rtt", "1ms", "--workers", str(workers)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        found[workers] = json.loads(out)
    return found


class Apiserver:
    """The operator's Kube, in memory: status writes checked against the version and
    returned as the apiserver would (a fresh object, through JSON)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.pods: dict[str, dict[str, Any]] = {}
        self.config_maps: dict[str, dict[str, Any]] = {}
        self.config_map_lists = 0  # reads of the Results back: a pass should rarely need them

    def write_status(
        self, namespace: str, name: str, document: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        if version != self.body["metadata"]["resourceVersion"]:
            raise StaleStatus(name)
        written = json.loads(json.dumps(self.body | {"status": document}))
        written["metadata"]["resourceVersion"] = str(int(version or 0) + 1)
        self.body = written
        return json.loads(json.dumps(written))

    def get_experiment(self, namespace: str, name: str, full: bool = False) -> dict[str, Any]:
        return copy.deepcopy(self.body)

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        self.pods[manifest["metadata"]["name"]] = json.loads(json.dumps(manifest))
        return True

    def delete_pod(self, namespace: str, name: str) -> None:
        self.pods.pop(name, None)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get(name)

    def add_to_config_map(self, manifest: dict[str, Any]) -> None:
        kept = self.config_maps.setdefault(manifest["metadata"]["name"], manifest)
        kept.setdefault("binaryData", {}).update(json.loads(json.dumps(manifest["binaryData"])))

    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        self.config_map_lists += 1
        return list(self.config_maps.values())

    def list_nodes(self) -> list[dict[str, Any]]:
        return [{"metadata": {"name": "node-1"},
                 "status": {"allocatable": {"cpu": "32", "memory": "128Gi"}}}]  # fmt: skip


def ended(pod: dict[str, Any], result: dict[str, Any]) -> PodView:
    """The Pod as the kubelet leaves it: Succeeded, its Result the termination message."""
    labels = pod["metadata"]["labels"]
    message = json.dumps(result | {"trial": labels["cxlab.dev/trial"]})
    view = view_pod(pod)
    return replace(view, phase="Succeeded", exit_code=0, termination_reason="Completed",
                   termination_message=message, node="node-1", ip="10.0.0.1",
                   started=now(), finished=now())  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=1, help="trials ended between two passes")
    parser.add_argument("--calibration", action="store_true",
                        help="two calibration trials after the sweep, one at a time")  # fmt: skip
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    by_workers = results()
    kube = Apiserver(experiment(args.calibration))
    reconciler = Reconciler(kube, OperatorConfig(), OperatorMetrics())  # type: ignore[arg-type]
    views: dict[str, PodView] = {}
    profiler = cProfile.Profile() if args.profile else None
    cpu, passes, wall = 0.0, 0, time.monotonic()
    while not (kube.body.get("status") or {}).get("completionTime"):
        body = copy.deepcopy(kube.body)  # as kopf hands it over: the latest object
        live = [v for n, v in views.items() if n in kube.pods]
        began = time.process_time()
        if profiler:
            profiler.enable()
        reconciler.reconcile(body, live, lambda *_: None)
        if profiler:
            profiler.disable()
        cpu += time.process_time() - began
        passes += 1
        views = {n: v for n, v in views.items() if n in kube.pods}
        # the kubelet: the oldest `batch` Pods not yet ended end now, with a Result
        starting = [n for n in kube.pods if n not in views]
        for name in starting:
            views[name] = replace(view_pod(kube.pods[name]), phase="Pending")
        running = [n for n, v in views.items() if v.phase != "Succeeded"]
        for name in running[: args.batch]:
            trial = kube.pods[name]["metadata"]["labels"]["cxlab.dev/trial"]
            workers = int(re.search(r"-w(\d+)-", trial).group(1))  # type: ignore[union-attr]
            views[name] = ended(kube.pods[name], by_workers.get(workers, by_workers[1]))
        if passes > 10_000:
            sys.exit("no end after 10,000 passes")
    status = kube.body["status"]
    trials = len(status["trials"])
    print(f"Passes of one experiment of {trials} trials, {args.batch} ended per pass "
          f"({time.strftime('%Y-%m-%d')}):")  # fmt: skip
    print(f"  phase                {status['phase']}")
    print(f"  passes               {passes}")
    print(f"  CPU per trial        {1000 * cpu / trials:.1f} ms")
    print(f"  CPU per pass         {1000 * cpu / passes:.1f} ms")
    print(f"  ConfigMap lists      {kube.config_map_lists}")
    print(f"  status at the end    {len(json.dumps(status)) / 1024:.0f} KiB")
    print(f"  wall                 {time.monotonic() - wall:.1f} s")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
