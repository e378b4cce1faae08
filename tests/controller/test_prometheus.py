"""Trial usage from Prometheus (pure parts): the queries, and that absent data or a failed
query is reported as missing, never as zero."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cxlab.controller.prometheus import PrometheusClient, TrialWindow, trial_queries, trial_usage

START = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
WINDOW = TrialWindow("ns", "exp-t000-a1", START, START + timedelta(seconds=4.2))


def test_queries_select_the_trial_container_over_its_window() -> None:
    queries = trial_queries(WINDOW)
    assert set(queries) == {"cpuThrottledRatio", "memoryWorkingSetBytes"}
    for promql in queries.values():
        assert 'namespace="ns",pod="exp-t000-a1",container="runner"' in promql
        assert 'namespace="ns",pod="exp-t000-a1",container=""' in promql  # Pod-level fallback
        assert "[5s]" in promql  # 4.2 s, rounded up
    assert "container_cpu_cfs_throttled_periods_total" in queries["cpuThrottledRatio"]
    assert "container_memory_working_set_bytes" in queries["memoryWorkingSetBytes"]


def test_found_values_and_missing_ones() -> None:
    answers = {"cpuThrottledRatio": None, "memoryWorkingSetBytes": 12345678.0}
    by_query = {q: answers[name] for name, q in trial_queries(WINDOW).items()}
    usage = trial_usage(WINDOW, lambda q, at: by_query[q]).document()
    assert usage == {"windowSeconds": 5, "memoryWorkingSetBytes": 12345678,
                     "missing": ["cpuThrottledRatio"]}  # fmt: skip


def test_a_failed_query_is_reported_not_raised() -> None:
    def broken(query: str, at: datetime) -> float | None:
        raise OSError("connection refused")

    usage = trial_usage(WINDOW, broken).document()
    assert usage["missing"] == ["cpuThrottledRatio", "memoryWorkingSetBytes"]
    assert "connection refused" in usage["error"]


def test_the_client_times_out_quickly_on_nothing_listening() -> None:
    client = PrometheusClient("http://127.0.0.1:9/", timeout_seconds=0.5)
    with pytest.raises(OSError):
        client.instant("up", START)
