"""The spec model: every seed's example is valid; every bad input names its field and rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES
from helpers.specs import document

from cxlab.experiments.fields import SpecError, memory_bytes
from cxlab.experiments.resource import load_experiments, parse_experiment
from cxlab.experiments.spec import MAX_RESULTS, MAX_TRIALS

SLEEP_2_TASKS = {"type": "sleep", "tasks": 2, "rtt": "1ms"}


def problems(doc: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        parse_experiment(doc)
    return str(caught.value)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_is_valid(path: Path) -> None:
    assert load_experiments(path)


def test_defaults() -> None:
    spec = parse_experiment(document()).spec
    assert (spec.repetitions, spec.resources.cpu, spec.resources.memory) == (1, 1, "512Mi")
    assert spec.tolerance == 0.10
    assert spec.workload.rtt_seconds() == [0.1]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"workload": {"type": "disk", "tasks": 1}}, "spec.workload.type: Input should be"),
        ({"models": [{"model": "fibers"}]}, "spec.models[0].model: Input should be"),
        ({"models": [{"model": "threads", "workers": [-1]}]}, "spec.models[0].workers[0]"),
        ({"models": [{"model": "threads", "workers": [1.5]}]}, "valid integer (got 1.5)"),
        ({"models": [{"model": "threads", "workers": ["4"]}]}, "spec.models[0].workers[0]"),
        (
            {"workload": {"type": "sleep", "tasks": 1, "rtt": "100 ms"}},
            "spec.workload.rtt: '100 ms' is not a duration",
        ),
        (
            {"models": [{"model": "locust"}]},
            "locust drives HTTP users and needs workload type http",
        ),
        (
            {"models": [{"model": "asyncio", "gomaxprocs": [1]}]},
            "spec.models[0]: gomaxprocs applies to goroutines only",
        ),
        ({"models": []}, "spec.models: List should have at least 1 item"),
        ({"repetitions": 0}, "spec.repetitions: Input should be greater than or equal to 1"),
        ({"workload": {"type": "sleep", "tasks": 1}}, "need exactly one of rtt or rtts"),
        ({"workload": {"type": "cpu", "tasks": 1}}, "iterations is required for cpu"),
        ({"workload": {"type": "hold", "tasks": 1, "rtt": "1s"}}, "rtt/rtts apply to sleep"),
        ({"resources": {"cpu": 1, "memory": "lots"}}, "'lots' is not a quantity"),
        (
            {"models": [{"model": "threads"}, {"model": "threads"}]},
            "model 'threads' is listed twice",
        ),
        (
            {
                "models": [{"model": "processes", "workers": [0]}],
                "workload": {"type": "sleep", "tasks": 5000, "rtt": "1s"},
            },
            "at most 512 worker processes (0 workers means one per task) (these would start 5000)",
        ),
        ({"modle": []}, "spec.modle: is not a field of ConcurrencyExperiment"),
        ({"models": [{"model": "sequential", "workers": [4]}]}, "sequential runs one task"),
        (
            {"workload": {"type": "sleep", "tasks": 1, "rtts": ["1s", "1000ms"]}},
            "rtts lists 1s twice",
        ),
        (
            {"models": [{"model": "asyncio", "pods": [2, 2]}]},
            "spec.models[0].pods: a Pod count is listed twice (2)",
        ),
        ({"models": [{"model": "asyncio", "pods": [65]}]}, "less than or equal to 64"),
        (
            {"models": [{"model": "asyncio", "pods": [3]}], "workload": SLEEP_2_TASKS},
            "needs at least N tasks (one each): raise workload.tasks or lower models[].pods "
            "(3 Pods, 2 tasks)",
        ),
        (
            {"isolation": "process", "models": [{"model": "asyncio", "pods": [2]}]},
            "a trial of several Pods (models[].pods above 1) needs isolation: pod",
        ),
        ({"isolation": "process", "queueName": "lab"}, "leave queueName out"),
        ({"isolation": "processes"}, "spec.isolation: Input should be 'pod' or 'process'"),
        (
            {"resources": {"cpu": 0.5}},
            "cannot be pinned to a core: set pinning: preferred (or whole CPUs) (cpu 0.5)",
        ),
        (
            {"resources": {"cpu": 0.0005}, "pinning": "preferred"},
            "spec.resources.cpu: Input should be greater than or equal to 0.001 (got 0.0005)",
        ),
        ({"resources": {"cpu": 1.2345}, "pinning": "preferred"}, "finer than a millicore"),
        (
            {"resources": {"cpu": "1"}},
            "spec.resources.cpu: must be a number between 0.001 and 256, got '1'",
        ),
    ],
)
def test_bad_input_names_the_field_and_the_rule(change: dict[str, Any], expected: str) -> None:
    assert expected in problems(document(**change))


def test_matrix_over_the_maximum_is_rejected() -> None:
    doc = document(
        models=[{"model": "threads", "workers": list(range(1, 33))}],
        workload={"type": "sleep", "tasks": 10, "rtts": ["1ms", "2ms", "3ms", "4ms"]},
        repetitions=8,
    )
    message = problems(doc)
    assert "(it has 1024)" in message
    assert f"may hold at most {MAX_TRIALS} trials" in message


def test_results_over_the_maximum_are_rejected() -> None:
    # 240 trials, but 8 Pods each keep 9 Results: 2160
    doc = document(
        models=[{"model": "asyncio", "workers": list(range(1, 11)), "pods": [8]}],
        workload={"type": "sleep", "tasks": 10, "rtts": ["1ms", "2ms", "3ms", "4ms"]},
        repetitions=6,
    )
    message = problems(doc)
    assert "(they keep 2160)" in message and f"at most {MAX_RESULTS} Results" in message


def test_a_fraction_of_a_cpu_runs_unpinned_under_preferred() -> None:
    resources = parse_experiment(document(resources={"cpu": 0.5}, pinning="preferred")).spec
    assert resources.resources.whole_cpus is None
    assert parse_experiment(document(resources={"cpu": 2})).spec.resources.whole_cpus == 2


def test_not_a_concurrency_experiment() -> None:
    doc = document()
    doc["kind"] = "Deployment"
    assert "document: is not a ConcurrencyExperiment" in problems(doc)
    assert "is not a mapping" in problems(["a", "list"])  # type: ignore[arg-type]


def test_every_problem_is_reported_at_once() -> None:
    doc = document(models=[{"model": "threads", "workers": [-1, -2]}], repetitions=0)
    assert len(problems(doc).splitlines()) == 3


def test_spec_is_not_modified_by_validation() -> None:
    doc = document()
    before = copy.deepcopy(doc)
    parse_experiment(doc)
    assert doc == before


def test_multi_document_files_name_the_document(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(
        "apiVersion: cxlab.dev/v1alpha1\nkind: ConcurrencyExperiment\nmetadata: {name: a}\n"
        "spec: {workload: {type: sleep, tasks: 1, rtt: 1ms}, models: [{model: asyncio}]}\n---\n"
        "apiVersion: cxlab.dev/v1alpha1\nkind: ConcurrencyExperiment\nmetadata: {name: a}\n"
        "spec: {workload: {type: sleep, tasks: 1, rtt: 1ms}, models: [{model: nope}]}\n"
    )
    with pytest.raises(SpecError) as caught:
        load_experiments(path)
    assert "document 2: spec.models[0].model" in str(caught.value)


def test_memory_quantities() -> None:
    assert memory_bytes("512Mi") == 512 * 2**20
    assert memory_bytes("1G") == 10**9
