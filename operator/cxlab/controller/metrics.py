"""The operator's own Prometheus metrics, on a registry of its own (names follow the
runners': cxlab_ prefix, base units, _total counters)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

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


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.phases: dict[tuple[str, str], str] = {}
        self.registry.register(_PhaseCollector(self.phases))
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
        self.status_writes = Counter(
            "cxlab_operator_status_writes", "Status writes to experiments.", registry=registry
        )
        for outcome in ("succeeded", "failed"):
            self.trials_finished.labels(outcome)
        for outcome in ("ok", "error"):
            self.scrapes.labels(outcome)

    def serve(self, port: int) -> None:
        start_http_server(port, addr="0.0.0.0", registry=self.registry)
