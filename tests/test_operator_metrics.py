"""The operator's own metrics: names, labels, experiments by phase computed at scrape time."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime

from helpers import program
from prometheus_client import generate_latest

from cxlab.controller.metrics import OperatorMetrics


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
