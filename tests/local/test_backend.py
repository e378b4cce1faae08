"""`cxlab run` and `cxlab plan` end to end: real pinned subprocesses, real Results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import BIN, EXAMPLES, ROOT

from cxlab_contract import histogram
from cxlab_contract.figures import significant

CXLAB = [sys.executable, "-m", "cxlab.cli"]
SLEEP = {"type": "sleep", "tasks": 5, "rtt": "1ms"}


def cxlab(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([*CXLAB, *args], capture_output=True, text=True, cwd=cwd, env=env)


def write_experiment(path: Path, spec: dict[str, Any], name: str = "tiny") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "cxlab.dev/v1alpha1",
                "kind": "ConcurrencyExperiment",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    )
    return path


def test_run_writes_status_report_and_summary(tmp_path: Path) -> None:
    spec = {
        "workload": {"type": "sleep", "tasks": 60, "rtts": ["10ms", "30ms"]},
        "models": [
            {"model": "threads", "workers": [2, 10, 0]},
            {"model": "asyncio"},
            {"model": "goroutines", "gomaxprocs": [1]},
        ],
        "repetitions": 2,
    }
    path = write_experiment(tmp_path / "tiny.yaml", spec)
    completed = cxlab("run", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    document = json.loads((tmp_path / "out" / "tiny" / "result.json").read_text())
    status = document["status"]
    assert status["phase"] == "Succeeded"
    assert status["progress"] == {
        "trialsTotal": 20, "trialsDone": 20, "trialsFailed": 0, "display": "20/20", "running": [],
    }  # fmt: skip
    # the operator's fields, built by the same builder
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions | {"MetricsCollected": "-"} == {
        "Progressing": "False", "Complete": "True", "Failed": "False", "Pinned": "True",
        "MetricsCollected": "-",  # True or False: some trials end before the first scrape
        "ObjectivesMet": "True",  # no objectives: nothing to gate on
    }  # fmt: skip
    assert status["startTime"] <= status["completionTime"] and status["best"]
    core = sorted(os.sched_getaffinity(0))[-1]
    for trial in status["trials"]:
        result = trial["result"]
        assert result["cpus"] == [core]  # pinned to the requested core, and verified
        assert result["wallSeconds"] >= result["floorSeconds"]
        assert result["trial"] == trial["name"] and result["experiment"] == "tiny"
        assert (tmp_path / "out" / "tiny" / "trials" / f"{trial['name']}.json").exists()
    summary = status["summary"]
    assert len(summary["points"]) == 10 and all(p["repetitions"] == 2 for p in summary["points"])
    # wall time of the thread pool falls as ceil(tasks/workers) x RTT: 2 workers take at least
    # their floor (0.9 s), a worker per task far less. Not 10 workers against one per task:
    # their floors (0.18 s, 0.03 s) are closer than what starting 60 threads can cost on a busy
    # machine (seen: 0.24 s against 0.31 s with both cores busy elsewhere).
    walls = {
        (p["workers"], p["rttSeconds"]): p["wallSeconds"]["mean"]
        for p in summary["points"]
        if p["model"] == "threads"
    }
    assert walls[(2, 0.03)] >= 30 * 0.03 > walls[(0, 0.03)] >= 0.03
    assert {r["rttSeconds"] for r in summary["recommendations"]} == {0.01, 0.03}
    assert {k["variant"] for k in summary["knees"]} == {
        "threads", "asyncio", "goroutines (GOMAXPROCS 1)",
    }  # fmt: skip
    assert "Recommendation:" in completed.stdout and "RTT 30ms:" in completed.stdout
    assert "20/20" in completed.stderr or "[20/20]" in completed.stderr  # live progress lines
    report = (tmp_path / "out" / "tiny" / "report.html").read_text()
    assert report.count("<svg") >= 3


def test_http_experiment_runs_its_own_delay_target(tmp_path: Path) -> None:
    spec = {
        "workload": {"type": "http", "tasks": 20, "rtt": "20ms"},
        "models": [{"model": "locust", "workers": [5]}, {"model": "asyncio"}],
    }
    path = write_experiment(tmp_path / "web.yaml", spec, name="web")
    completed = cxlab("run", str(path), "--out", str(tmp_path / "web"), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    trials = json.loads((tmp_path / "web" / "result.json").read_text())["status"]["trials"]
    assert [t["result"]["tasksOk"] for t in trials] == [20, 20]


def test_the_virtualenvs_cxlab_finds_the_go_programs_unactivated(tmp_path: Path) -> None:
    # `.venv/bin/cxlab run` straight after `make deps`, neither build/bin nor the virtualenv
    # on PATH: the Go runner and the delay target are found beside the command
    spec = {"workload": {"type": "http", "tasks": 5, "rtt": "1ms"},
            "models": [{"model": "goroutines", "gomaxprocs": [1]}]}  # fmt: skip
    path = write_experiment(tmp_path / "go.yaml", spec, name="go")
    completed = subprocess.run(
        [str(Path(sys.executable).with_name("cxlab")), "run", str(path)],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    [trial] = json.loads((tmp_path / "out" / "go" / "result.json").read_text())["status"]["trials"]
    assert trial["result"]["tasksOk"] == 5


def test_a_trial_over_its_timeout_is_killed_and_failed(tmp_path: Path) -> None:
    spec = {
        "workload": {"type": "sleep", "tasks": 1, "rtt": "1m"},
        "models": [{"model": "asyncio"}],
    }
    path = write_experiment(tmp_path / "t.yaml", spec)
    completed = cxlab("run", str(path), "--trial-timeout", "1", cwd=tmp_path)
    document = json.loads((tmp_path / "out" / "tiny" / "result.json").read_text())
    assert completed.returncode == 1
    assert document["status"]["phase"] == "Failed"
    assert "timed out" in document["status"]["trials"][0]["message"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"workload": SLEEP, "models": [{"model": "locust"}]},
            "spec: model locust drives HTTP users and needs workload type http",
        ),
        (
            {"workload": SLEEP, "models": [{"model": "asyncio"}], "resources": {"cpu": 64}},
            "spec.resources.cpu: asks for 64 CPUs but this machine lets cxlab use",
        ),
    ],
)  # fmt: skip
def test_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    path = write_experiment(tmp_path / "bad.yaml", spec)
    completed = cxlab("run", str(path), cwd=tmp_path)
    assert completed.returncode == 2
    assert message in completed.stderr and str(path) in completed.stderr
    assert not (tmp_path / "out").exists()


def test_not_an_experiment_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")
    completed = cxlab("run", str(path), cwd=tmp_path)
    assert completed.returncode == 2 and "is not a ConcurrencyExperiment" in completed.stderr


def test_plan_prints_trials_and_floor_without_running(tmp_path: Path) -> None:
    completed = cxlab("plan", str(EXAMPLES / "quickstart.yaml"), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "quickstart: 36 trials, 1000 tasks each; floor time at least" in completed.stdout
    assert "000-threads-w20-rtt20ms-r1" in completed.stdout
    assert not (tmp_path / "out").exists()


def test_plan_prints_runner_command_lines_that_run_as_pasted(tmp_path: Path) -> None:
    models = [{"model": "asyncio"}, {"model": "goroutines", "gomaxprocs": [1]}]
    spec = {"workload": {"type": "sleep", "tasks": 5, "rtt": "10ms"}, "models": models}
    path = write_experiment(tmp_path / "paste.yaml", spec)
    planned = cxlab("plan", str(path), cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    lines = [line for line in planned.stdout.splitlines() if line.startswith("taskset ")]
    assert len(lines) == 2
    path_with_tools = f"{ROOT / '.venv' / 'bin'}:{BIN}:{os.environ['PATH']}"
    for line in lines:
        ran = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PATH": path_with_tools})  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        result = json.loads(ran.stdout)
        assert result["tasksOk"] == 5 and result["trial"] in line


def run_one_trial(tmp_path: Path, spec: dict[str, Any], name: str) -> dict[str, Any]:
    """`cxlab run` of an experiment of one trial; that trial's status entry."""
    path = write_experiment(tmp_path / f"{name}.yaml", spec, name=name)
    completed = cxlab("run", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    status = json.loads((tmp_path / "out" / name / "result.json").read_text())["status"]
    [entry] = status["trials"]
    return dict(entry)


def test_a_trial_of_three_pods_runs_three_processes_released_together(tmp_path: Path) -> None:
    spec = {
        "workload": {"type": "sleep", "tasks": 30, "rtt": "50ms"},
        "models": [{"model": "asyncio", "workers": [5], "pods": [3]}],
        "pinning": "preferred",
    }
    entry = run_one_trial(tmp_path, spec, "three")
    assert entry["name"] == "000-asyncio-n3-w5-rtt50ms-r1" and entry["pods"] == 3
    pods, merged = entry["podResults"], entry["result"]
    assert [p["podIndex"] for p in pods] == [0, 1, 2] and [p["tasks"] for p in pods] == [10] * 3
    assert merged["pods"] == 3 and merged["tasksOk"] == 30 and merged["podIndex"] is None
    assert all(p["barrierWaitSeconds"] is not None for p in pods)  # each waited at the barrier
    starts = [p["startedAtUnixSeconds"] for p in pods]
    assert merged["startSkewSeconds"] == pytest.approx(max(starts) - min(starts), abs=1e-6)
    # one POST each, sent at once: the three leave within a few milliseconds of each other
    assert merged["startSkewSeconds"] < 0.1, merged["startSkewSeconds"]
    merged_histogram = histogram.merge([p["latencyHistogram"] for p in pods])
    assert merged["latencySeconds"]["p99"] == significant(
        histogram.quantile(merged_histogram, 0.99)
    )
    ends = [p["startedAtUnixSeconds"] + p["wallSeconds"] for p in pods]
    assert merged["wallSeconds"] == pytest.approx(max(ends) - min(starts), abs=1e-5)
    if len(os.sched_getaffinity(0)) < 3:  # 3 Pods x 1 CPU: they shared the cores, and say so
        assert entry["pinned"] is False and "shared cores" in entry["message"]
    else:
        assert entry["pinned"] is True
        assert len({tuple(p["cpus"]) for p in pods}) == 3  # a core of its own each


def test_a_distributed_locust_trial_runs_a_master_and_its_workers(tmp_path: Path) -> None:
    spec = {
        "workload": {"type": "http", "tasks": 60, "rtt": "10ms"},
        "models": [{"model": "locust", "workers": [3], "pods": [2]}],
        "pinning": "preferred",
    }
    entry = run_one_trial(tmp_path, spec, "swarm")
    workers, master = entry["podResults"][:2], entry["podResults"][2]
    assert [w["tasks"] for w in workers] == [30, 30] and master["tasks"] == 60
    assert entry["result"]["locustWorkers"] == master["locustWorkers"] == 2
    assert entry["result"]["tasksOk"] == sum(w["tasksOk"] for w in workers) == 60
    assert [w["workersStarted"] for w in workers] == [3, 3]  # the master's 6 users, spread


def test_closed_loop_and_arrival_experiments_of_two_processes_each(tmp_path: Path) -> None:
    # A closed loop for a time and tasks arriving at two rates, each trial of 2 Pods: the
    # merged Result's rate is the Pods' sum, its histograms their merge (docs/open-loop.md).
    # maxLag 1s: a busy machine's lag must not leave the knees empty (saturation has its test)
    rates = {"ratesPerSecond": [100, 200], "duration": "2s", "process": "uniform", "maxLag": "1s"}
    arrival = {"type": "sleep", "rtt": "20ms", "warmup": "500ms", "arrival": rates}
    closed = {"type": "sleep", "rtt": "20ms", "duration": "2s"}
    models = [
        {"model": "asyncio", "workers": [0], "pods": [2]},
        {"model": "goroutines", "pods": [2]},
    ]
    path = tmp_path / "both.yaml"
    write_experiment(path, {"workload": arrival, "models": models}, "arrivals")
    looped = write_experiment(tmp_path / "closed.yaml", {
        "workload": closed, "models": [{"model": "threads", "workers": [4], "pods": [2]}]},
        "closed")  # fmt: skip
    path.write_text(path.read_text() + "---\n" + looped.read_text())
    completed = cxlab("run", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "holds" in completed.stdout  # the knees in the rate, on the terminal

    document = json.loads((tmp_path / "out" / "arrivals" / "result.json").read_text())
    status = document["status"]
    assert status["phase"] == "Succeeded" and len(status["trials"]) == 4
    for entry in status["trials"]:
        merged, pods = entry["result"], entry["podResults"]
        arrival_figures = [p["arrival"] for p in pods]
        assert merged["pods"] == 2 and entry["ratePerSecond"] in (100, 200)
        assert merged["arrival"]["ratePerSecond"] == pytest.approx(entry["ratePerSecond"])
        assert merged["arrival"]["ratePerSecond"] == pytest.approx(
            sum(a["ratePerSecond"] for a in arrival_figures)
        )
        for key in ("waitHistogram", "serviceHistogram"):
            assert merged["arrival"][key] == histogram.merge([a[key] for a in arrival_figures])
        assert merged["latencyHistogram"] == histogram.merge([p["latencyHistogram"] for p in pods])
        assert merged["warmup"]["tasksOk"] == sum(p["warmup"]["tasksOk"] for p in pods)
        assert sum(merged["timeline"]["completed"]) == merged["tasksOk"]
    knees = status["summary"]["knees"]
    assert {k["variant"] for k in knees} == {"asyncio", "goroutines (GOMAXPROCS default)"}
    report = (tmp_path / "out" / "arrivals" / "report.html").read_text()
    assert "p99 latency vs offered rate" in report and "Tasks ended per second over time" in report

    loop = json.loads((tmp_path / "out" / "closed" / "result.json").read_text())["status"]
    [entry] = loop["trials"]
    assert entry["result"]["durationSeconds"] == 2 and entry["result"]["arrival"] is None
    assert entry["result"]["tasks"] == sum(p["tasks"] for p in entry["podResults"])
    assert entry["result"]["tasks"] > 2 * 4 * 2 / 0.02 * 0.7  # 2 Pods x 4 workers x 2 s / 20 ms


def test_cxlab_run_verifies_its_plan_and_refutes_a_sizing_too_small(tmp_path: Path) -> None:
    # 1,000 tasks/s of 50 ms sleeps at p99 <= 150ms on 1 core per Pod: one closed burst, a
    # search of the rate one Pod holds (250, 500, 1,000, 2,000/s), a plan from the rates that
    # held, then the plan run as planned, Poisson arrivals queueing for its workers. (The
    # issue's 2,000/s at 80 ms is manifests/examples/capacity-verify.yaml, its run in
    # docs/capacity-plan.md; here a margin for the unit tests' busy machine: a cold CI run
    # held only lower rates at 80 ms, and planned more Pods than 2 cores verify.)
    spec: dict[str, Any] = {
        "workload": {"type": "sleep", "tasks": 1000, "rtt": "50ms"},
        "models": [{"model": "goroutines", "workers": [0]}],
        "search": {"rate": {"start": 250, "duration": "2s", "maxProbes": 4}},
        "capacity": {
            "target": {"ratePerSecond": 1000, "latency": {"percentile": "p99", "max": "150ms"}},
            "verify": {"duration": "3s"},
        },
    }
    path = write_experiment(tmp_path / "plan.yaml", spec, name="plan")
    completed = cxlab("run", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    result = tmp_path / "out" / "plan" / "result.json"
    status = json.loads(result.read_text())["status"]
    plan = status["capacityPlan"]
    assert plan["basis"] == "verified", plan["message"]
    [searched] = plan["models"]
    assert [p["ratePerSecond"] for p in searched["search"]][:2] == [250, 500]
    assert searched["searchedRatePerSecond"] >= 500, searched["search"]
    assert "rate search held" in searched["note"]
    last = plan["verification"][-1]
    assert last["holds"] and last["latencySeconds"] <= 0.15 and last["dropped"] == 0
    assert (last["pods"], last["workersPerPod"]) == (
        plan["pods"],
        plan["models"][0]["workersPerPod"],
    )
    # every probe and attempt is a trial of its own in status, after the sweep's one
    kinds = [t["name"].split("-")[1][0] for t in status["trials"]]
    probes = kinds.count("s")  # 4 rates, and the boundary's repeats
    assert probes >= 4 and kinds == ["g", *"s" * probes, *"v" * (len(kinds) - 1 - probes)]
    checks = [t["name"] for t in status["trials"][1 + probes :]]
    assert checks == [v["trial"] for v in plan["verification"]] and "-v1-" in checks[0]
    assert plan["display"].endswith("(verified)")
    # The plan as a Deployment fragment, from the result
    shown = cxlab("plan", "--capacity", str(result), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    fragment = yaml.safe_load(shown.stdout[shown.stdout.index("# cxlab capacity plan") :])
    assert fragment["spec"]["replicas"] == plan["pods"]

    # 40 workers serve at most 800 of the 1,000 tasks/s: the queue grows, and the run says so.
    spec["capacity"]["verify"] = {"duration": "2s", "workersPerPod": 40, "maxAttempts": 1}
    del spec["search"]
    path = write_experiment(tmp_path / "small.yaml", spec, name="small")
    completed = cxlab("run", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    small = json.loads((tmp_path / "out" / "small" / "result.json").read_text())["status"]
    [check] = small["capacityPlan"]["verification"]
    assert (check["workersPerPod"], check["holds"]) == (40, False)
    assert "p99" in check["shortfall"] and check["latencySeconds"] > 0.15
    assert "the sizing spec.capacity.verify gives fell short" in small["capacityPlan"]["message"]


def test_a_calibrated_run_records_its_environment(tmp_path: Path) -> None:
    """spec.calibration: the CPU loop and the 1 ms sleeps run after the matrix, outside its
    summary, and status.environment holds their medians and this machine's fingerprint."""
    spec = {"workload": SLEEP, "models": [{"model": "asyncio"}], "calibration": True}
    completed = cxlab("run", str(write_experiment(tmp_path / "cal.yaml", spec, "cal")),
                      cwd=tmp_path)  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    status = json.loads((tmp_path / "out" / "cal" / "result.json").read_text())["status"]
    names = [t["name"] for t in status["trials"]]
    assert names == ["000-asyncio-w0-rtt1ms-r1", "001-calcpu-sequential-w1-r1",
                     "002-calsleep-sequential-w1-rtt1ms-r1"]  # fmt: skip
    assert [p["variant"] for p in status["summary"]["points"]] == ["asyncio"]
    environment = status["environment"]
    assert environment["node"] == os.uname().nodename
    assert environment["kernel"] == os.uname().release and environment["cpuModel"]
    assert environment["cpuManagerPolicy"] == "local" and "runnerImage" not in environment
    calibration = environment["calibration"]
    assert 0.001 <= calibration["sleepSeconds"] < 0.05, calibration
    assert 0.005 < calibration["cpuLoopSeconds"] < 5, calibration


# ---- objectives: the exit status a pipeline gates on (cxlab.cli's docstring) ----

# On the edge by the seeds, not the machine: Poisson arrivals at 200/s for 2 s, whose two
# repetitions draw 410 and 403 (seeds 1 and 66), to one worker taking 100 ms each, which drops
# whatever arrives while it works: about 390 and 383 dropped, the 20 or so served a matter of
# timing. The t interval of two (±12.7 sd, about ±50) straddles 386 however busy the machine;
# a lag bound of a minute keeps a late generator's repetitions counted (not saturated).
EDGE = {
    "type": "sleep",
    "rtt": "100ms",
    "arrival": {"ratePerSecond": 200, "duration": "2s", "onBusy": "drop", "maxLag": "1m"},
}


def test_objectives_that_hold_exit_0(tmp_path: Path) -> None:
    spec = {
        "workload": SLEEP,
        "models": [{"model": "asyncio"}],
        "objectives": [{"latency": {"max": "1s"}}, {"failureRatio": {"max": 0}}],
    }
    completed = cxlab("run", str(write_experiment(tmp_path / "e.yaml", spec)), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "Objectives: met" in completed.stdout


def test_an_objective_that_cannot_hold_exits_3_and_skips_what_can_only_be_worse(
    tmp_path: Path,
) -> None:
    # every task sleeps 20 ms, so no p50 is under 10 ms: 1 worker breaks it, and 2, 4 and 8
    # workers of the same model can only do worse (abortOnFail); asyncio still runs.
    spec = {
        "workload": {"type": "sleep", "tasks": 8, "rtt": "20ms"},
        "models": [{"model": "threads", "workers": [1, 2, 4, 8]}, {"model": "asyncio"}],
        "objectives": [
            {"latency": {"percentile": "p50", "max": "10ms"}, "models": ["threads"],
             "abortOnFail": True},
        ],
    }  # fmt: skip
    path = write_experiment(tmp_path / "e.yaml", spec)
    completed = cxlab("run", str(path), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert completed.returncode == 3, completed.stderr
    assert "5/5 trials, 0 failed, 3 skipped (abortOnFail)" in completed.stdout
    assert "Objectives: NOT MET" in completed.stdout
    status = json.loads((tmp_path / "out" / "result.json").read_text())["status"]
    ran = [t["name"] for t in status["trials"] if t["phase"] == "Succeeded"]
    assert ran == ["000-threads-w1-rtt20ms-r1", "004-asyncio-w0-rtt20ms-r1"]
    skipped = [t for t in status["trials"] if t["phase"] == "Skipped"]
    assert [t["workers"] for t in skipped] == [2, 4, 8]
    assert all("broken at threads, 1 worker" in t["message"] for t in skipped)
    assert status["objectives"][0]["skippedTrials"] == 3


def test_an_objective_on_the_edge_with_two_repetitions_exits_4_naming_the_repetitions(
    tmp_path: Path,
) -> None:
    spec = {"workload": EDGE, "models": [{"model": "asyncio", "workers": [1]}], "repetitions": 2,
            "objectives": [{"dropped": {"max": 386}}]}  # fmt: skip
    path = write_experiment(tmp_path / "e.yaml", spec)
    completed = cxlab("run", str(path), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert completed.returncode == 4, completed.stdout + completed.stderr
    assert "Objectives: INCONCLUSIVE" in completed.stdout
    [objective] = json.loads((tmp_path / "out" / "result.json").read_text())["status"]["objectives"]
    needed = objective["points"][0]["repetitionsNeeded"]
    assert needed > 2 and f"about {needed} repetitions would decide it" in objective["message"]


def test_plan_lists_the_objectives_it_will_judge(tmp_path: Path) -> None:
    spec = {
        "workload": SLEEP,
        "models": [{"model": "threads", "workers": [1, 2]}],
        "objectives": [
            {"name": "fast", "latency": {"max": "250ms"}, "abortOnFail": True},
            {"failureRatio": {"max": 0.01}, "scope": "recommended"},
        ],
    }
    completed = cxlab("plan", str(write_experiment(tmp_path / "e.yaml", spec)), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert (
        "objective fast (latency p99 ≤ 250ms) at every point, skipping what can only do worse "
        "once broken\nobjective failure ratio ≤ 1 % at recommended point\n"
    ) in completed.stdout
