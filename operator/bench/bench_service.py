"""`make bench-service`: what the operator adds to each spec.service variant beyond
Kubernetes' own work, on the real local cluster (issue 50's goal: at most 1 s per variant
beyond the kubelet's start-up).

The user's Deployment is httpbin under gunicorn (cxlab.dev/httpbin:dev, the image the
cluster tests use); an experiment of VARIANTS named variants (gunicorn sync with 1, 2 and 3
workers), one short trial each. The benchmark watches, from its own watches (time.time() on
receipt: one machine, one clock), every copy Deployment, copy Pod, copy EndpointSlice and
trial Pod (and the trials' Results: when their tasks ended), and splits each variant's
time between copies into:
- the operator's: the previous variant's copy gone (the first: the experiment applied) →
  this copy created; the copy's endpoints listed → its first trial Pod created; its last
  trial's tasks ended (its Result) → the copy's deletion began;
- Kubernetes': copy created → its Pods created (the Deployment and ReplicaSet controllers);
  Pods created → every one Ready (the kubelet's start-up, the readiness probe's); every Pod
  Ready → the Service's EndpointSlice lists them (the EndpointSlice controller); deletion
  began → the last Pod gone (the garbage collector, the kubelet's stop).
Beside them, what status says of each copy (readySeconds, deletedSeconds). Prints
figures; asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kubernetes
from bench_operator import KUBECONFIG, ROOT, events, remove_namespace

from cxlab.controller.kube import Kube
from cxlab.local.delay_target import free_port

IMAGE = "cxlab.dev/httpbin:dev"
VARIANTS = 3
COPY = "app.kubernetes.io/component=service-copy"
VARIANT_LABEL = "cxlab.dev/service-variant"
WATCH_SECONDS = 600


@dataclass
class CopySeen:
    """One variant's copy and trials as the watches saw them (None: not seen yet)."""

    created: float | None = None  # the copy's Deployment ADDED
    deleting: float | None = None  # its deletionTimestamp first seen
    pods_added: dict[str, float] = field(default_factory=dict)
    pods_ready: dict[str, float] = field(default_factory=dict)
    pods_gone: dict[str, float] = field(default_factory=dict)
    listed: float | None = None  # the EndpointSlice first lists every replica ready
    trial_added: list[float] = field(default_factory=list)


def user_objects(namespace: str) -> None:
    """The user's Deployment and Service, as tests/cluster/test_cluster_service.py makes
    them; waits until it is Ready (the copies' images are then on the node)."""
    container = {
        "name": "httpbin", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
        "args": ["--bind", "0.0.0.0:8080", "--workers", "1", "httpbin:app"],
    }  # fmt: skip
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}},
                              "spec": {"containers": [container]}}},
    }  # fmt: skip
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"},
        "spec": {"selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }  # fmt: skip
    apps = kubernetes.client.AppsV1Api()
    apps.create_namespaced_deployment(namespace, deployment)
    kubernetes.client.CoreV1Api().create_namespaced_service(namespace, service)
    deadline = time.monotonic() + 120
    while (apps.read_namespaced_deployment("api", namespace).status.ready_replicas or 0) < 1:
        if time.monotonic() > deadline:
            sys.exit("the user's httpbin never got Ready")
        time.sleep(0.5)


def experiment(name: str) -> dict[str, Any]:
    named = [
        {"name": f"sync-{w}",
         "args": ["--bind", "0.0.0.0:8080", "--workers", str(w), "httpbin:app"]}
        for w in range(1, VARIANTS + 1)
    ]  # fmt: skip
    return {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": name},
        "spec": {
            "service": {"deployment": "api", "variants": {"named": named}},
            "workload": {"type": "http", "tasks": 20,
                         "target": {"service": {"name": "api", "port": 80, "path": "/get"}}},
            "models": [{"model": "asyncio", "workers": [4]}],
            "resources": {"cpu": 0.25}, "pinning": "preferred", "calibration": False,
        },
    }  # fmt: skip


def watch(
    seen: dict[int, CopySeen], namespace: str, name: str, done: threading.Event
) -> list[threading.Thread]:
    """The four watches, each filling `seen` by variant until `done`."""
    core, apps = kubernetes.client.CoreV1Api(), kubernetes.client.AppsV1Api()
    discovery = kubernetes.client.DiscoveryV1Api()

    trials_added: set[str] = set()

    def copy_of(labels: dict[str, str] | None) -> CopySeen | None:
        variant = (labels or {}).get(VARIANT_LABEL)
        return seen.setdefault(int(variant), CopySeen()) if variant else None

    def deployments() -> None:
        for event in events(apps.list_namespaced_deployment, namespace, seconds=WATCH_SECONDS,
                            label_selector=COPY):  # fmt: skip
            at, body = time.time(), event["object"]
            if (entry := copy_of(body.metadata.labels)) is not None:
                entry.created = entry.created or at
                if body.metadata.deletion_timestamp or event["type"] == "DELETED":
                    entry.deleting = entry.deleting or at
            if done.is_set():
                return

    def pods() -> None:
        for event in events(core.list_namespaced_pod, namespace, seconds=WATCH_SECONDS,
                            label_selector=f"cxlab.dev/experiment={name}"):  # fmt: skip
            at, pod = time.time(), event["object"]
            labels, key = pod.metadata.labels or {}, pod.metadata.name
            if (entry := copy_of(labels)) is not None:
                entry.pods_added.setdefault(key, at)
                ready = any(c.type == "Ready" and c.status == "True"
                            for c in pod.status.conditions or [])  # fmt: skip
                if ready:
                    entry.pods_ready.setdefault(key, at)
                if event["type"] == "DELETED":
                    entry.pods_gone.setdefault(key, at)
            elif (trial := labels.get("cxlab.dev/trial")) and "-sv" in trial:
                variant = int(trial.split("-sv", 1)[1].split("-", 1)[0])
                entry = seen.setdefault(variant, CopySeen())
                if event["type"] == "ADDED" and key not in trials_added:
                    trials_added.add(key)
                    entry.trial_added.append(at)
            if done.is_set():
                return

    def slices() -> None:
        for event in events(discovery.list_namespaced_endpoint_slice, namespace,
                            seconds=WATCH_SECONDS, label_selector=COPY):  # fmt: skip
            at, body = time.time(), event["object"]
            entry = copy_of(body.metadata.labels)
            ready = [e for e in body.endpoints or [] if e.conditions and e.conditions.ready]
            if entry is not None and ready and len(ready) >= len(entry.pods_added):
                entry.listed = entry.listed or at
            if done.is_set():
                return

    return [threading.Thread(target=t, daemon=True) for t in (deployments, pods, slices)]


Rows = dict[str, list[float | None]]


def rows_of(seen: dict[int, CopySeen], applied: float, status: dict[str, Any]) -> Rows:
    """The figures by row, a column per variant."""
    reported = {v["index"]: v for v in status.get("serviceVariants") or []}
    rows: Rows = {}
    previous_gone = applied

    def add(row: str, value: float | None) -> None:
        rows.setdefault(row, []).append(value)

    for index in sorted(seen):
        copy = seen[index]
        ready = max(copy.pods_ready.values(), default=None)
        gone = max(copy.pods_gone.values(), default=None)
        first_trial = min(copy.trial_added, default=None)
        # the tasks' end as the runner's Result says (its clock is this machine's): the
        # operator acts on the runner's final read, before the kubelet says the Pod ended
        ends = [
            t["result"]["startedAtUnixSeconds"] + t["result"]["wallSeconds"]
            for t in status["trials"]
            if f"-sv{index}-" in t["name"] and t.get("result")
        ]
        last_ended = max(ends, default=None)
        operator = [
            _gap(previous_gone, copy.created),
            _gap(copy.listed, first_trial),
            _gap(last_ended, copy.deleting),
        ]
        add("operator: previous copy gone -> copy created", operator[0])
        add("operator: endpoints listed -> first trial Pod", operator[1])
        add("operator: last trial ended -> deletion began", operator[2])
        add("operator added, in all", sum(operator) if None not in operator else None)
        pods_added = min(copy.pods_added.values(), default=None)
        add("k8s: copy created -> its Pods created", _gap(copy.created, pods_added))
        add("k8s: Pods created -> every one Ready", _gap(pods_added, ready))
        add("k8s: every Pod Ready -> endpoints listed", _gap(ready, copy.listed))
        add("k8s: deletion began -> last Pod gone", _gap(copy.deleting, gone))
        add("status: readySeconds", (reported.get(index) or {}).get("readySeconds"))
        add("status: deletedSeconds", (reported.get(index) or {}).get("deletedSeconds"))
        previous_gone = gone or previous_gone
    return rows


def _gap(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


def run(until: Callable[[dict[str, Any]], bool]) -> None:
    kubernetes.config.load_kube_config(config_file=str(KUBECONFIG))
    core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
    namespace = f"cxlab-bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    log = open(ROOT / "build" / "cluster" / "logs" / "operator-bench.log", "ab")  # noqa: SIM115
    operator = subprocess.Popen(
        [sys.executable, "-m", "cxlab.cli", "operator", "--health-port", "0",
         "--metrics-port", str(free_port()), "--namespace", "cxlab-bench-*"],
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        user_objects(namespace)
        time.sleep(3)  # the operator's start-up is not what is measured
        seen: dict[int, CopySeen] = {}
        done = threading.Event()
        threads = watch(seen, namespace, "bench", done)
        for thread in threads:
            thread.start()
        time.sleep(1)
        applied = time.time()
        custom.create_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments", experiment("bench")
        )
        deadline = time.monotonic() + WATCH_SECONDS
        while True:
            body: dict[str, Any] = custom.get_namespaced_custom_object(
                "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments", "bench"
            )
            if until(body):
                break
            if time.monotonic() > deadline:
                sys.exit(f"the experiment did not finish: {body.get('status')}")
            time.sleep(0.5)
        time.sleep(2)  # the last copy's deletion, seen by the watches
        done.set()
        found = Kube().get_experiment(namespace, "bench", full=True)  # the Results too
        assert found is not None
        print_rows(rows_of(seen, applied, found["status"]), body["status"]["phase"])
    finally:
        remove_namespace(core, custom, namespace, seconds=60)
        operator.terminate()
        operator.wait(timeout=30)


def print_rows(rows: Rows, phase: str) -> None:
    count = max(len(v) for v in rows.values())
    print(
        f"spec.service on the local cluster: {count} variants of httpbin (gunicorn sync "
        f"1..{count} workers), one trial of 20 requests each; the experiment {phase}"
    )
    heads = "".join(f"{f'variant {i}':>12}" for i in range(1, count + 1))
    print(f"{'':<46}{heads}{'median':>10}")
    for row, values in rows.items():
        cells = "".join(f"{'-' if v is None else f'{v:.2f} s':>12}" for v in values)
        present = [v for v in values if v is not None]
        middle = f"{statistics.median(present):.2f} s" if present else "-"
        print(f"{row:<46}{cells}{middle:>10}")
    print("goal: 'operator added, in all' at most 1 s per variant")


def main() -> None:
    run(lambda body: (body.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


if __name__ == "__main__":
    main()
