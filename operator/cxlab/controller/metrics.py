"""The operator's own Prometheus metrics, on a registry of its own (names follow the
runners': cxlab_ prefix, base units, _total counters)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PHASES = ("Pending", "Running", "Succeeded", "Failed")


class _PhaseCollector(Collector):
    """Experiments by phase, counted at scrape time from what the reconciler last saw."""

    def __init__(self, phases: dict[tuple[str, str], str]) -> None:
        self._phases = phases

    def collect(self) -> Iterator[Metric]:
        counts = Tally(self._phases.values())
        family = GaugeMetricFamily(
            "cxlab_operator_experiments", "Experiments by phase.", labels=["phase"]
        )
        for phase in PHASES:
            family.add_metric([phase], counts.get(phase, 0))
        yield family


class _QueueCollector(Collector):
    """The queue for capacity at scrape time: its length and its oldest wait."""

    def __init__(self, queued: dict[tuple[str, str], str]) -> None:
        self._queued = queued

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "cxlab_operator_queue_length",
            "Experiments waiting for capacity (phase Pending, condition Queued).",
            value=len(self._queued),
        )
        now = datetime.now(UTC)
        waits = [
            (now - datetime.fromisoformat(since.replace("Z", "+00:00"))).total_seconds()
            for since in list(self._queued.values())
        ]
        yield GaugeMetricFamily(
            "cxlab_operator_queue_oldest_wait_seconds",
            "How long the longest-waiting experiment has waited (0 with none waiting).",
            value=max(waits, default=0.0),
        )


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.phases: dict[tuple[str, str], str] = {}
        self.registry.register(_PhaseCollector(self.phases))
        self.queued: dict[tuple[str, str], str] = {}  # waiting experiments: since (RFC 3339)
        self.registry.register(_QueueCollector(self.queued))
        registry = self.registry
        self.trials_started = Counter(
            "cxlab_operator_trials_started", "Trial Pods created.", registry=registry
        )
        self.trials_finished = Counter(
            "cxlab_operator_trials_finished",
            "Trials recorded in status, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "cxlab_operator_reconcile_errors", "Reconcile passes that raised.", registry=registry
        )
        self.reconcile_duration = Histogram(
            "cxlab_operator_reconcile_duration_seconds",
            "Time of one reconcile pass over one experiment.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=registry,
        )
        self.scrapes = Counter(
            "cxlab_operator_trial_scrapes",
            "Reads of running trials' /metrics, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.scrape_duration = Histogram(
            "cxlab_operator_trial_scrape_duration_seconds",
            "Time to read one running trial's /metrics.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=registry,
        )
        self.queue_wait = Histogram(
            "cxlab_operator_queue_wait_seconds",
            "How long experiments waited for capacity before their first trial started.",
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200),
            registry=registry,
        )
        self.status_writes = Counter(
            "cxlab_operator_status_writes", "Status writes to experiments.", registry=registry
        )
        for outcome in ("succeeded", "failed"):
            self.trials_finished.labels(outcome)
        for outcome in ("ok", "error"):
            self.scrapes.labels(outcome)

    def serve(self, port: int) -> None:
        start_http_server(port, addr="0.0.0.0", registry=self.registry)
