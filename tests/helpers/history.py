"""Runs of a schedule as history entries, at set times and wall times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cxlab.analysis.outcome import TrialOutcome
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.resource import parse_experiment
from cxlab.local.backend import experiment_document, local_status
from cxlab_contract.histogram import build
from helpers.results import MIB

START = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)


def document(walls: list[float], when: datetime, rtts: list[str] | None = None) -> dict[str, Any]:
    """A finished run: every trial's wall time from `walls`, in turn."""
    made = experiment(rtts or ["100ms"])
    trials = plan_trials(made.spec)
    outcomes = [TrialOutcome(t, result(walls[i % len(walls)])) for i, t in enumerate(trials)]
    status = local_status(made, trials, outcomes, set(), None, when)
    return experiment_document(made, status)


def experiment(rtts: list[str], capacity: bool = True) -> Any:
    spec: dict[str, Any] = {
        "workload": {"type": "sleep", "tasks": 100, "rtts": rtts},
        "models": [{"model": "asyncio", "workers": [10, 0]}],
        "repetitions": 3,
    }
    if capacity:
        spec["capacity"] = {"target": {"ratePerSecond": 500, "latency": {"max": "1s"}}}
    return parse_experiment({"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
                             "metadata": {"name": "trend"}, "spec": spec})  # fmt: skip


def result(wall: float, rss: int = 40 * MIB) -> dict[str, Any]:
    return {
        "workers": 10, "tasks": 100, "tasksOk": 100, "tasksFailed": 0, "wallSeconds": wall,
        "cpuUserSeconds": 0.02, "cpuSystemSeconds": 0.01, "cpuPercent": 3.0 / wall,
        "peakRssBytes": rss, "baselineRssBytes": 20 * MIB, "efficiency": 1.0 / wall,
        "throughputPerSecond": 100 / wall, "voluntaryContextSwitches": 5,
        "involuntaryContextSwitches": 1, "cpus": [1],
        "latencySeconds": {"p50": 0.1, "p90": 0.1, "p99": wall / 10, "max": wall / 10},
        "latencyHistogram": build([0.1] * 99 + [wall / 10]), "arrival": None,
    }  # fmt: skip
