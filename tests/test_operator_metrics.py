"""The operator's own metrics: names, labels, experiments by phase computed at scrape time."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from typing import Any

from helpers import program
from prometheus_client import generate_latest

from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.schedule_pass import ScheduleReconciler
from cxlab.schedules.status import ScheduleStatus


def test_experiments_by_phase_follow_what_the_reconciler_saw() -> None:
    metrics = OperatorMetrics()
    metrics.phases[("lab", "a")] = "Running"
    metrics.phases[("lab", "b")] = "Running"
    metrics.phases[("lab", "c")] = "Succeeded"
    value = metrics.registry.get_sample_value
    assert value("cxlab_operator_experiments", {"phase": "Running"}) == 2
    assert value("cxlab_operator_experiments", {"phase": "Failed"}) == 0
    del metrics.phases[("lab", "c")]
    assert value("cxlab_operator_experiments", {"phase": "Succeeded"}) == 0


def test_counters_start_at_zero_for_every_outcome_and_pass_promtool() -> None:
    metrics = OperatorMetrics()
    value = metrics.registry.get_sample_value
    assert value("cxlab_operator_trials_finished_total", {"outcome": "failed"}) == 0
    assert value("cxlab_operator_trial_scrapes_total", {"outcome": "error"}) == 0
    metrics.trials_finished.labels("succeeded").inc()
    assert value("cxlab_operator_trials_finished_total", {"outcome": "succeeded"}) == 1
    text = generate_latest(metrics.registry).decode()
    lint = subprocess.run(
        [program("promtool"), "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_queue_is_its_length_and_its_oldest_wait() -> None:
    metrics = OperatorMetrics()
    text = generate_latest(metrics.registry).decode()
    assert "cxlab_operator_queue_length 0.0" in text
    assert "cxlab_operator_queue_oldest_wait_seconds 0.0" in text
    metrics.queued[("lab", "a")] = datetime(2026, 1, 1, tzinfo=UTC)
    metrics.queued[("lab", "b")] = datetime(2099, 1, 1, tzinfo=UTC)  # a clock behind: not < 0
    metrics.queue_wait.observe(12.5)
    text = generate_latest(metrics.registry).decode()
    assert "cxlab_operator_queue_length 2.0" in text
    oldest = next(
        line for line in text.splitlines()
        if line.startswith("cxlab_operator_queue_oldest_wait_seconds ")
    )  # fmt: skip
    assert float(oldest.split()[1]) > 3600
    assert "cxlab_operator_queue_wait_seconds_count 1.0" in text


def refused_series(metrics: OperatorMetrics) -> dict[tuple[str, str], tuple[str, float]]:
    """cxlab_schedule_refused by schedule: (reason, value)."""
    (family,) = (f for f in metrics.registry.collect() if f.name == "cxlab_schedule_refused")
    return {
        (s.labels["namespace"], s.labels["schedule"]): (s.labels["reason"], s.value)
        for s in family.samples
    }


def condition(type_: str, status: str, reason: str) -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": "m"}


def test_a_schedule_is_refused_while_its_run_was_refused_or_its_spec_cannot_run() -> None:
    metrics = OperatorMetrics()
    statuses = {
        "ok": [condition("Ready", "True", "Scheduling")],
        "created": [condition("RunRefused", "False", "RunCreated")],
        "refused": [
            condition("Ready", "True", "Scheduling"),
            condition("RunRefused", "True", "RunRefused"),
        ],
        "invalid": [condition("Ready", "False", "InvalidSpec")],
        "new": [],
    }
    for name, conditions in statuses.items():
        status = {"conditions": conditions} if conditions else {}
        metrics.observe_schedule("lab", name, ScheduleStatus.read(status))
    assert refused_series(metrics) == {
        ("lab", "ok"): ("", 0.0),
        ("lab", "created"): ("", 0.0),
        ("lab", "refused"): ("RunRefused", 1.0),
        ("lab", "invalid"): ("InvalidSpec", 1.0),
        ("lab", "new"): ("", 0.0),
    }


class StatusOnlyKube:
    """A schedule's status writes, all accepted: what _reject needs of Kube."""

    def __init__(self) -> None:
        self.written: list[ScheduleStatus] = []

    def replace_schedule_status(
        self, namespace: str, name: str, version: str | None, status: ScheduleStatus
    ) -> str:
        self.written.append(status)
        return str(len(self.written) + 1)


def test_a_schedule_whose_spec_cannot_run_is_counted_refused_and_stays_so() -> None:
    # A pass over a spec the schema let through but the operator cannot run (an unknown time
    # zone) writes Ready False InvalidSpec and no run: the gauge says so, on this pass and on
    # a restarted operator's first pass, which finds the condition already written.
    kube: Any = StatusOnlyKube()
    metrics = OperatorMetrics()
    reconciler = ScheduleReconciler(kube, metrics, lambda: datetime(2026, 1, 1, tzinfo=UTC))
    body: dict[str, Any] = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ExperimentSchedule",
        "metadata": {"name": "tick", "namespace": "lab", "uid": "u", "generation": 1,
                     "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"schedule": "@every 10s", "timeZone": "Mars/Olympus", "experimentTemplate": {
            "spec": {"workload": {"type": "sleep", "tasks": 1, "rtt": "50ms"},
                     "models": [{"model": "asyncio"}]}}},
    }  # fmt: skip
    events: list[tuple[str, str, str]] = []
    reconciler.reconcile(body, [], lambda *event: events.append(event))
    assert [reason for _, reason, _ in events] == ["InvalidSpec"]
    assert refused_series(metrics) == {("lab", "tick"): ("InvalidSpec", 1.0)}
    restarted = OperatorMetrics()
    again = ScheduleReconciler(kube, restarted, reconciler.clock)
    again.reconcile({**body, "status": kube.written[-1].document()}, [], lambda *e: None)
    assert len(kube.written) == 1  # nothing new to write
    assert refused_series(restarted) == {("lab", "tick"): ("InvalidSpec", 1.0)}
