"""`make bench-operator`: what the operator costs on the real local cluster, in one run.

Starts its own operator, applies an experiment of 10 short trials (parallelism 1), and
prints: apply → first trial Pod created; each Pod's own start-up (created → its runner's
tasks began); trial Pod ended → next trial's Pod created; the operator's overhead per trial
(the experiment's duration outside every trial Pod's life, per trial); status patches per
trial (watch events whose status changed); the operator's RSS. Prints figures; asserts
nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from cxlab.controller.kube import Kube

ROOT = Path(__file__).resolve().parents[2]
KUBECONFIG = ROOT / "build" / "cluster" / "kubeconfig"
TRIALS = 10


def experiment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": name},
        "spec": {
            "workload": {"type": "sleep", "tasks": 50, "rtt": "10ms"},
            "models": [{"model": "asyncio", "workers": [1, 2, 5, 10, 0]}],
            "repetitions": TRIALS // 5,
        },
    }


def events(
    list_call: Callable[..., Any], *args: Any, seconds: float, **kwargs: Any
) -> Iterator[Any]:
    """Watch events for up to `seconds`. A watch the apiserver ends with 410 (its resource
    version expired) or 504 (its watch cache is behind the version a fresh list returned) is
    started again from the current state, as kopf and client-go's reflector do."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        watcher = kubernetes.watch.Watch()
        try:
            yield from watcher.stream(list_call, *args, timeout_seconds=max(1, int(left)), **kwargs)
        except ApiException as error:
            if error.status not in (410, 504):
                raise
            print(
                f"watch ended with {error.status} ({error.reason}): watching again", file=sys.stderr
            )
            time.sleep(0.5)


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


@dataclass
class PodSeen:
    """One trial Pod as the benchmark's watch saw it (time.time(), comparable with the
    Result's startedAtUnixSeconds: one machine, one clock)."""

    trial: str
    added: float
    ended: float | None = None  # first seen Succeeded or Failed


def main() -> None:
    kubernetes.config.load_kube_config(config_file=str(KUBECONFIG))
    core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
    namespace = f"cxlab-bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    log = open(ROOT / "build" / "cluster" / "logs" / "operator-bench.log", "wb")  # noqa: SIM115
    command = [sys.executable, "-m", "cxlab.cli", "operator"]
    operator = subprocess.Popen(
        [*command, "--health-port", "0", "--metrics-port", "0", "--namespace", "cxlab-bench-*"],
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(5)  # the operator's start-up is not what is measured
        name = "bench"
        pods: dict[str, PodSeen] = {}
        status_changes = 0
        done = threading.Event()

        def watch_pods() -> None:
            for event in events(core.list_namespaced_pod, namespace, seconds=300,
                                label_selector=f"cxlab.dev/experiment={name}"):  # fmt: skip
                pod, seen = event["object"], time.time()
                trial = pod.metadata.labels["cxlab.dev/trial"]
                entry = pods.setdefault(pod.metadata.name, PodSeen(trial, added=seen))
                if pod.status.phase in ("Succeeded", "Failed") and entry.ended is None:
                    entry.ended = seen
                if done.is_set():
                    return

        def watch_status() -> None:
            nonlocal status_changes
            previous = json.dumps(None)  # created without a status
            for event in events(custom.list_namespaced_custom_object, "cxlab.dev", "v1alpha1",
                                namespace, "concurrencyexperiments", seconds=600):  # fmt: skip
                status = json.dumps(event["object"].get("status"), sort_keys=True)
                # a watch started again replays the object as ADDED: a change is a change
                if status != previous:
                    status_changes += 1
                previous = status
                if event["object"].get("status", {}).get("phase") in ("Succeeded", "Failed"):
                    done.set()
                    return

        # daemons: a failed apply must not leave the run waiting for the watches' timeouts
        threads = [
            threading.Thread(target=watch_pods, daemon=True),
            threading.Thread(target=watch_status, daemon=True),
        ]
        for thread in threads:
            thread.start()
        time.sleep(1)
        applied = time.time()
        custom.create_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments", experiment(name)
        )
        threads[1].join()
        finished = time.time()
        # with the trials' full entries (their Results are in ConfigMaps beside it)
        found = Kube().get_experiment(namespace, name, full=True)
        assert found is not None
        status = found["status"]
        report(status, pods, applied, finished, status_changes)
        print(f"{'operator RSS now / peak':<44}{memory_kib(operator.pid, 'VmRSS:') / 1024:.0f} / "
              f"{memory_kib(operator.pid, 'VmHWM:') / 1024:.0f} MiB")  # fmt: skip
    finally:
        remove_namespace(core, custom, namespace, seconds=60)
        operator.terminate()
        operator.wait(timeout=30)


def remove_namespace(core: Any, custom: Any, namespace: str, seconds: float) -> None:
    """Delete a benchmark's namespace while its operator still runs: the operator removes
    its experiments' finalizers. What is left after `seconds` (or with no operator, 0) loses
    them here: no later operator would, since kopf stops serving a namespace once it is
    Terminating, and the namespace would stay Terminating for good."""
    core.delete_namespace(namespace)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            core.read_namespace(namespace)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        time.sleep(1)
    listed = custom.list_namespaced_custom_object(
        "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments"
    )
    for body in listed["items"]:
        custom.patch_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments",
            body["metadata"]["name"], {"metadata": {"finalizers": None}},
        )  # fmt: skip


def report(
    status: dict[str, Any],
    pods: dict[str, PodSeen],
    applied: float,
    finished: float,
    status_changes: int,
) -> None:
    """The figures: the gaps the operator leaves between trials, apart from what each Pod
    takes to start (scheduling, the container, the runner's imports) and to run."""
    trials = [t for t in status["trials"] if t.get("result")]
    seen = sorted(pods.values(), key=lambda p: p.added)
    ended = [p.ended for p in seen if p.ended is not None]
    # completion of one trial's Pod → the next trial's Pod created (parallelism 1)
    gaps = [b.added - a.ended for a, b in itertools.pairwise(seen) if a.ended]
    # Pod created → its runner's task phase began (the Pod's own start-up)
    started = {t["result"]["trial"]: t["result"].get("startedAtUnixSeconds") for t in trials}
    startups = [started[p.trial] - p.added for p in seen if started.get(p.trial)]
    lifetimes = sum((p.ended or finished) - p.added for p in seen)
    overhead = (finished - applied - lifetimes) / len(trials)
    walls = sum(t["result"]["wallSeconds"] for t in trials)
    print(f"Operator on the local cluster: {TRIALS} trials of 50 sleep tasks at 10 ms")
    rows = [
        ("phase", status["phase"]),
        ("apply -> first trial Pod created", f"{seen[0].added - applied:.2f} s"),
        ("experiment duration", f"{finished - applied:.1f} s"),
        ("sum of trial wall times", f"{walls:.2f} s"),
        ("Pod start-up (created -> tasks), median", f"{statistics.median(startups):.2f} s"),
        ("trial Pod ended -> next Pod created", _spread(gaps)),
        ("last Pod ended -> experiment finished", f"{finished - max(ended):.2f} s"),
        ("operator overhead per trial", f"{overhead:.2f} s (outside every Pod's life)"),
        ("status patches per trial", f"{status_changes / TRIALS:.1f} (of {status_changes})"),
    ]
    for label, value in rows:
        print(f"{label:<44}{value}")


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return (
        f"median {statistics.median(ordered):.3f} s, max {ordered[-1]:.3f} s (n = {len(ordered)})"
    )


if __name__ == "__main__":
    main()
