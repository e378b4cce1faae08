"""A real Prometheus (hack/prometheus.sh) next to the real cluster: it finds the trial Pods,
stores the runners' series with experiment and trial labels and the operator's objective
verdicts, every dashboard panel's PromQL answers from it, and the operator adds cAdvisor's
view of each trial to its status entry."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import kubernetes
import pytest
import yaml
from helpers.cluster import (
    NAMESPACE_PREFIX,
    OPERATOR_METRICS_PORT,
    ROOT,
    Lab,
    Operator,
    experiment_spec,
    why,
)

# Prometheus scrapes this worker's operator only (its port, given to hack/prometheus.sh): beside
# the KWOK module (paired), not beside tests whose trials share the node's core.
pytestmark = [pytest.mark.cluster, pytest.mark.solo(tool="prometheus"), pytest.mark.paired]

PROMETHEUS = ROOT / "hack" / "prometheus.sh"
URL = "http://127.0.0.1:19090"
DASHBOARDS = ROOT / "dashboards"
MODELS = [
    {"model": "asyncio", "workers": [2, 5]},
    {"model": "threads", "workers": [5]},
    {"model": "goroutines", "workers": [0]},
]
# One RTT: each trial lingers for Prometheus' discovery, so every trial costs 10 s more.
WORKLOAD = {"type": "sleep", "tasks": 10, "rtts": ["100ms"]}
# One the sweep meets (no sleep fails): the operator's objective gauges, which the experiment
# overview's Objectives panel reads, then hold a verdict for it.
OBJECTIVES = [{"name": "no-failures", "failureRatio": {"max": 0}}]
TRIALS = 4
# Prometheus applies discovered targets in batches every 5 s (discovery, then the scrape
# manager): a runner must outlive that to be scraped at all, whatever the scrape interval.
LINGER = "10s"
RUNNER_SERIES = [
    "cxlab_trial_info",
    "cxlab_tasks_completed_total",
    "cxlab_task_duration_seconds_bucket",
    "cxlab_cpu_user_seconds_total",
    "cxlab_cpu_system_seconds_total",
    "cxlab_rss_bytes",
    "cxlab_peak_rss_bytes",
    "cxlab_trial_elapsed_seconds",
    "cxlab_trial_finished",
]
# $__rate_interval as Grafana would set it here: at least 4 x the slowest scrape interval
# the panels read (the operator's, 5 s).
RATE_INTERVAL = "20s"


def ask(path: str, **parameters: Any) -> Any:
    query = urllib.parse.urlencode(parameters)
    with urllib.request.urlopen(f"{URL}/api/v1/{path}?{query}", timeout=10) as reply:
        body = json.load(reply)
    assert body["status"] == "success", body
    return body["data"]


def instant(promql: str, at: float) -> list[dict[str, Any]]:
    return list(ask("query", query=promql, time=f"{at:.3f}")["result"])


@pytest.fixture(scope="module")
def prometheus(cluster: None) -> Iterator[str]:
    was_running = subprocess.run([PROMETHEUS, "status"], capture_output=True).returncode == 0
    # It scrapes the operator of this pytest-xdist worker (tests/helpers/cluster.py's port):
    # the solo phase runs this module in either of its two workers.
    env = {**os.environ, "OPERATOR_METRICS_PORT": str(OPERATOR_METRICS_PORT)}
    subprocess.run([PROMETHEUS, "start"], check=True, timeout=1200, env=env)
    yield URL
    if not was_running:
        subprocess.run([PROMETHEUS, "stop"], check=True, timeout=60)


@pytest.fixture(scope="module")
def operator_with_prometheus(operator: Operator, prometheus: str) -> Iterator[Operator]:
    """The session's operator, restarted for this module only with CXLAB_PROMETHEUS_URL and
    runners that linger long enough for Prometheus' discovery; as it was afterwards."""
    popen = subprocess.Popen

    def with_settings(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
        settings = {"CXLAB_PROMETHEUS_URL": prometheus, "CXLAB_RUNNER_LINGER": LINGER}
        return popen(command, **{**options, "env": {**options["env"], **settings}})

    operator.stop()
    with mock.patch("helpers.cluster.subprocess.Popen", with_settings):
        operator.start()
    yield operator
    operator.stop()
    operator.start()


@dataclass(frozen=True)
class Drifting:
    lab: Lab
    name: str
    slowed: concurrent.futures.Future[None]  # done once one slow run started, then suspended


DRIFT_RTT = "100ms"


@pytest.fixture(scope="module")
def drifting(operator_with_prometheus: Operator) -> Iterator[Drifting]:
    """A schedule of one small point every 10 s, from the module's start: its baseline runs
    pile up while the other tests run, for the regression alert's test at the end."""
    namespace = f"{NAMESPACE_PREFIX}obs-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": namespace}})
    lab = Lab(namespace)
    # Not calibrated: every trial here lingers 10 s for Prometheus, and two calibration
    # trials would make a run of 40 s (test_operator's calibrated run proves the calibration).
    template = experiment_spec(
        [{"model": "asyncio"}], {"type": "sleep", "tasks": 10, "rtt": DRIFT_RTT},
        calibration=False,
    )  # fmt: skip
    lab.apply_schedule("drift", {"schedule": "@every 10s", "concurrencyPolicy": "Forbid",
                                 "experimentTemplate": {"spec": template}})  # fmt: skip
    # Beside the module's other tests: the slowing, which takes a minute of runs
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        yield Drifting(lab, "drift", pool.submit(_slow_down, lab, "drift"))
    core.delete_namespace(namespace)


def _history(schedule: dict[str, Any]) -> list[dict[str, Any]]:
    return list((schedule.get("status") or {}).get("history") or [])


def _slow_down(lab: Lab, name: str) -> None:
    """Three succeeded runs (the slow one's baseline has two degrees of freedom), then the
    template slowed on purpose (100 -> 500 ms), one slow run and no more: suspended as soon as
    it started (Forbid: nothing runs beside it)."""
    lab.wait_schedule(name, lambda s: sum(e["phase"] == "Succeeded" for e in _history(s)) >= 3,
                      timeout=180)  # fmt: skip
    template = lab.get_schedule(name)["spec"]["experimentTemplate"]
    template["spec"]["workload"]["rtt"] = "500ms"
    lab.patch_schedule_spec(name, {"experimentTemplate": template})

    def slow_started(schedule: dict[str, Any]) -> bool:
        active = (schedule.get("status") or {}).get("active") or []
        return any(lab.stored(run)["spec"]["workload"]["rtt"] == "500ms" for run in active)

    lab.wait_schedule(name, slow_started, timeout=60)
    lab.patch_schedule_spec(name, {"suspend": True})


@pytest.fixture(scope="module")
def finished(
    operator_with_prometheus: Operator, drifting: Drifting
) -> Iterator[tuple[str, dict[str, Any], float]]:
    """One experiment run to the end; (name, the finished resource, when it started). After
    the drifting schedule started (its runs go on beside)."""
    # the only namespaces the tests' operator watches (tests/helpers/cluster.py)
    namespace = f"{NAMESPACE_PREFIX}obs-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": namespace}})
    lab = Lab(namespace)
    name = f"obs-{uuid.uuid4().hex[:4]}"
    began = time.time()
    lab.apply(name, experiment_spec(MODELS, WORKLOAD, objectives=OBJECTIVES))
    experiment = lab.wait_finished(name, timeout=300)
    assert experiment["status"]["phase"] == "Succeeded", why(experiment)
    # Prometheus has the last values once every trial's runner said it finished.
    finished_query = f'count(last_over_time(cxlab_trial_finished{{experiment="{name}"}}[10m]) == 1)'
    deadline = time.monotonic() + 30
    while True:
        answer = instant(finished_query, time.time())
        if answer and int(float(answer[0]["value"][1])) == TRIALS:
            break
        assert time.monotonic() < deadline, f"Prometheus never saw all trials finish: {answer}"
        time.sleep(1)
    # The operator's verdict: set by its first pass over the finished experiment (woken by the
    # trial Pods ending, at the latest after the runners' linger), then scraped every 5 s.
    assert [o["verdict"] for o in experiment["status"]["objectives"]] == ["Met"], why(experiment)
    verdict = f'cxlab_experiment_objective_met{{job="cxlab-operator",name="{name}"}}'
    deadline = time.monotonic() + 60
    while not (answer := instant(verdict, time.time())):
        assert time.monotonic() < deadline, "Prometheus never saw the objective's verdict"
        time.sleep(1)
    assert [(s["metric"]["objective"], s["value"][1]) for s in answer] == [("no-failures", "1")]
    yield name, experiment, began
    lab.delete(name)
    core.delete_namespace(namespace)


def test_runner_series_are_stored_with_experiment_and_trial_labels(
    finished: tuple[str, dict[str, Any], float],
) -> None:
    name, experiment, began = finished
    now = time.time()
    window = f"{int(now - began) + 5}s"
    trials = {e["name"] for e in experiment["status"]["trials"]}
    for metric in RUNNER_SERIES:
        found = instant(f'count by (trial, model) (last_over_time({metric}{{experiment="{name}"}}'
                        f"[{window}]))", now)  # fmt: skip
        assert {s["metric"]["trial"] for s in found} == trials, metric
        assert all(s["metric"].get("model") for s in found), metric
    # The final counts were scraped (the runners linger after their tasks).
    done = instant(f'last_over_time(cxlab_tasks_completed_total{{experiment="{name}",'
                   f'outcome="ok"}}[{window}])', now)  # fmt: skip
    assert {s["metric"]["trial"]: float(s["value"][1]) for s in done} == dict.fromkeys(
        trials, float(WORKLOAD["tasks"])
    )
    # Every series of a trial Pod carries its index among the trial's Pods (from the Pod's
    # cxlab.dev/pod label), and the Pod's name stays in `pod` (cAdvisor's series join on it).
    indexed = instant(
        f'count by (pod_index) (last_over_time({{experiment="{name}",pod=~".+"}}[{window}]))', now
    )
    assert {s["metric"].get("pod_index") for s in indexed} == {"0"}, indexed
    # For the report: series per trial, and samples per second of one trial's gauge.
    per_trial = instant(
        f'count by (trial) (last_over_time({{experiment="{name}"}}[{window}]))', now
    )
    counts = sorted(int(s["value"][1]) for s in per_trial)
    spacing = instant(
        f'count_over_time(cxlab_trial_elapsed_seconds{{experiment="{name}"}}[{window}])', now
    )
    # From the loaded configuration, not the active targets: the trial Pods may be gone by now.
    jobs = yaml.safe_load(ask("status/config")["yaml"])["scrape_configs"]
    interval = {job["job_name"]: job["scrape_interval"] for job in jobs}
    print(f"\nseries per trial: min {counts[0]}, max {counts[-1]}; scrape intervals: {interval};"
          f" samples per trial of cxlab_trial_elapsed_seconds: "
          f"{sorted(int(s['value'][1]) for s in spacing)}")  # fmt: skip
    assert interval["cxlab-trials"] == "1s"


@dataclass(frozen=True)
class Scheduled:
    namespace: str
    name: str
    began: float


@pytest.fixture(scope="module")
def scheduled(operator_with_prometheus: Operator) -> Iterator[Scheduled]:
    """An ExperimentSchedule with one run recorded and a capacity plan, then suspended, and
    its gauges in Prometheus: what the capacity dashboard reads."""
    namespace = f"{NAMESPACE_PREFIX}obs-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": namespace}})
    lab, name, began = Lab(namespace), "plan", time.time()
    target = {"ratePerSecond": 100, "latency": {"max": "1s"}}
    # Not verified (a schedule's runs verify by default): the panels read the plan's gauges,
    # which a minute's verification trial would only delay.
    capacity = {"target": target, "verify": {"enabled": False}}
    # Nor calibrated: a run of the cluster tests' operator proves the calibration.
    template = experiment_spec([{"model": "asyncio", "workers": [5]}],
                               {"type": "sleep", "tasks": 10, "rtt": "50ms"},
                               capacity=capacity, calibration=False)  # fmt: skip
    lab.apply_schedule(name, {"schedule": "@every 10s", "experimentTemplate": {"spec": template}})
    lab.wait_schedule(name, lambda s: bool((s.get("status") or {}).get("capacityPlan")), 120)
    lab.patch_schedule_spec(name, {"suspend": True})
    scheduled = Scheduled(namespace, name, began)
    # Until every capacity panel answers over the range the test asks for: the operator is
    # scraped every 5 s, and a range query's steps (from its start, 1 s apart) can all fall
    # before the first sample when it is only a moment old.
    deadline = time.monotonic() + 60
    while empty := empty_panels("capacity-planning.json", "", scheduled):
        if time.monotonic() > deadline:
            seen = instant(
                f'{{__name__=~"cxlab_schedule_.*",namespace="{namespace}"}}', time.time()
            )
            status = lab.get_schedule(name).get("status")
            raise AssertionError(f"no answer from {empty}; Prometheus has {seen}; status {status}")
        time.sleep(1)
    yield scheduled
    core.delete_namespace(namespace)


def substitute(expr: str, name: str, window: str, scheduled: Scheduled | None = None) -> str:
    values = {
        "$namespace": scheduled.namespace if scheduled else "",
        "$schedule": scheduled.name if scheduled else "",
        "$experiment": name,
        "$model": "|".join(m["model"] for m in MODELS),
        "$rtt": "100ms",
        "$__rate_interval": RATE_INTERVAL,
        "$__range": window,
    }
    for variable, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    assert "$" not in expr.replace("$1", ""), expr
    return expr


def empty_panels(
    board: str, name: str, plan: Scheduled | None = None, began: float | None = None
) -> list[str]:
    """The panels of a dashboard whose queries Prometheus answers with nothing."""
    began = plan.began if plan else began
    assert began is not None
    now = time.time()
    window = f"{int(now - began) + 5}s"
    empty = []
    for panel in json.loads((DASHBOARDS / board).read_text())["panels"]:
        for target in panel["targets"]:
            expr = substitute(target["expr"], name, window, plan)
            if target.get("instant"):
                result = instant(expr, now)
            else:
                result = ask("query_range", query=expr, start=f"{began:.3f}", end=f"{now:.3f}",
                             step="1")["result"]  # fmt: skip
            if not result:
                empty.append(f"{panel['title']}: {expr}")
    return empty


@pytest.mark.parametrize("board", sorted(p.name for p in DASHBOARDS.glob("*.json")))
def test_every_dashboard_panel_returns_data(
    finished: tuple[str, dict[str, Any], float], board: str, request: pytest.FixtureRequest
) -> None:
    name, _, began = finished
    # The capacity dashboard reads a schedule's gauges, the others an experiment's series.
    plan: Scheduled | None = None
    if board == "capacity-planning.json":
        plan = request.getfixturevalue("scheduled")
    empty = empty_panels(board, name, plan, began)
    assert not empty, "\n".join(empty)


# The status fields the operator fills from cAdvisor (operator/cxlab/controller/prometheus.py)
CADVISOR_FIELDS = ("cpuThrottledRatio", "memoryWorkingSetBytes")


def assert_cadvisor_usage_is_data_or_missing(usage: dict[str, Any], has_cfs_periods: bool) -> None:
    """A trial's `prometheus` status entry: Prometheus answered; each cAdvisor field is either
    listed in `missing` or holds real data, never both and never cAdvisor's placeholder 0."""
    assert "error" not in usage, usage
    assert usage["windowSeconds"] >= 1, usage
    missing = usage.get("missing", [])
    assert set(missing) <= set(CADVISOR_FIELDS), usage
    for field in CADVISOR_FIELDS:
        assert (field in missing) != (usage.get(field) is not None), usage
    if "memoryWorkingSetBytes" not in missing:
        # a cgroup with a live process never has a zero working set: 0 is no data
        assert usage["memoryWorkingSetBytes"] > 1024 * 1024, usage
    if "cpuThrottledRatio" not in missing:
        # a ratio (0 included: no throttling) only from CFS periods cAdvisor really counted
        assert 0 <= usage["cpuThrottledRatio"] <= 1 and has_cfs_periods, usage


def test_trial_status_has_cadvisor_data_or_says_it_is_missing_never_zero(
    finished: tuple[str, dict[str, Any], float],
) -> None:
    # The local cluster's kubelet cAdvisor sees only the Pods' cgroups: their working set is
    # always cAdvisor's placeholder 0 (so the operator lists it as missing), and their CFS
    # periods are counted for some trials and not others, depending on whether cAdvisor's
    # housekeeping ran within the trial. So each field is checked against what Prometheus
    # really holds for the experiment's Pods, not against one fixed outcome.
    _, experiment, _ = finished
    namespace = experiment["metadata"]["namespace"]
    now = time.time()
    pods = f'namespace="{namespace}"'
    working_set = instant(
        f"max(max_over_time(container_memory_working_set_bytes{{{pods}}}[30m]) > 0)", now
    )
    cfs_periods = instant(
        f"max(max_over_time(container_cpu_cfs_periods_total{{{pods}}}[30m]) > 0)", now
    )
    trials = experiment["status"]["trials"]
    assert len(trials) == TRIALS
    for entry in trials:
        usage = entry["prometheus"]
        assert_cadvisor_usage_is_data_or_missing(usage, has_cfs_periods=bool(cfs_periods))
        if not working_set:
            assert "memoryWorkingSetBytes" in usage.get("missing", []), usage
    found = sum("cpuThrottledRatio" in t["prometheus"] for t in trials)
    print(f"\ncAdvisor: working set > 0 {bool(working_set)}, CFS periods {bool(cfs_periods)}")
    print(f"trials with a throttling ratio: {found} of {TRIALS}")


def test_the_configuration_passes_promtool(prometheus: str) -> None:
    promtool = ROOT / "build" / "prometheus" / "bin" / "promtool"
    config = ROOT / "build" / "prometheus" / "prometheus.yml"
    check = subprocess.run([promtool, "check", "config", config], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert re.search(r"kubernetes_sd_configs", Path(config).read_text())


def firing(alert: str, schedule: str) -> list[dict[str, Any]]:
    """The alert's instances for the schedule that Prometheus holds firing now."""
    return [a for a in ask("alerts")["alerts"]
            if a["labels"].get("alertname") == alert and a["labels"].get("schedule") == schedule
            and a["state"] == "firing"]  # fmt: skip


def test_a_slowed_schedule_raises_one_regressed_event_and_its_alert_fires_and_resolves(
    drifting: Drifting,
) -> None:
    """The chart's PrometheusRule groups, loaded by the real Prometheus (hack/prometheus.sh):
    a template slowed on purpose regresses, one Warning event per regressed run names the
    point and the metric, CxlabScheduleRegressed fires, and acknowledging the run resolves it."""
    lab, name = drifting.lab, drifting.name
    history = _history

    def rtt_of(entry: dict[str, Any]) -> str:
        return str(lab.stored(entry["run"])["spec"]["workload"]["rtt"])

    drifting.slowed.result(timeout=240)  # the slow run started beside the other tests
    regressed = lab.wait_schedule(
        name, lambda s: bool(history(s)) and rtt_of(history(s)[-1]) == "500ms", timeout=90
    )
    found = (regressed.get("status") or {}).get("regression") or {}
    assert (regressed["status"].get("regressed"), found.get("run")) == (
        True, history(regressed)[-1]["run"]
    ), found  # fmt: skip
    assert {(f["point"], f["metric"]) for f in found["found"]} >= {
        ("asyncio w=per-task", "wallSeconds")
    }, found
    # Prometheus: firing once the operator's gauge was scraped and the rule held for 5 s
    deadline = time.monotonic() + 60
    while not (alerts := firing("CxlabScheduleRegressed", name)):
        assert time.monotonic() < deadline, ask("alerts")
        time.sleep(1)
    assert alerts[0]["labels"]["namespace"] == lab.namespace
    assert alerts[0]["labels"]["severity"] == "warning"
    assert "troubleshooting" in alerts[0]["annotations"]["runbook_url"]
    newest = history(regressed)[-1]["run"]
    lab.patch_schedule_spec(name, {"regression": {"acknowledgedRun": newest}})
    final = lab.get_schedule(name)
    # one Warning event per regressed run, naming the run, the point and the metric
    regressed_runs = {e["run"] for e in history(final) if e.get("regressed")}
    events = lab.events(name, "Regressed", kind="ExperimentSchedule")
    shown = [e for e in events if e.reason == "Regressed"]
    assert sum(e.count or 1 for e in shown) == len(regressed_runs) >= 1, [e.message for e in shown]
    for event in shown:
        assert event.type == "Warning" and "asyncio w=per-task: " in event.message
    assert {e.message.split()[1].rstrip(":") for e in shown} == regressed_runs
    # the slow run's names its wall time (a busy machine may have regressed a baseline run on
    # another metric before: a cold CI run's CPU per task went 90 -> 360 µs)
    [slow] = [e for e in shown if e.message.split()[1].rstrip(":") == newest]
    assert "wallSeconds " in slow.message, slow.message
    deadline = time.monotonic() + 60
    while firing("CxlabScheduleRegressed", name):
        assert time.monotonic() < deadline, ask("alerts")
        time.sleep(1)
