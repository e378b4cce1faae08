"""The planner: spec → trials → runner command lines, without running anything."""

from __future__ import annotations

import re

import pytest
from helpers.specs import document

from cxlab.experiments.plan import floor_seconds, plan_trials, pod_tasks, runner_command
from cxlab.experiments.resource import parse_experiment


def test_matrix_and_order() -> None:
    spec = parse_experiment(
        document(
            workload={"type": "sleep", "tasks": 100, "rtts": ["50ms", "1s"]},
            models=[
                {"model": "threads", "workers": [10, 100]},
                {"model": "goroutines", "gomaxprocs": [1, 0]},
            ],
            repetitions=2,
        )
    ).spec
    trials = plan_trials(spec)
    assert len(trials) == spec.trial_count() == 2 * 2 * (2 + 2)
    # repetitions outermost, then RTT, model, GOMAXPROCS, workers
    assert [
        (t.repetition, t.rtt_seconds, t.model, t.gomaxprocs, t.workers) for t in trials[:4]
    ] == [
        (1, 0.05, "threads", None, 10),
        (1, 0.05, "threads", None, 100),
        (1, 0.05, "goroutines", 1, 0),
        (1, 0.05, "goroutines", 0, 0),
    ]
    assert [t.index for t in trials] == list(range(len(trials)))
    names = [t.name for t in trials]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n) for n in names)
    assert trials[2].name == "002-goroutines-w0-p1-rtt50ms-r1"
    assert trials[2].variant == "goroutines (GOMAXPROCS 1)"


@pytest.mark.parametrize(
    ("model", "workers", "floor"),
    [("threads", 10, 1.0), ("threads", 0, 0.1), ("threads", 1000, 0.1), ("sequential", 0, 10.0)],
)
def test_floor_is_waves_times_rtt(model: str, workers: int, floor: float) -> None:
    spec = parse_experiment(document(models=[{"model": model, "workers": [workers]}])).spec
    assert floor_seconds(spec, plan_trials(spec)[0]) == pytest.approx(floor)


def test_floor_of_hold_and_cpu() -> None:
    hold = parse_experiment(document(workload={"type": "hold", "tasks": 10, "hold": "2s"})).spec
    assert floor_seconds(hold, plan_trials(hold)[0]) == 2.0 * 1  # workers [10, 0]: one wave
    cpu = parse_experiment(document(workload={"type": "cpu", "tasks": 2, "iterations": 5})).spec
    assert floor_seconds(cpu, plan_trials(cpu)[0]) is None


def test_runner_command_follows_the_contract() -> None:
    spec = parse_experiment(
        document(
            workload={"type": "http", "tasks": 5, "rtt": "1.5s", "connection": "reuse"},
            models=[{"model": "goroutines", "gomaxprocs": [4]}],
        )
    ).spec
    trial = plan_trials(spec)[0]
    argv = runner_command(
        spec,
        trial,
        experiment="demo",
        metrics_port=9100,
        result_path="/r.json",
        target_url="http://t:8080/",
    )
    assert argv[0] == "cxlab-runner-go"
    flags = dict(zip(argv[1::2], argv[2::2], strict=True))
    assert flags == {
        "--model": "goroutines", "--workload": "http", "--tasks": "5", "--workers": "0",
        "--metrics-port": "9100", "--linger": "0s", "--experiment": "demo",
        "--trial": trial.name, "--rtt": "1.5s", "--gomaxprocs": "4",
        "--target-url": "http://t:8080/", "--connection": "reuse", "--result-path": "/r.json",
    }  # fmt: skip


def test_http_without_a_target_is_a_programming_error() -> None:
    spec = parse_experiment(document(workload={"type": "http", "tasks": 5, "rtt": "1s"})).spec
    with pytest.raises(ValueError, match="delay target"):
        runner_command(spec, plan_trials(spec)[0], experiment="demo")


def test_a_trial_of_several_pods_splits_its_tasks_and_names_its_pods() -> None:
    spec = parse_experiment(
        document(
            workload={"type": "sleep", "tasks": 10, "rtt": "100ms"},
            models=[{"model": "asyncio", "workers": [2], "pods": [1, 3]}],
            pinning="preferred",
        )
    ).spec
    one, three = plan_trials(spec)
    assert (one.pods, three.pods) == (1, 3)
    assert one.name == "000-asyncio-w2-rtt100ms-r1"  # one Pod: the name it always had
    assert three.name == "001-asyncio-n3-w2-rtt100ms-r1"
    assert [pod_tasks(10, 3, i) for i in range(3)] == [4, 3, 3]
    assert sum(pod_tasks(1_000_003, 7, i) for i in range(7)) == 1_000_003
    argv = [
        runner_command(spec, three, experiment="e", pod=i, barrier_timeout="2m") for i in range(3)
    ]
    assert [a[a.index("--tasks") + 1] for a in argv] == ["4", "3", "3"]
    assert [a[a.index("--pod") + 1] for a in argv] == ["0", "1", "2"]
    assert all(a[a.index("--barrier-timeout") + 1] == "2m" for a in argv)
    assert "--barrier-timeout" not in runner_command(spec, one, experiment="e")  # starts at once
    assert floor_seconds(spec, three) == 0.2  # its largest Pod: 4 tasks in waves of 2


def test_the_matrix_counts_pods_and_their_results() -> None:
    spec = parse_experiment(
        document(
            workload={"type": "sleep", "tasks": 10, "rtt": "100ms"},
            models=[{"model": "asyncio", "workers": [1, 2], "pods": [1, 4]}],
            repetitions=2,
        )
    ).spec
    assert spec.trial_count() == 2 * 2 * 2
    assert spec.result_count() == 2 * 2 * (1 + 5)  # 4 Pods: 4 Results and the merged one
