"""The calibration trials (spec.calibration) and the environment a run records: where they
come among an experiment's trials, what a runner is told, the fingerprint built from their
entries, and a schedule's verdict that blames the environment when the calibration moved
with a regression (cxlab.schedules.regression.environment_change)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from helpers import ROOT
from helpers.followups import entries, experiment, sweep_outcomes
from helpers.results import result

from cxlab.analysis.outcome import TrialOutcome
from cxlab.controller.schedule_pass import run_spec
from cxlab.experiments.environment import environment_of
from cxlab.experiments.followups import trials_of
from cxlab.experiments.plan import calibration_trials, plan_trials, runner_command
from cxlab.experiments.record import trial_entry
from cxlab.schedules.history import HistoryEntry
from cxlab.schedules.regression import (
    EnvironmentChange,
    Policy,
    newest_environment_change,
    regressions,
)

HOST = {"cpuModel": "AMD EPYC 7B13", "kernel": "6.1.0-18-amd64"}


def calibrating(**verify: Any) -> Any:
    spec = experiment(verify or None)
    return spec.model_copy(update={"calibration": True})


def test_the_calibration_runs_after_the_sweep_and_before_the_verification() -> None:
    spec = calibrating(duration="30s")
    sweep = sweep_outcomes(spec)
    assert trials_of(spec, entries(sweep[:-1])).trials == plan_trials(spec)
    cpu, sleep = calibration_trials(len(sweep))
    assert trials_of(spec, entries(sweep)).trials == [*plan_trials(spec), cpu]
    assert (cpu.name, sleep.name) == ("001-calcpu-sequential-w1-r1",
                                      "002-calsleep-sequential-w1-rtt1ms-r1")  # fmt: skip
    assert cpu.follows and sleep.follows, "not points of the matrix"
    ran = [*sweep, TrialOutcome(cpu, result(1, 10, 0.1, 0.1, 0.1))]
    assert trials_of(spec, entries(ran)).trials[-1] == sleep, "one at a time"
    ran.append(TrialOutcome(sleep, result(1, 900, 0.0011, 0.0011, 1e-5)))
    [check] = [t for t in trials_of(spec, entries(ran)).trials if t.verify]
    assert check.index == 3, "the verification comes after both"
    # without calibration: the sweep and the verification alone
    assert not any(t.calibrate for t in trials_of(experiment({}), entries(sweep)).trials)


def test_a_calibration_trial_runs_a_fixed_workload_with_one_sequential_worker() -> None:
    spec = calibrating()
    cpu, sleep = calibration_trials(1)
    argv = runner_command(spec, cpu, experiment="x")
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert (flags["--model"], flags["--workload"], flags["--tasks"], flags["--workers"],
            flags["--iterations"]) == ("sequential", "cpu", "5", "1", "2000000")  # fmt: skip
    argv = runner_command(spec, sleep, experiment="x")
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert (flags["--workload"], flags["--rtt"], flags["--tasks"]) == ("sleep", "1ms", "200")


def test_a_schedules_runs_calibrate_unless_the_template_says_not() -> None:
    template = {"workload": {"type": "sleep", "tasks": 1}, "models": [{"model": "asyncio"}]}
    assert run_spec(template)["calibration"] is True
    assert run_spec({**template, "calibration": None})["calibration"] is True
    assert run_spec({**template, "calibration": False})["calibration"] is False
    assert "calibration" not in template, "the template itself is left as written"
    # An apiserver default would fill the template's unset with false: the CRD has none.
    crd = yaml.safe_load((ROOT / "manifests/crds/experimentschedules.cxlab.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    field = schema["properties"]["spec"]["properties"]["experimentTemplate"]["properties"][
        "spec"]["properties"]["calibration"]  # fmt: skip
    assert field["type"] == "boolean" and "default" not in field


def _calibration_entries(node: str | None, pinned: bool, image: str | None) -> list[Any]:
    cpu, sleep = calibration_trials(4)
    made = []
    for trial, p50 in ((cpu, 0.101), (sleep, 0.00107)):
        measured = result(1, 10, p50, p50, 0.1) | {"host": HOST}
        entry = trial_entry(TrialOutcome(trial, measured, unpinned=None if pinned else "no"))
        entry.node, entry.image = node, image
        made.append(entry)
    return made


def test_the_environment_comes_from_the_calibration_entries() -> None:
    trials = calibration_trials(4)
    found = environment_of(trials, _calibration_entries("node-a", True, "sha256:abc"))
    assert found is not None
    written = found.document()
    assert written | {"cxlabVersion": None} == {
        "node": "node-a", "cpuModel": HOST["cpuModel"], "kernel": HOST["kernel"],
        "cpuManagerPolicy": "static", "runnerImage": "sha256:abc", "cxlabVersion": None,
        "calibration": {"cpuLoopSeconds": 0.101, "sleepSeconds": 0.00107},
    }  # fmt: skip
    unpinned = environment_of(trials, _calibration_entries("node-a", False, None))
    assert unpinned is not None and unpinned.cpu_manager_policy == "none"
    local = environment_of(trials, _calibration_entries(None, True, None), host="laptop")
    assert local is not None and (local.node, local.cpu_manager_policy) == ("laptop", "local")
    assert environment_of(plan_trials(experiment()), []) is None


def _documents(cpu_loop_newest: float, slower: float, node_newest: str = "node-a") -> list[Any]:
    """Five steady runs of one point, then one `slower` by that factor; calibration CPU loop
    of 100 ms (1 % apart) in the baseline, `cpu_loop_newest` in the newest."""
    history = []
    for i in range(6):
        wall = (1.0 + 0.01 * (i % 3)) * (slower if i == 5 else 1.0)
        loop = cpu_loop_newest if i == 5 else 0.100 * (1 + 0.01 * (i % 2))
        environment = {
            "node": node_newest if i == 5 else "node-a",
            "kernel": "6.1",
            "calibration": {"cpuLoopSeconds": loop, "sleepSeconds": 0.00107},
        }
        history.append({"run": f"run-{i}", "phase": "Succeeded", "environment": environment,
                        "points": [{"point": "asyncio w=10", "model": "asyncio", "n": 1,
                                    "wallSeconds": wall}]})  # fmt: skip
    return history


def _history(
    cpu_loop_newest: float, slower: float, node_newest: str = "node-a"
) -> list[HistoryEntry]:
    return [HistoryEntry.read(e) for e in _documents(cpu_loop_newest, slower, node_newest)]


def test_a_regression_whose_calibration_moved_with_it_is_the_environments() -> None:
    [found] = regressions(_history(cpu_loop_newest=0.130, slower=1.3))
    assert (found.metric, found.cause) == ("wallSeconds", "environment")
    change = newest_environment_change(_history(0.130, 1.3, node_newest="node-b"))
    assert change.moved == ("CPU loop 100 ms → 130 ms (+30.0 %)",)
    assert change.changed == ("node node-a → node-b",)
    assert change.text() == (
        "environment: CPU loop 100 ms → 130 ms (+30.0 %); node node-a → node-b"
    )


@pytest.mark.parametrize(
    ("loop", "why"),
    [(0.101, "the calibration held"), (0.105, "moved less than the minimum"),
     (0.080, "it got faster")],
)  # fmt: skip
def test_a_regression_whose_calibration_held_is_the_codes(loop: float, why: str) -> None:
    [found] = regressions(_history(cpu_loop_newest=loop, slower=1.3))
    assert found.cause == "code", why
    assert newest_environment_change(_history(loop, 1.3)).moved == ()


def test_a_changed_fingerprint_alone_is_said_but_does_not_blame_the_environment() -> None:
    history = _history(cpu_loop_newest=0.100, slower=1.3, node_newest="node-b")
    [found] = regressions(history)
    assert found.cause == "code"
    assert newest_environment_change(history) == EnvironmentChange((), ("node node-a → node-b",))


def test_runs_without_calibration_compare_as_before() -> None:
    documents = copy.deepcopy(_documents(0.130, 1.3))
    for entry in documents:
        del entry["environment"]
    history = [HistoryEntry.read(e) for e in documents]
    [found] = regressions(history)
    assert found.cause == "code" and newest_environment_change(history).text() == ""
    assert regressions(history, Policy(min_relative_change=0.5)) == []
