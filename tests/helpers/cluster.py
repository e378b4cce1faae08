"""The pieces the operator tests drive: the operator process and a namespace to work in."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from cxlab.controller.kube import Kube
from cxlab.crd import GROUP, PLURAL, SCHEDULE_PLURAL, VERSION

ROOT = Path(__file__).resolve().parents[2]
KUBECONFIG = ROOT / "build" / "cluster" / "kubeconfig"
LOGS = ROOT / "build" / "cluster" / "logs"
SLEEP = {"type": "sleep", "tasks": 20, "rtt": "20ms"}
# Trials in the node's shared CPU pool: for tests of what the operator does, not of pinning.
# The local node has one allocatable core, which every whole-CPU trial of every test running
# beside waits for (the cluster phase's long pole).
SHARED_POOL = {"resources": {"cpu": 0.25}, "pinning": "preferred"}
# Cluster tests run side by side in pytest-xdist workers (make test): each worker has its own
# operator, serving only its own namespaces, with metrics on a port of its own.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ...; "" when not under xdist
NAMESPACE_PREFIX = f"cxlab-test-{WORKER}-" if WORKER else "cxlab-test-"
_INDEX = int(WORKER.removeprefix("gw") or 0)
# Prometheus (hack/prometheus.sh) scrapes the operator on 18081: the first worker's, or the
# only one's (18082 and 18083 are Kueue's)
OPERATOR_METRICS_PORT = 18081 if _INDEX == 0 else 18100 + _INDEX
# Side by side, the workers' trial Pods take turns on the node's one pinned core: a state a
# test waits for comes as surely, but later. Its waits get longer, never its assertions.
TIMEOUT_SCALE = 3.0 if WORKER else 1.0


@contextmanager
def crd_lock() -> Iterator[None]:
    """Held while a test creates or replaces a CRD: the pytest-xdist workers share the cluster,
    and a create after another's check fails (AlreadyExists, or Helm's ownership check)."""
    path = ROOT / "build" / "cluster" / "crd.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def why(experiment: dict[str, Any]) -> str:
    """An experiment's status in full where an assertion on it fails: its phase, conditions
    and every trial that did not succeed, with their messages (a dict's repr is cut short)."""
    status = experiment.get("status") or {}
    lines = [f"phase {status.get('phase')}: {status.get('message', '')}"]
    for c in status.get("conditions") or []:
        lines.append(f"  {c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}")
    for t in status.get("trials") or []:
        if t.get("phase") != "Succeeded":
            lines.append(f"  trial {t.get('name')} {t.get('phase')}: {t.get('message')}")
    return "\n".join(lines)


def experiment_spec(
    models: list[dict[str, Any]], workload: dict[str, Any] | None = None, **more: Any
) -> dict[str, Any]:
    return {"workload": workload or SLEEP, "models": models, **more}


class Operator:
    """`cxlab operator` as a child process, with its log in build/cluster/logs."""

    def __init__(
        self,
        args: tuple[str, ...] = (),
        log: str = "operator-test",
        metrics_port: int = 0,
        namespaces: str = NAMESPACE_PREFIX + "*",
    ) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.args, self.log = args, log
        self.metrics_port = metrics_port or OPERATOR_METRICS_PORT
        self.namespaces = namespaces

    def start(self) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        name = f"{self.log}-{WORKER}" if WORKER else self.log  # one log per worker's operator
        log = open(LOGS / f"{name}.log", "ab")  # noqa: SIM115 - lives with the process
        command = [sys.executable, "-m", "cxlab.cli", "operator", "--health-port", "0"]
        # Only the tests' namespaces (this worker's): an operator installed by the chart test,
        # another worker's or another run's, must not act on the same experiments.
        command += ["--namespace", self.namespaces]
        command += ["--metrics-port", str(self.metrics_port), *self.args]
        settings = {
            "CXLAB_UNSCHEDULABLE_GRACE": "8s",
            "CXLAB_IMAGE_PULL_GRACE": "6s",
            # Passes come from changes and from the deadlines a pass names; the safety
            # timer must never be what makes a test pass.
            "CXLAB_RECONCILE_INTERVAL": "1h",
            # Short, so a test trial of a few seconds has its task count read while it runs.
            "CXLAB_PROGRESS_INTERVAL": "2s",
            # Long enough for 8 Pods to start on a busy 2-core machine, short for a test
            # whose Pod can never be ready.
            "CXLAB_BARRIER_TIMEOUT": "40s",
        }
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(KUBECONFIG), **settings},
        )

    def kill(self) -> None:
        """SIGKILL: no chance to tidy up, as in a crash or an OOM kill."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


class Lab:
    """One namespace per test, with helpers to apply experiments and wait on them."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.custom = kubernetes.client.CustomObjectsApi()
        self.core = kubernetes.client.CoreV1Api()

    def apply(self, name: str, spec: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ConcurrencyExperiment",
            "metadata": {"name": name},
            "spec": spec,
        }
        kwargs = {"dry_run": "All"} if dry_run else {}
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, body, **kwargs
        )
        return created

    def get(self, name: str) -> dict[str, Any]:
        """The experiment with its full trial entries (Results from its ConfigMaps), as
        `cxlab report cx/NAME` reads it; a 404 raises."""
        found = Kube().get_experiment(self.namespace, name, full=True)
        if found is None:
            raise ApiException(status=404, reason=f"no experiment {name}")
        return found

    def stored(self, name: str) -> dict[str, Any]:
        """The experiment as the apiserver holds it (compact trial entries)."""
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name
        )
        return found

    def wait(
        self, name: str, until: Callable[[dict[str, Any]], bool], timeout: float = 180
    ) -> dict[str, Any]:
        timeout *= TIMEOUT_SCALE
        deadline = time.monotonic() + timeout
        while True:
            try:
                experiment = self.get(name)
            except ApiException as error:
                if error.status != 404:
                    raise
                experiment = {}
            if until(experiment):
                return experiment
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{name} did not get there in {timeout} s: {experiment.get('status')}"
                )
            time.sleep(0.5)

    def wait_finished(self, name: str, timeout: float = 180) -> dict[str, Any]:
        return self.wait(
            name,
            lambda e: (e.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
            timeout,
        )

    def pods(self, name: str) -> list[Any]:
        return list(
            self.core.list_namespaced_pod(
                self.namespace, label_selector=f"cxlab.dev/experiment={name}"
            ).items
        )

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, {"spec": spec}
        )

    def phase(self, experiment: dict[str, Any]) -> str | None:
        phase: str | None = (experiment.get("status") or {}).get("phase")
        return phase

    def running_pod(self, name: str) -> bool:
        return any(p.status.phase == "Running" for p in self.pods(name))

    # ExperimentSchedules: the same, for the other kind.
    def apply_schedule(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ExperimentSchedule",
                "metadata": {"name": name}, "spec": spec}  # fmt: skip
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, SCHEDULE_PLURAL, body
        )
        return created

    def get_schedule(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, SCHEDULE_PLURAL, name
        )
        return found

    def wait_schedule(
        self, name: str, until: Callable[[dict[str, Any]], bool], timeout: float = 180
    ) -> dict[str, Any]:
        timeout *= TIMEOUT_SCALE
        deadline = time.monotonic() + timeout
        while True:
            schedule = self.get_schedule(name)
            if until(schedule):
                return schedule
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{name} did not get there in {timeout} s: {schedule.get('status')}"
                )
            time.sleep(0.5)

    def patch_schedule_spec(self, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, SCHEDULE_PLURAL, name, {"spec": spec}
        )

    def runs(self, schedule: str) -> list[dict[str, Any]]:
        """The experiments a schedule owns, by name."""
        found = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, label_selector=f"{GROUP}/schedule={schedule}"
        )["items"]
        return sorted(found, key=lambda e: e["metadata"]["name"])

    def events(
        self, name: str, *expected: str, timeout: float = 15, kind: str = "ConcurrencyExperiment"
    ) -> list[Any]:
        """The object's Events, once every `expected` reason is among them: kopf posts
        Events from a queue of its own, so one can land after the status that follows it."""
        deadline = time.monotonic() + timeout
        while True:
            found = [
                e
                for e in self.core.list_namespaced_event(self.namespace).items
                if e.involved_object.name == name and e.involved_object.kind == kind
            ]
            missing = set(expected) - {e.reason for e in found}
            if not missing or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


BUILT_KUBECTL = ROOT / "build" / "k8s" / "bin" / "kubectl"
