"""The operator's own metrics: names, labels, experiments by phase computed at scrape time."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from typing import Any

from helpers import ApiserverBase, program
from helpers.metrics import judged
from prometheus_client import generate_latest

from cxlab.config import OperatorConfig
from cxlab.controller.experiment_pass import Reconciler
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.schedule_pass import ScheduleReconciler
from cxlab.experiments.status import ExperimentStatus, Phase
from cxlab.schedules.status import ScheduleStatus


def assert_promtool_passes(metrics: OperatorMetrics) -> None:
    """The registry's exposition passes Prometheus' own metrics lint."""
    text = generate_latest(metrics.registry).decode()
    lint = subprocess.run(
        [program("promtool"), "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


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
    assert_promtool_passes(metrics)


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


def objective_series(metrics: OperatorMetrics) -> dict[tuple[str, str, str], tuple[float, ...]]:
    """(met, inconclusive) by (namespace, name, objective); met absent: one value."""
    found: dict[tuple[str, str, str], tuple[float, ...]] = {}
    for metric in ("cxlab_experiment_objective_met", "cxlab_experiment_objective_inconclusive"):
        (family,) = (f for f in metrics.registry.collect() if f.name == metric)
        for sample in family.samples:
            key = (sample.labels["namespace"], sample.labels["name"], sample.labels["objective"])
            found[key] = (*found.get(key, ()), sample.value)
    return found


def test_objectives_are_met_1_broken_0_and_inconclusive_a_series_of_their_own() -> None:
    metrics = OperatorMetrics()
    metrics.observe_objectives("lab", "a", [
        judged("p99-fast", "Met"), judged("lean", "Broken"), judged("near", "Inconclusive"),
        # unnamed objectives of one metric and bound (other scopes): the worst speaks for all
        judged("failure ratio ≤ 0", "Met"), judged("failure ratio ≤ 0", "Broken"),
        judged("failure ratio ≤ 0", "Inconclusive"),
    ])  # fmt: skip
    metrics.observe_objectives("lab", "none", None)
    assert objective_series(metrics) == {
        ("lab", "a", "p99-fast"): (1.0, 0.0),
        ("lab", "a", "lean"): (0.0, 0.0),
        ("lab", "a", "near"): (1.0,),  # no met series: only its inconclusive 1
        ("lab", "a", "failure ratio ≤ 0"): (0.0, 0.0),
    }
    value = metrics.registry.get_sample_value
    near = {"namespace": "lab", "name": "a", "objective": "near"}
    assert value("cxlab_experiment_objective_met", near) is None
    assert value("cxlab_experiment_objective_inconclusive", near) == 1
    assert_promtool_passes(metrics)


def test_a_finished_experiments_pass_sets_its_objectives_and_forgetting_it_drops_them() -> None:
    # A finished experiment's pass only tidies up (no Pods here, no TTL): no apiserver calls.
    metrics = OperatorMetrics()
    reconciler = Reconciler(ApiserverBase(), OperatorConfig(), metrics)  # type: ignore[arg-type]
    status = ExperimentStatus(phase=Phase.SUCCEEDED, objectives=[judged("p99-fast", "Broken")])
    body = {"metadata": {"namespace": "lab", "name": "a"}, "spec": {}, "status": status.document()}
    reconciler.reconcile(body, [], lambda *_: None)
    assert objective_series(metrics) == {("lab", "a", "p99-fast"): (0.0, 0.0)}
    reconciler.forget("lab", "a")
    assert objective_series(metrics) == {}


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


def test_the_services_figures_per_variant_with_no_series_where_not_measured() -> None:
    from cxlab.analysis.service_figures import ServiceFigures

    metrics = OperatorMetrics()
    metrics.service[("lab", "sync")] = {
        "sync-2 / asyncio": ServiceFigures(
            cpu_seconds=1.718, cpu_per_request_seconds=0.0047, peak_memory_bytes=73_800_000,
            restarts=0, oom_kills=0, samples=15,
        ),
        "sync-4 / asyncio": ServiceFigures(restarts=1, samples=2),  # a restart: CPU unknown
    }  # fmt: skip
    value = metrics.registry.get_sample_value
    two = {"namespace": "lab", "name": "sync", "variant": "sync-2 / asyncio"}
    four = {**two, "variant": "sync-4 / asyncio"}
    assert value("cxlab_service_cpu_seconds", two) == 1.718
    assert value("cxlab_service_cpu_per_request_seconds", two) == 0.0047
    assert value("cxlab_service_peak_memory_bytes", two) == 73_800_000
    assert value("cxlab_service_oom_kills", two) == 0
    assert value("cxlab_service_cpu_throttled_ratio", two) is None  # no CPU limit
    assert value("cxlab_service_cpu_seconds", four) is None
    assert value("cxlab_service_restarts", four) == 1
    assert_promtool_passes(metrics)
