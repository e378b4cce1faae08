"""Load against the user's own service on the real cluster (workload.target), as
manifests/examples/target-service/ shows it: a Service of the project's own HTTP server
(cxlab-delay from the runner image, demanding a header whose value only a Secret holds) called
by 2 models x 2 worker counts, the Secret's value found nowhere the
operator writes or shows; and a refusing, a slow and a failing target, each ending its trial
with its kind of failure."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from typing import Any

import yaml
from helpers.cluster import KUBECONFIG, LOGS, ROOT, TIMEOUT_SCALE, Lab, experiment_spec, why

KUBECTL = str(ROOT / "build" / "k8s" / "bin" / "kubectl")
HEADER = "X-Api-Key"


EXAMPLE = ROOT / "manifests" / "examples" / "target-service"


def _server(lab: Lab, token: str) -> None:
    """The example's server (its Secret holding `token`, the Deployment answering only
    requests that carry it, its Service) and a Service with no Pod behind it (connections
    refused). Returns once the server is ready."""
    documents = list(yaml.safe_load_all((EXAMPLE / "server.yaml").read_text()))
    for document in documents:
        if document["kind"] == "Secret":
            document["stringData"] = {"key": token}
        if document["kind"] == "Deployment":  # the image the local cluster imported
            document["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    nobody = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nobody"},
              "spec": {"selector": {"app": "nobody"}, "ports": [{"port": 80}]}}  # fmt: skip
    _kubectl(lab, "apply", "-f", "-", stdin=yaml.safe_dump_all([*documents, nobody]))
    _kubectl(lab, "rollout", "status", "deployment/api", f"--timeout={int(120 * TIMEOUT_SCALE)}s")


def _target(path: str, **more: Any) -> dict[str, Any]:
    secret = {"secretKeyRef": {"name": "api-key", "key": "key"}}
    return {
        "service": {"name": "api", "port": 80, "path": path},
        "headers": [{"name": HEADER, "valueFrom": secret}, {"name": "Accept", "value": "*/*"}],
        **more,
    }


def _kubectl(lab: Lab, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        [KUBECTL, "-n", lab.namespace, *args], capture_output=True, text=True, check=True,
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)}, input=stdin,
    ).stdout  # fmt: skip


def test_a_service_target_with_a_secret_header(lab: Lab) -> None:
    token = secrets.token_hex(16)
    _server(lab, token)
    example = yaml.safe_load((EXAMPLE / "experiment.yaml").read_text())
    # the shared pool, not a core of its own: pinning is not what this shows, and the node's
    # one allocatable core is the cluster tests' scarcest resource
    example["spec"]["resources"] = {"cpu": 0.25}
    lab.apply("svc", example["spec"])
    # The trial Pods, read while they run: the value comes from the Secret through the kubelet
    pods_seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 240 * TIMEOUT_SCALE
    experiment = lab.get("svc")
    while time.monotonic() < deadline and lab.phase(experiment) not in ("Succeeded", "Failed"):
        listed = json.loads(_kubectl(lab, "get", "pods", "-l", "cxlab.dev/experiment=svc",
                                     "-o", "json"))["items"]  # fmt: skip
        pods_seen += [p for p in listed if p["metadata"]["name"] not in
                      {q["metadata"]["name"] for q in pods_seen}]  # fmt: skip
        time.sleep(0.5)
        experiment = lab.get("svc")
    assert lab.phase(experiment) == "Succeeded", why(experiment)
    trials = experiment["status"]["trials"]
    assert len(trials) == 4
    for trial in trials:
        result = trial["result"]
        assert result["tasksOk"] == 20 and result["tasksFailed"] == 0, (trial, result["errors"])
        # the service's latency (5 ms and the way there), no simulated RTT
        assert result["rttSeconds"] in (None, 0), trial
        assert 0.005 <= result["latencySeconds"]["p50"] < 1.0, trial
    assert pods_seen, "no trial Pod was seen while the experiment ran"
    for pod in pods_seen:
        runner = pod["spec"]["containers"][0]
        assert f"{HEADER}=CXLAB_HEADER_0" in runner["command"]
        assert runner["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "api-key", "key": "key"}
        labels = pod["metadata"]["labels"]
        assert labels["cxlab.dev/target-service"] == "api"
        assert labels["cxlab.dev/target-namespace"] == lab.namespace
    # the value is nowhere the operator writes, or shows, or a user reads
    logs = "".join(p.read_text(errors="replace") for p in LOGS.glob("operator*.log"))
    shown = {
        "the experiment": _kubectl(lab, "get", "cx", "svc", "-o", "yaml"),
        "its events": _kubectl(lab, "get", "events", "-o", "yaml"),
        "its ConfigMaps": _kubectl(lab, "get", "configmaps", "-o", "yaml"),
        "the trial Pods": json.dumps(pods_seen),
        "the operator's logs": logs,
    }  # fmt: skip
    for where, text in shown.items():
        assert token not in text, f"the Secret's value is in {where}"
    assert "CXLAB_HEADER_0" in shown["the trial Pods"]  # the check reads what it means to


def test_each_kind_of_failure_ends_its_trial_naming_it(lab: Lab) -> None:
    _server(lab, "k")
    cases = {
        # a Service without a Pod: kube-proxy refuses its connections
        "refused": ({"service": {"name": "nobody", "port": 80}}, "connect"),
        "slow": (_target("/?rtt=5s", timeout="300ms"), "timeout"),
        "failing": (_target("/?status=500"), "status"),
    }
    for name, (target, _) in cases.items():
        lab.apply(name, experiment_spec(
            [{"model": "goroutines" if name == "slow" else "asyncio", "workers": [2]}],
            {"type": "http", "tasks": 4, "target": target}, pinning="preferred",
            resources={"cpu": 0.25},
        ))  # fmt: skip
    for name, (_, kind) in cases.items():
        experiment = lab.wait_finished(name, timeout=180 * TIMEOUT_SCALE)
        [trial] = experiment["status"]["trials"]
        assert trial["phase"] == "Failed", why(experiment)
        message = trial["message"]
        assert f"4 of 4 requests failed (100%: {kind} 4)" in message, message
        assert "workload.target.maxFailureRatio 0.5" in message, message
        assert trial["result"]["failureKinds"][kind] == 4, trial
