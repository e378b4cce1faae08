"""The operator on the real local cluster: kubectl-apply-shaped experiments become pinned
trial Pods, and every Result lands in status — through restarts, lost Pods and deletion."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import program, scrape
from helpers.cluster import (
    KUBECONFIG,
    ROOT,
    SHARED_POOL,
    SLEEP,
    Lab,
    Operator,
    experiment_spec,
    why,
)
from kubernetes.client.exceptions import ApiException

from cxlab.controller.kube import Kube
from cxlab.table import render_summary

ASYNCIO = [{"model": "asyncio"}]


def conditions(experiment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (experiment.get("status") or {}).get("conditions", [])}


def one_long_task(seconds: int) -> dict[str, Any]:
    return {"type": "sleep", "tasks": 1, "rtt": f"{seconds}s"}


@pytest.mark.long
def test_every_model_reaches_succeeded_pinned(lab: Lab, tmp_path: Path) -> None:
    python_and_go = [
        {"model": "sequential"},
        {"model": "threads", "workers": [5]},
        {"model": "processes", "workers": [2]},
        {"model": "gevent"},
        {"model": "asyncio"},
        {"model": "goroutines", "gomaxprocs": [1]},
    ]
    lab.apply("sleepers", experiment_spec(python_and_go))
    http = {"type": "http", "tasks": 20, "rtt": "20ms"}
    # syscalls asked for where they cannot be had: the runner image has no strace
    lab.apply("web", experiment_spec([{"model": "locust", "workers": [5]}], http, syscalls=True))
    # calibrated: a CPU loop and 1 ms sleeps after its one point, and where they ran
    lab.apply("calibrated", experiment_spec([{"model": "asyncio"}], calibration=True))
    for name, count in (("sleepers", 6), ("web", 1)):
        experiment = lab.wait_finished(name, timeout=240)
        status = experiment["status"]
        assert status["phase"] == "Succeeded", why(experiment)
        assert status["progress"]["display"] == f"{count}/{count}"
        assert len(status["trials"]) == count
        for entry in status["trials"]:
            result = entry["result"]
            assert result["tasksOk"] == 20 and result["trial"] == entry["name"]
            assert result["wallSeconds"] >= result["floorSeconds"]
            assert result["cpus"] == [1]  # the static CPU manager's exclusive core
            assert result["peakVmBytes"] >= result["peakRssBytes"] > 0
            if name == "web":
                assert "unavailable" in result["syscalls"], result["syscalls"]
            else:
                assert result["syscalls"] is None
        found = conditions(experiment)
        assert found["Complete"]["status"] == "True"
        assert found["Pinned"]["status"] == "True", found["Pinned"]
        assert found["Progressing"]["status"] == "False"
        assert status["best"] and status["summary"]["recommendations"]
    calibrated = lab.wait_finished("calibrated", timeout=120)
    assert calibrated["status"]["phase"] == "Succeeded", why(calibrated)
    assert [t["name"] for t in calibrated["status"]["trials"]] == [
        "000-asyncio-w0-rtt20ms-r1", "001-calcpu-sequential-w1-r1",
        "002-calsleep-sequential-w1-rtt1ms-r1",
    ]  # fmt: skip
    environment = calibrated["status"]["environment"]
    # the local cluster's one node is this machine
    assert environment["kernel"] == os.uname().release and environment["cpuModel"], environment
    assert (environment["node"], environment["cpuManagerPolicy"]) == ("vm", "static"), environment
    assert environment["runnerImage"].startswith("sha256:"), environment
    assert set(environment["calibration"]) == {"cpuLoopSeconds", "sleepSeconds"}, environment
    assert environment["calibration"]["sleepSeconds"] >= 0.001, environment
    # The report of a cluster experiment, read from its status: the local backend's plots.
    report = subprocess.run(
        [sys.executable, "-m", "cxlab.cli", "report", "cx/sleepers", "-n", lab.namespace,
         "--out", str(tmp_path / "sleepers.html")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "sleepers.html").read_text()
    assert html.count("<svg") >= 4 and "Wall time vs workers" in html
    # One Event per transition of the experiment, none per succeeded trial (status has them)
    # (Queued too when it waited: the three experiments share one node, and one created in
    # the same second with an earlier name goes first)
    reasons = sorted(e.reason for e in lab.events("sleepers", "Started", "Completed"))
    assert [r for r in reasons if r != "Queued"] == ["Completed", "Started"], reasons
    assert lab.wait("sleepers", lambda _: not lab.pods("sleepers"), timeout=30) is not None


def test_complete_means_every_result_it_points_at_is_readable_and_metrics_were_read(
    lab: Lab,
) -> None:
    # As a pipeline does: kubectl wait for the condition, then at once what `cxlab summary
    # cx/NAME` reads (the status, its trial and summary ConfigMaps). 20 experiments, each
    # waited for by its own kubectl watch, read the moment it says Complete.
    names = [f"ready-{i:02}" for i in range(20)]
    tiny = experiment_spec(
        ASYNCIO,
        {"type": "sleep", "tasks": 2, "rtt": "1ms"},
        resources={"cpu": 0.25},
        pinning="preferred",
    )  # a quarter of a core: several run at once, not one after another on the pinned core
    for name in names:
        lab.apply(name, tiny)
    kubectl = [str(ROOT / "build" / "k8s" / "bin" / "kubectl"), "-n", lab.namespace]

    def wait_then_read(name: str) -> tuple[str, dict[str, Any]]:
        subprocess.run(
            [*kubectl, "wait", "--for=condition=Complete", "--timeout=300s", f"cx/{name}"],
            check=True, capture_output=True, env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
        )  # fmt: skip
        document = Kube().get_experiment(lab.namespace, name, full=True)
        assert document is not None
        conditions = {c["type"]: c for c in document["status"]["conditions"]}
        return render_summary(document), conditions["MetricsCollected"]

    with ThreadPoolExecutor(len(names)) as pool:
        read = list(pool.map(wait_then_read, names))
    for name, (text, metrics) in zip(names, read, strict=True):
        assert f"{name}: Succeeded" in text and "No points or knees" not in text, text
        assert "Knees (fewest workers" in text, text
        # Trials of a few milliseconds, far shorter than the progress interval: each runner's
        # final /metrics was read all the same (its Pod Ready once the tasks ended).
        assert metrics["status"] == "True", metrics


BAD_INPUT = [
    (experiment_spec(ASYNCIO, {**SLEEP, "type": "disk"}), "spec.workload.type"),
    (experiment_spec([{"model": "fibers"}]), "spec.models[0].model"),
    (experiment_spec([{"model": "threads", "workers": [-1]}]), "spec.models[0].workers[0]"),
    (experiment_spec(ASYNCIO, {**SLEEP, "rtt": "20 ms"}), "spec.workload.rtt"),
    (experiment_spec([{"model": "asyncio", "gomaxprocs": [2]}]), "applies to goroutines only"),
    (experiment_spec([{"model": "locust"}]), "locust drives HTTP users"),
    (experiment_spec(ASYNCIO, repetitions=0), "spec.repetitions"),
    (experiment_spec([]), "spec.models"),
    (
        experiment_spec(
            [{"model": "threads", "workers": list(range(1, 21))}],
            {"type": "sleep", "tasks": 5, "rtts": ["1ms", "2ms", "3ms", "4ms", "5ms"]},
            repetitions=11,
        ),
        "at most 1000 trials",
    ),
]


@pytest.mark.parametrize(("spec", "field_and_rule"), BAD_INPUT)
def test_bad_input_is_rejected_at_apply(
    lab: Lab, spec: dict[str, Any], field_and_rule: str
) -> None:
    with pytest.raises(ApiException) as caught:
        lab.apply("bad", spec, dry_run=True)
    assert caught.value.status == 422
    assert field_and_rule in caught.value.body


def test_what_the_schema_cannot_catch_fails_with_a_condition(lab: Lab) -> None:
    # 3 arrivals a second for a second, split among 4 Pods: each expects 0.75. The models
    # count it; CEL cannot split a rate among the Pods of every model (a rule cxlab alone has).
    few = {"type": "sleep", "rtt": "10ms", "arrival": {"ratePerSecond": 3, "duration": "1s"}}
    lab.apply("few-arrivals", experiment_spec([{"model": "asyncio", "pods": [4]}], few))
    experiment = lab.wait_finished("few-arrivals", timeout=30)
    failed = conditions(experiment)["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "InvalidSpec"
    assert "each Pod of a trial must expect 1 to" in failed["message"]
    assert "gives each 0.75" in failed["message"]
    assert not lab.pods("few-arrivals")


@pytest.mark.long
def test_operator_killed_mid_experiment_runs_each_trial_once(lab: Lab, operator: Operator) -> None:
    workload = {"type": "sleep", "tasks": 4, "rtt": "1s"}
    # in the shared pool (SHARED_POOL): which trial runs once is what counts here, not its core
    lab.apply("restart", experiment_spec([{"model": "asyncio", "workers": [1, 2, 4]}], workload,
                                         repetitions=2, **SHARED_POOL))  # fmt: skip

    def two_done(experiment: dict[str, Any]) -> bool:
        return int((experiment.get("status") or {}).get("progress", {}).get("trialsDone", 0)) >= 2

    lab.wait("restart", two_done)
    operator.kill()
    time.sleep(3)  # a trial ends meanwhile, unobserved
    operator.start()
    status = lab.wait_finished("restart", timeout=240)["status"]
    assert status["phase"] == "Succeeded"
    names = [e["name"] for e in status["trials"]]
    assert len(names) == len(set(names)) == 6
    # Each trial ran in one Pod: one the scheduler placed (its Scheduled event). An attempt
    # may be counted without a Pod: it is written to status before its Pod is created (record,
    # then act), so a kill between the two makes the successor start attempt 2, never a
    # second run.
    placed: dict[str, set[str]] = {}
    for event in lab.core.list_namespaced_event(lab.namespace).items:
        found = re.fullmatch(r"restart-t(\d{3})-a(\d+)", event.involved_object.name or "")
        if event.reason == "Scheduled" and event.involved_object.kind == "Pod" and found:
            placed.setdefault(found[1], set()).add(found[2])
    assert sorted(placed) == [f"{i:03d}" for i in range(6)], placed
    assert all(len(attempts) == 1 for attempts in placed.values()), placed


def test_a_deleted_trial_pod_is_retried(lab: Lab) -> None:
    lab.apply("lost", experiment_spec(ASYNCIO, one_long_task(6), **SHARED_POOL))
    lab.wait("lost", lambda _: lab.running_pod("lost"), timeout=60)
    [pod] = [p for p in lab.pods("lost") if p.metadata.labels.get("cxlab.dev/trial")]
    lab.core.delete_namespaced_pod(pod.metadata.name, lab.namespace)
    [entry] = lab.wait_finished("lost", timeout=90)["status"]["trials"]
    assert entry["phase"] == "Succeeded" and entry["attempts"] == 2


def test_deleting_a_running_experiment_stops_its_pods(lab: Lab) -> None:
    lab.apply("doomed", experiment_spec(ASYNCIO, one_long_task(60), **SHARED_POOL))
    lab.wait("doomed", lambda _: lab.running_pod("doomed"), timeout=60)
    lab.delete("doomed")
    lab.wait("doomed", lambda e: not e and not lab.pods("doomed"), timeout=60)


def test_a_trial_no_node_can_hold_fails_at_once_with_the_numbers(lab: Lab) -> None:
    lab.apply("huge", experiment_spec(ASYNCIO, resources={"cpu": 64}))
    failed = conditions(lab.wait_finished("huge", timeout=60))["Failed"]
    # no grace, no waiting: it can never fit, so no Pod was made to wait Unschedulable
    assert failed["status"] == "True" and failed["reason"] == "DoesNotFit"
    assert not lab.pods("huge")
    assert "asks for 64 CPU(s) per trial" in failed["message"], failed
    assert "offers 1 allocatable" in failed["message"], failed  # core 0 is the system's
    assert not lab.pods("huge")


def test_a_trial_over_its_timeout_fails_with_the_reason(lab: Lab) -> None:
    lab.apply("slow", experiment_spec(ASYNCIO, one_long_task(60), trialTimeout="3s", **SHARED_POOL))
    [entry] = lab.wait_finished("slow", timeout=60)["status"]["trials"]
    assert entry["phase"] == "Failed" and "timed out after trialTimeout 3s" in entry["message"]
    assert "TrialFailed" in [e.reason for e in lab.events("slow", "TrialFailed")]


def test_a_spec_change_while_running_is_reported(lab: Lab) -> None:
    lab.apply("steady", experiment_spec(ASYNCIO, one_long_task(5), ttlSecondsAfterFinished=2,
                                        **SHARED_POOL))  # fmt: skip
    lab.wait("steady", lambda e: lab.phase(e) == "Running", timeout=60)
    lab.patch_spec("steady", {"repetitions": 3})
    changed = lab.wait("steady", lambda e: "SpecChanged" in conditions(e), timeout=30)
    assert conditions(changed)["SpecChanged"]["status"] == "True"
    finished = lab.wait_finished("steady", timeout=60)
    assert len(finished["status"]["trials"]) == 1  # the spec it started with
    lab.wait("steady", lambda e: not e, timeout=30)  # deleted after its TTL


def test_the_operator_serves_its_own_metrics(lab: Lab, operator: Operator) -> None:
    # longer than the harness's progress interval (2 s): its task count is read while it runs
    one_worker = [{"model": "asyncio", "workers": [1]}]  # 4 s of tasks
    lab.apply("counted", experiment_spec(one_worker, {"type": "sleep", "tasks": 4, "rtt": "1s"}))
    lab.wait_finished("counted", timeout=120)
    text = scrape(operator.metrics_port)
    lint = subprocess.run([program("promtool"), "check", "metrics"], input=text,
                          capture_output=True, text=True)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(samples['cxlab_operator_trials_finished_total{outcome="succeeded"}']) >= 1
    assert float(samples["cxlab_operator_trials_started_total"]) >= 1
    assert float(samples['cxlab_operator_experiments{phase="Succeeded"}']) >= 1
    assert float(samples['cxlab_operator_trial_scrapes_total{outcome="ok"}']) >= 1
    assert float(samples["cxlab_operator_reconcile_duration_seconds_count"]) > 0
    assert float(samples["cxlab_operator_status_writes_total"]) >= 2
    assert float(samples['cxlab_operator_api_requests_total{verb="POST"}']) >= 2  # Pods, Events
    assert float(samples['cxlab_operator_api_requests_total{verb="PATCH"}']) >= 2  # status
    assert float(samples["cxlab_operator_leader"]) == 1
