"""The typed status: what every status written must look like, and the CRD schema made from
it (pure; the cluster tests write real statuses through the same check)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from cxlab.conditions import set_condition
from cxlab.crd import CRD_PATH, status_schema
from cxlab.experiments.record import rejected_status
from cxlab.experiments.status import (
    ExperimentStatus,
    checked,
    prometheus_usage,
    running_entry,
)


def entry(**changes: Any) -> dict[str, Any]:
    base = {
        "name": "asyncio-w10-rtt100ms-r1", "model": "asyncio", "variant": "asyncio",
        "workers": 10, "gomaxprocs": None, "rttSeconds": 0.1, "repetition": 1,
        "phase": "Succeeded", "attempts": 1, "node": "vm", "metricsScraped": True,
        "prometheus": {"windowSeconds": 3, "missing": ["cpuThrottledRatio"],
                       "memoryWorkingSetBytes": 41_000_000},
        "result": {"wallSeconds": 0.2, "gomaxprocs": None},
    }  # fmt: skip
    return base | changes


def status(**changes: Any) -> dict[str, Any]:
    moment = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    conditions = set_condition(
        [], "Complete", True, "AllTrialsSucceeded", "1 of 1", generation=1, now=moment
    )
    base = {
        "phase": "Succeeded", "observedGeneration": 1, "startTime": "2026-11-23T10:00:00Z",
        "completionTime": "2026-11-23T10:01:00Z", "best": "asyncio, 10 workers (0.2 s)",
        "startedSpec": "{}", "attempts": {},
        "progress": {"trialsTotal": 1, "trialsDone": 1, "trialsFailed": 0, "display": "1/1",
                     "running": [{"trial": "t", "pod": "p", "tasks": 5, "tasksDone": 2,
                                  "elapsedSeconds": 1.5}]},
        "conditions": [c.document() for c in conditions], "trials": [entry()],
        "summary": {"recommendations": []},
    }  # fmt: skip
    return base | changes


def test_a_full_status_passes_unchanged() -> None:
    whole = status()
    assert checked(whole) is whole


@pytest.mark.parametrize(
    "bad",
    [
        status(phase="Done"),  # not a phase
        status(progess={}),  # a key the schema does not have: the apiserver would prune it
        status(best=None),  # null where the schema says no nullable: the apiserver refuses it
        status(trials=[entry(message=None)]),
        status(trials=[entry(phase="Running")]),  # a trial entry is written once it ended
        status(trials=[{k: v for k, v in entry().items() if k != "workers"}]),  # required
        status(conditions=[{"type": "Complete", "status": "yes"}]),
    ],
)
def test_a_status_the_schema_refuses_is_refused_before_it_is_written(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        checked(bad)


def test_the_crd_status_schema_is_the_typed_status() -> None:
    crd = yaml.safe_load(CRD_PATH.read_text())
    written = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert written == status_schema()
    fields = set(ExperimentStatus.model_json_schema(by_alias=True)["properties"])
    assert set(written["properties"]) == fields
    trial = written["properties"]["trials"]["items"]
    assert trial["properties"]["gomaxprocs"]["nullable"] is True  # written as null
    assert "nullable" not in trial["properties"]["message"]  # left out, never null
    assert set(trial["required"]) == {"name", "model", "workers", "repetition", "phase"}


def test_a_rejected_spec_fails_at_once_naming_why() -> None:
    moment = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    status = rejected_status(
        ExperimentStatus(), "spec.workload.rtt: too long", generation=2, now=moment
    ).document()
    assert status["phase"] == "Failed" and status["completionTime"] == "2026-11-23T10:00:00Z"
    (failed,) = status["conditions"]
    assert failed["reason"] == "InvalidSpec" and failed["observedGeneration"] == 2
    assert failed["message"] == "the spec cannot run: spec.workload.rtt: too long"


def test_running_and_prometheus_entries_are_built_from_the_typed_shape() -> None:
    assert running_entry("t", "p", 100, None, 2.345).document() == {
        "trial": "t", "pod": "p", "tasks": 100, "elapsedSeconds": 2.3,
    }  # fmt: skip
    assert running_entry("t", "p", 100, 40, None).document()["tasksDone"] == 40
    usage = prometheus_usage(5, {"cpuThrottledRatio": 0.0}, ["memoryWorkingSetBytes"])
    assert usage.document() == {
        "cpuThrottledRatio": 0.0, "windowSeconds": 5, "missing": ["memoryWorkingSetBytes"],
    }  # fmt: skip
    assert prometheus_usage(None, {}, [], "no Pod times").document() == {"error": "no Pod times"}
