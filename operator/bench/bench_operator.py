"""`make bench-operator`: what the operator costs on the real local cluster, in one run.

Starts its own operator, applies an experiment of 10 short trials, and prints: apply → first
trial Pod created; per-trial overhead (experiment duration minus the sum of trial wall times,
divided by trials); status patches per trial (watch events whose status changed); the
operator's RSS. Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

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
        first_pod: list[float] = []
        status_changes = 0

        def watch_pods() -> None:
            for _ in events(core.list_namespaced_pod, namespace, seconds=300,
                            label_selector=f"cxlab.dev/experiment={name}"):  # fmt: skip
                first_pod.append(time.monotonic())
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
                    return

        # daemons: a failed apply must not leave the run waiting for the watches' timeouts
        threads = [
            threading.Thread(target=watch_pods, daemon=True),
            threading.Thread(target=watch_status, daemon=True),
        ]
        for thread in threads:
            thread.start()
        time.sleep(1)
        applied = time.monotonic()
        custom.create_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments", experiment(name)
        )
        for thread in threads:
            thread.join()
        finished = time.monotonic()
        status = custom.get_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments", name
        )["status"]
        walls = sum(t["result"]["wallSeconds"] for t in status["trials"] if t.get("result"))
        overhead = (finished - applied - walls) / TRIALS
        print(f"Operator on the local cluster: {TRIALS} trials of 50 sleep tasks at 10 ms")
        print(f"{'phase':<34}{status['phase']}")
        print(f"{'apply -> first trial Pod created':<34}{first_pod[0] - applied:.2f} s")
        print(f"{'experiment duration':<34}{finished - applied:.1f} s")
        print(f"{'sum of trial wall times':<34}{walls:.2f} s")
        print(f"{'overhead per trial':<34}{overhead:.2f} s (Pod start-up, imports, linger)")
        print(
            f"{'status patches per trial':<34}{status_changes / TRIALS:.1f} (of {status_changes})"
        )
        print(f"{'operator RSS now / peak':<34}{memory_kib(operator.pid, 'VmRSS:') / 1024:.0f} / "
              f"{memory_kib(operator.pid, 'VmHWM:') / 1024:.0f} MiB")  # fmt: skip
    finally:
        operator.terminate()
        operator.wait(timeout=30)
        core.delete_namespace(namespace)


if __name__ == "__main__":
    main()
