"""isolation: process on the real local cluster: trials run as fresh processes in a trial
host Pod on the trial's pinned core, each recorded once, the host gone at the end; a lost
host is a lost attempt; a kill -9 of the operator loses and repeats nothing."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from helpers.cluster import SHARED_POOL, Lab, Operator, experiment_spec, why
from helpers.specs import document

from cxlab.config import OperatorConfig
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pods import build_host_pod, build_trial_pod
from cxlab.experiments.resource import parse_experiment
from cxlab_contract import HOST_TOKEN_ENV

HOST_PORT = OperatorConfig().host_port


def hosts(lab: Lab, name: str) -> list[Any]:
    return [
        p
        for p in lab.pods(name)
        if (p.metadata.labels or {}).get("app.kubernetes.io/component") == "trial-host"
    ]


def ask(host: Any, query: str = "", timeout: float = 2) -> Any:
    """GET /trials of a host Pod, with its token as the operator shows it (read from the
    Pod's spec, as the operator reads it): without it the host answers 401."""
    token = next(e.value for c in host.spec.containers for e in c.env or []
                 if e.name == HOST_TOKEN_ENV)  # fmt: skip
    request = urllib.request.Request(
        f"http://{host.status.pod_ip}:{HOST_PORT}/trials{query}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.load(reply)


class Runs:
    """Every trial a host was seen running (its Pod name: trial and attempt), from the hosts'
    own long poll of GET /trials while the experiment runs: every change answers it, and a
    trial stays in the list from its start until the operator lets it go, after its record."""

    def __init__(self, lab: Lab, name: str) -> None:
        self.lab, self.name = lab, name
        self.started: set[str] = set()
        self.stop = threading.Event()
        self.watched: set[str] = set()
        self.thread = threading.Thread(target=self._find_hosts, daemon=True)
        self.thread.start()

    def _find_hosts(self) -> None:
        while not self.stop.is_set():
            for pod in hosts(self.lab, self.name):
                ip = pod.status.pod_ip
                if ip and ip not in self.watched:
                    self.watched.add(ip)
                    threading.Thread(target=self._poll, args=(pod,), daemon=True).start()
            self.stop.wait(0.2)

    def _poll(self, host: Any) -> None:
        version = None
        failures = 0
        while not self.stop.is_set() and failures < 50:
            query = "" if version is None else f"?version={version}&wait=2"
            try:
                answer = ask(host, query, timeout=10)
            except OSError:
                failures += 1
                self.stop.wait(0.05)
                continue
            version = answer["version"]
            for item in answer["items"]:
                statuses = item["status"].get("containerStatuses") or []
                if any("running" in s["state"] or "terminated" in s["state"]
                       for s in statuses):  # fmt: skip
                    self.started.add(item["metadata"]["name"])

    def done(self) -> set[str]:
        self.stop.set()
        self.thread.join()
        return self.started


def test_trials_run_as_processes_in_one_pinned_host_each_once(lab: Lab) -> None:
    spec = experiment_spec(
        [{"model": "asyncio", "workers": [1, 5]}, {"model": "goroutines"}],
        {"type": "sleep", "tasks": 20, "rtt": "20ms"},
        isolation="process",
    )  # fmt: skip
    lab.apply("hosted", spec)
    runs = Runs(lab, "hosted")
    experiment = lab.wait_finished("hosted", timeout=120)
    started = runs.done()
    status = experiment["status"]
    assert status["phase"] == "Succeeded", why(experiment)
    assert len(status["trials"]) == 3
    for entry in status["trials"]:
        result = entry["result"]
        assert result["tasksOk"] == 20 and result["trial"] == entry["name"]
        assert result["cpus"] == [1]  # the host's exclusive core, the static CPU manager's
        assert entry["attempts"] == 1
    assert len(started) == 3, started  # each ran once
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["MetricsCollected"]["status"] == "True", conditions["MetricsCollected"]
    assert conditions["Pinned"]["status"] == "True", conditions["Pinned"]
    # one Pod was ever made: the host (no trial Pod), and it goes once the trials are done
    scheduled = {
        e.involved_object.name
        for e in lab.core.list_namespaced_event(lab.namespace).items
        if e.reason == "Scheduled" and e.involved_object.kind == "Pod"
    }
    assert scheduled == {"hosted-host0"}, scheduled
    assert lab.wait("hosted", lambda _: not lab.pods("hosted"), timeout=30) is not None


def test_a_lost_host_is_a_lost_attempt(lab: Lab) -> None:
    long_task = {"type": "sleep", "tasks": 1, "rtt": "6s"}
    lab.apply("lost-host", experiment_spec([{"model": "asyncio"}], long_task,
                                           isolation="process", **SHARED_POOL))  # fmt: skip

    def running(_: Any) -> bool:
        found = [p for p in hosts(lab, "lost-host") if p.status.pod_ip]
        if not found:
            return False
        try:
            return bool(ask(found[0])["items"])
        except OSError:
            return False

    lab.wait("lost-host", running, timeout=60)
    [host] = hosts(lab, "lost-host")
    lab.core.delete_namespaced_pod(host.metadata.name, lab.namespace)
    experiment = lab.wait_finished("lost-host", timeout=90)
    [entry] = experiment["status"]["trials"]
    assert entry["phase"] == "Succeeded" and entry["attempts"] == 2, why(experiment)
    assert host.metadata.name not in {p.metadata.name for p in lab.pods("lost-host")}


@pytest.mark.long
def test_operator_killed_mid_experiment_with_hosts_runs_each_trial_once(
    lab: Lab, operator: Operator
) -> None:
    workload = {"type": "sleep", "tasks": 4, "rtt": "500ms"}
    lab.apply("restart-hosted", experiment_spec(
        [{"model": "asyncio", "workers": [1, 2, 4]}], workload, repetitions=2,
        isolation="process", parallelism=2, **SHARED_POOL,
    ))  # fmt: skip
    runs = Runs(lab, "restart-hosted")

    def two_done(experiment: dict[str, Any]) -> bool:
        return int((experiment.get("status") or {}).get("progress", {}).get("trialsDone", 0)) >= 2

    lab.wait("restart-hosted", two_done)
    operator.kill()
    time.sleep(3)  # a trial ends meanwhile, unobserved: its host keeps it
    operator.start()
    experiment = lab.wait_finished("restart-hosted", timeout=240)
    started = runs.done()
    status = experiment["status"]
    assert status["phase"] == "Succeeded", why(experiment)
    names = [e["name"] for e in status["trials"]]
    assert len(names) == len(set(names)) == 6
    # each trial ran once: one attempt of it started on a host (an attempt may be counted
    # and never posted, if the kill came between the status write and the POST)
    by_trial: dict[str, set[str]] = {}
    for pod_name in started:
        trial, _, attempt = pod_name.rpartition("-a")
        by_trial.setdefault(trial, set()).add(attempt)
    assert len(by_trial) == 6 and all(len(a) == 1 for a in by_trial.values()), by_trial


def _bare(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    """A Pod of the operator's making, made the test's own: no experiment owns or names it."""
    metadata = manifest["metadata"]
    metadata["name"] = name
    metadata.pop("ownerReferences", None)
    metadata["labels"] = {"cxlab-test": "termination-message"}
    return manifest


@pytest.mark.parametrize("argv", [["cxlab-runner-go", "--bogus"],
                                  ["python3", "-m", "cxlab_runner", "--bogus"]])  # fmt: skip
def test_a_hosted_trials_termination_message_is_the_kubelets(lab: Lab, argv: list[str]) -> None:
    """A trial that fails without a Result ends, in a trial host, with the termination
    message the kubelet gives the same command in a Pod of its own (FallbackToLogsOnError:
    the log's last 80 lines, at most 2048 bytes; the Go runner's usage is 81 lines, 3.6 kB),
    and the same exit code and reason."""
    spec = parse_experiment(document(models=[{"model": "asyncio"}], **SHARED_POOL)).spec
    trial = plan_trials(spec)[0]
    config = OperatorConfig()
    made = {"experiment": "tm", "namespace": lab.namespace, "uid": "u", "spec": spec,
            "config": config}  # fmt: skip
    kubelet = _bare(build_trial_pod(**made, trial=trial, attempt=1), f"kubelet-{argv[0]}")
    kubelet["spec"]["containers"][0] |= {"command": argv, "args": []}
    host = _bare(build_host_pod(**made, index=0, token="t0ken"), f"host-{argv[0]}")
    shown = {"Authorization": "Bearer t0ken"}  # as the operator shows it (or 401)
    for pod in (kubelet, host):
        lab.core.create_namespaced_pod(lab.namespace, pod)
    hosted = _bare(build_trial_pod(**made, trial=trial, attempt=1, hosted=True), "hosted")
    hosted["spec"]["containers"][0] |= {"command": argv, "args": []}

    def terminated(read: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            pod = read()
            for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
                if "terminated" in (status.get("state") or {}):
                    return dict(status["state"]["terminated"])
            time.sleep(0.2)
        raise AssertionError(f"never terminated: {pod}")

    def read_kubelet() -> dict[str, Any]:
        return lab.core.api_client.sanitize_for_serialization(
            lab.core.read_namespaced_pod(kubelet["metadata"]["name"], lab.namespace)
        )

    def read_host() -> dict[str, Any] | None:
        ip = lab.core.read_namespaced_pod(host["metadata"]["name"], lab.namespace).status.pod_ip
        if not ip:
            return None
        url = f"http://{ip}:{HOST_PORT}/trials"
        try:
            if not getattr(read_host, "posted", False):
                body = json.dumps(hosted).encode()
                headers = {"Content-Type": "application/json", **shown}
                with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10):
                    read_host.posted = True  # type: ignore[attr-defined]
            read = urllib.request.Request(f"{url}/hosted", headers=shown)
            with urllib.request.urlopen(read, timeout=10) as reply:
                found: dict[str, Any] = json.load(reply)
                return found
        except OSError:
            return None  # not serving yet

    by_kubelet, by_host = terminated(read_kubelet), terminated(read_host)
    assert by_kubelet["exitCode"] == by_host["exitCode"] == 2, (by_kubelet, by_host)
    assert by_kubelet["reason"] == by_host["reason"] == "Error"
    assert by_kubelet["message"] and by_host["message"] == by_kubelet["message"]
