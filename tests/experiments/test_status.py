"""The typed status: what every status written must look like, and the CRD schema made from
it (pure; the cluster tests write real statuses through the same check)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
import yaml
from helpers import ROOT

from cxlab.analysis.knees import Knee, RateKnee
from cxlab.analysis.point import MeasuredPoint, Point
from cxlab.analysis.recommend import NoRateHeld, Recommendation
from cxlab.analysis.summary import Summary
from cxlab.conditions import set_condition
from cxlab.crd import CRD_PATH, status_schema
from cxlab.experiments.record import rejected_status
from cxlab.experiments.status import (
    ExperimentStatus,
    checked,
    prometheus_usage,
    running_entry,
)
from cxlab.shape import ONE_OBJECT, Shape


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
        "summary": {"tolerance": 0.1, "recommendations": []},
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


# --- status.summary: typed, one object per kind in the CRD --------------------------------------

GOLDEN_STATUS = ROOT / "tests" / "golden" / "status.json"


def test_each_kind_of_point_knee_and_recommendation_reads_back_as_itself() -> None:
    written = json.loads(GOLDEN_STATUS.read_text())["summary"]
    summary = Summary.read(written)
    assert summary.points is not None and summary.knees is not None
    assert [type(p) for p in summary.points] == [MeasuredPoint, Point, MeasuredPoint]
    assert [type(k) for k in summary.knees] == [Knee, Knee]
    [pick] = summary.recommendations
    assert isinstance(pick, Recommendation) and pick.tied_with and pick.tied_with[0].workers == 0
    assert summary.document() == written
    rate = {
        "variant": "asyncio", "model": "asyncio", "gomaxprocs": None, "rttSeconds": None,
        "pods": 1, "workers": 10, "effectiveWorkers": 10, "workersStarted": None, "pool": None,
        "ratePerSecond": None, "highestMeasured": False, "criterion": "p99",
        "latencyP99Seconds": 0.2, "cpuPercent": 50.0, "peakRssBytes": 1.0, "noisy": False,
    }  # fmt: skip
    none_held = {"rttSeconds": None, "ratePerSecond": None, "text": "Overall: none held"}
    arrival = Summary.read({"tolerance": 0.1, "points": [], "knees": [rate],
                            "recommendations": [none_held]})  # fmt: skip
    assert arrival.knees is not None and isinstance(arrival.knees[0], RateKnee)
    assert isinstance(arrival.recommendations[0], NoRateHeld)
    assert arrival.document()["knees"] == [rate]  # null where it is null, as written
    assert arrival.document()["recommendations"] == [none_held]


def test_a_summary_key_no_kind_declares_is_refused() -> None:
    written = json.loads(GOLDEN_STATUS.read_text())["summary"]
    written["points"][1]["wallSeconds"] = {"mean": 1.0, "stddev": 0.0, "cv": 0.0}  # half a kind
    with pytest.raises(ValueError):
        Summary.read(written)
    written = json.loads(GOLDEN_STATUS.read_text())["summary"]
    written["knees"][0]["criterion"] = "p99"  # a knee in the workers has no criterion
    with pytest.raises(ValueError):
        Summary.read(written)


def test_the_crd_types_the_summary_one_object_per_kind_without_defaults() -> None:
    summary = status_schema()["properties"]["summary"]
    assert "x-kubernetes-preserve-unknown-fields" not in summary  # pruned and checked now
    points = summary["properties"]["points"]["items"]
    # required where every kind requires it: a point not run has no measurements
    assert set(points["required"]) == {"variant", "model", "workers", "repetitions",
                                       "failedTrials"}  # fmt: skip
    assert {"wallSeconds", "achievedRatePerSecond"} <= set(points["properties"])
    assert points["properties"]["syscalls"]["nullable"] is True
    knees = summary["properties"]["knees"]["items"]["properties"]
    assert knees["ratePerSecond"]["nullable"] is True and "bestWorkers" in knees
    recommendations = summary["properties"]["recommendations"]["items"]
    assert recommendations["required"] == ["text"]
    rate = recommendations["properties"]["ratePerSecond"]
    assert (rate["type"], rate["nullable"]) == ("number", True)
    # the apiserver would fill a default of one kind (noisy: false) into another kind's object
    for kinds in (points, summary["properties"]["knees"]["items"], recommendations):
        assert [name for name, field in kinds["properties"].items() if "default" in field] == []


class _Seconds(Shape):
    value: float


class _Text(Shape):
    value: str


class _Either(Shape):
    one: Annotated[_Seconds | _Text, ONE_OBJECT]


def test_two_kinds_typing_one_field_differently_are_refused() -> None:
    with pytest.raises(TypeError, match="value: two kinds of one union type it differently"):
        _Either.model_json_schema(by_alias=True)
