"""The record step of an experiment pass: the status after the pass's decision (its trials and
entries as decide planned them: Decision.planned), written only against the version the pass
read, the full entries and summary it points at stored in ConfigMaps first
(cxlab.experiments.results_store). It plans nothing and reads no Result back (it asks only
Prometheus, when one is configured, for its view of the trials it records)."""

from __future__ import annotations

from cxlab.config import OperatorConfig
from cxlab.controller.kube import Kube
from cxlab.controller.live import LiveReads
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import Pass
from cxlab.controller.prometheus import FIELDS, PrometheusClient, TrialWindow, trial_usage
from cxlab.experiments.decide import Decision
from cxlab.experiments.record import Live, build_status
from cxlab.experiments.results_store import (
    chunk_of,
    compact,
    compact_summary,
    config_map,
    summary_config_map,
)
from cxlab.experiments.spec import spec_json
from cxlab.experiments.status import (
    ExperimentStatus,
    Phase,
    PrometheusUsage,
    RunningTrial,
    TrialEntry,
    prometheus_usage,
)


class Recorder:
    def __init__(
        self, kube: Kube, config: OperatorConfig, metrics: OperatorMetrics, live: LiveReads
    ) -> None:
        self.kube = kube
        self.config = config
        self.metrics = metrics
        self.live = live

    def record(
        self, state: Pass, decision: Decision, running: list[RunningTrial]
    ) -> ExperimentStatus:
        """Write the status after `decision`, whose finished entries are new in this pass
        (their Results to ConfigMaps first); returns the status as written (or as it would
        be, when nothing changed worth a write)."""
        fresh, old = decision.finished, state.status
        for entry in fresh:
            entry.metrics_scraped = entry.name in state.memory.scraped
            entry.prometheus = self._prometheus_usage(entry, state)
        new = self._status_after(state, decision, running)
        if state.service_plan is not None:  # spec.service: each variant's copy
            new.service_variants = state.service_plan.statuses
        # read before admission, kept after it: the queue holds it until the end
        new.service_copy = state.service_copy or state.status.service_copy
        self.metrics.phases[state.key] = new.phase or Phase.PENDING
        if new.finished:  # the verdict from the pass that finishes it, not the one after
            self.metrics.observe_objectives(*state.key, new.objectives)
        # Results leave status for ConfigMaps: those of this pass's trials, and any still
        # inline (an older operator's), written before the status that points at them.
        positions = state.positions()
        moving = {e.name for e in fresh} | {e.name for e in old.entries if e.full_only}
        full = [e for e in new.entries if e.name in moving and e.name in positions and e.full_only]
        new.trials = [
            compact(e, state.name, positions[e.name]) if e.name in positions else e
            for e in new.entries
        ]
        summary = new.summary  # the last pass's: it goes beside the Results
        if summary:
            new.summary = compact_summary(summary, state.name)
        # Each document made once a pass (the serialisation of a hundred entries is most of
        # a pass that writes nothing): the status read is its own document as it came.
        document = new.document()
        if self.live.worth_writing(state.body.get("status") or {}, document, state.memory):
            self._store(state, full, positions)
            if summary:
                metadata = state.body["metadata"]
                self.kube.add_to_config_map(
                    summary_config_map(state.name, state.namespace, metadata["uid"], summary)
                )
            state.written = self.kube.write_status(
                state.namespace, state.name, document, state.version
            )
            self.metrics.status_writes.inc()
        for entry in fresh:
            self.metrics.trials_finished.labels(entry.phase.lower()).inc()
            if entry.service is not None:
                line = entry.variant or entry.model
                self.metrics.service.setdefault(state.key, {})[line] = entry.service
        return new

    def _status_after(
        self, state: Pass, decision: Decision, running: list[RunningTrial]
    ) -> ExperimentStatus:
        planned = decision.planned  # full entries once every trial has ended: the summary's
        assert planned is not None, "decide plans what follows every decision it hands on"
        admission = state.admission
        return build_status(
            unverified=planned.unverified,
            spec=state.spec,
            trials=planned.trials,
            entries=planned.entries,
            live=Live(
                running=running,
                attempts=decision.attempts,
                starting=bool(decision.running or decision.create),
                failure=decision.failure,
                failure_reason=decision.failure_reason,
                waiting_for_target=decision.waiting_for_target,
                queue=admission.place,
                queued_seconds=admission.waited,
            ),
            old=state.status,
            started_spec=spec_json(state.body.get("spec") or {}),
            generation=state.body["metadata"].get("generation", 1),
            now=state.observed.now,
            spec_changed=state.spec_changed,
        )

    def _store(self, state: Pass, entries: list[TrialEntry], positions: dict[str, int]) -> None:
        """Add these full entries to their chunks: one merge patch per chunk touched, the
        keys of the entries only (the chunk's others stay as they are)."""
        uid = state.body["metadata"]["uid"]
        by_chunk: dict[int, list[TrialEntry]] = {}
        for entry in entries:
            by_chunk.setdefault(chunk_of(positions[entry.name]), []).append(entry)
        for chunk, mine in sorted(by_chunk.items()):
            self.kube.add_to_config_map(config_map(state.name, state.namespace, uid, chunk, mine))

    def _prometheus_usage(self, entry: TrialEntry, state: Pass) -> PrometheusUsage | None:
        """The trial container's CPU throttling and peak working set over its Pod's life,
        when a Prometheus is configured; whatever goes wrong, the reconcile goes on."""
        if not self.config.prometheus_url:
            return None
        pods = state.observed.pods
        pod = next((p for p in pods if p.trial == entry.name and p.attempt == entry.attempts), None)
        if pod is not None and pod.host:
            why = "the trial ran as a process in a trial host: it has no container of its own"
            return prometheus_usage(None, {}, list(FIELDS), why)
        if pod is None or pod.started is None or pod.finished is None:
            why = "the trial's Pod has no start and end time"
            return prometheus_usage(None, {}, list(FIELDS), why)
        client = PrometheusClient(
            self.config.prometheus_url, self.config.prometheus_timeout_seconds
        )
        window = TrialWindow(state.namespace, pod.name, pod.started, pod.finished)
        return trial_usage(window, client.instant)
