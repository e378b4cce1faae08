"""One reconcile pass over one experiment, as the schedule's pass is: gather (its status, its
Pods from the index, the queue) → decide (pure: cxlab.experiments.decide) → record (the
status written, the Results it points at stored first) → act (Pods created, released,
deleted; events). In that order, so a crash at any point loses nothing. A pass says when it
wants the next one if nothing changes before (PassReport.recheck_seconds): the operator runs
passes on changes (cxlab.controller.wakes), not on a clock."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from cxlab.barrier import release
from cxlab.config import OperatorConfig
from cxlab.controller.admission import Admission, NodeReader, admit, impossible, kueue_place
from cxlab.controller.kube import Kube, PodRefused, StaleStatus
from cxlab.controller.live import LiveReads
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.prometheus import FIELDS, PrometheusClient, TrialWindow, trial_usage
from cxlab.experiments.decide import Decision, Observed, decide, next_deadline, pod_refused
from cxlab.experiments.plan import Trial, plan_trials, pod_indexes
from cxlab.experiments.pod_view import PodPhase, PodView, view_pod
from cxlab.experiments.pods import (
    COMPONENT_TARGET,
    build_target_pod,
    build_trial_pod,
    target_pod_name,
    trial_pod_name,
)
from cxlab.experiments.queue import Candidate, candidate_created, spec_of
from cxlab.experiments.record import Live, build_status, rejected_status
from cxlab.experiments.results_store import (
    chunk_of,
    compact,
    compact_summary,
    config_map,
    entries_of,
    results_selector,
    summary_config_map,
)
from cxlab.experiments.spec import ExperimentSpec, SpecError, spec_json
from cxlab.experiments.status import (
    ExperimentStatus,
    Phase,
    PrometheusUsage,
    RunningTrial,
    TrialEntry,
    prometheus_usage,
)
from cxlab.times import now
from cxlab_contract.durations import parse_duration

# A pass refused twice for a stale status (someone else writes the object) tries this soon.
STALE_RETRY_SECONDS = 0.5
# A Pod this process created and the index does not have yet is taken as created this long
# (its watch event is on its way); then it is read from the apiserver.
CREATED_TRUST_SECONDS = 10.0
# A start barrier whose release failed (a runner not answering yet) is tried again this soon.
RELEASE_RETRY_SECONDS = 1.0

Body = dict[str, Any]  # the experiment as the apiserver has it
# (type Normal|Warning, reason, message) → a Kubernetes Event on the experiment
EventSink = Callable[[str, str, str], None]


@dataclass
class PassReport:
    """What one pass did, for the loop that runs them."""

    # Look again after this long even if nothing changes (None: no deadline of its own).
    recheck_seconds: float | None = None
    # The object as the pass's status write returned it (None: nothing written).
    written: Body | None = None
    # Finished and tidied: only a change (or its TTL) can call for another pass.
    idle: bool = False


@dataclass
class Pass:
    """One pass's state: what it read, and what it has written so far."""

    body: Body
    status: ExperimentStatus  # as read: the old status the new one is built on
    spec: ExperimentSpec
    spec_changed: bool
    observed: Observed
    memory: Memory
    admission: Admission
    written: Body | None = None

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def version(self) -> str | None:
        version: str | None = (self.written or self.body)["metadata"].get("resourceVersion")
        return version

    @property
    def target(self) -> PodView | None:
        return next((p for p in self.observed.pods if p.component == COMPONENT_TARGET), None)

    def positions(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.observed.trials)}


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        metrics: OperatorMetrics,
        clock: Callable[[], datetime] = now,
    ) -> None:
        self.kube = kube
        self.config = config
        self.metrics = metrics
        self.clock = clock  # every time written to status comes from here
        self.memory: dict[tuple[str, str], Memory] = {}
        self.nodes = NodeReader(kube.list_nodes)
        self.live = LiveReads(config, metrics)

    def reconcile(
        self,
        body: Body,
        indexed: Iterable[PodView],
        event: EventSink,
        queue: Iterable[Candidate] = (),
    ) -> PassReport:
        """One pass; `queue` is every unfinished experiment the operator watches (the queue
        for capacity), with the nodes its trial Pods run on. A pass that decided from a stale
        status (another write came first) writes nothing and acts on nothing; it is run
        again at once on the object read afresh."""
        started = time.monotonic()
        pods, waiting = list(indexed), list(queue)
        try:
            try:
                return self._reconcile(body, pods, event, waiting)
            except StaleStatus as stale:
                logging.getLogger(__name__).info("%s: reading it again", stale)
                metadata = body["metadata"]
                fresh = self.kube.get_experiment(metadata["namespace"], metadata["name"])
                try:
                    return self._reconcile(fresh, pods, event, waiting) if fresh else PassReport()
                except StaleStatus as again:  # a busy object: the loop's next pass, soon
                    logging.getLogger(__name__).info("%s again: next pass", again)
                    return PassReport(recheck_seconds=STALE_RETRY_SECONDS)
        except Exception:
            self.metrics.reconcile_errors.inc()
            raise
        finally:
            self.metrics.reconcile_duration.observe(time.monotonic() - started)

    def _reconcile(
        self, body: Body, pods: list[PodView], event: EventSink, queue: list[Candidate]
    ) -> PassReport:
        status = ExperimentStatus.read(body.get("status"))
        metadata = body["metadata"]
        key = (metadata["namespace"], metadata["name"])
        moment = self.clock()
        if status.finished:
            assert status.phase is not None
            self.metrics.phases[key] = status.phase
            return PassReport(self._after_finish(body, status, pods, moment), idle=True)
        try:
            spec = spec_of(body)
        except (SpecError, ValidationError, ValueError) as error:
            return PassReport(written=self._reject(body, status, str(error), event, moment))
        state = self._gather(body, status, spec, pods, queue, moment)
        decision = self._decide(state)
        running = self.live.running(state.name, decision, spec.workload.tasks, state.memory, moment)
        recorded = self._record(state, decision, decision.finished, running, status)
        return self._act(state, decision, recorded, event)

    # ---- gather ----

    def _gather(
        self,
        body: Body,
        status: ExperimentStatus,
        spec: ExperimentSpec,
        indexed: list[PodView],
        queue: list[Candidate],
        moment: datetime,
    ) -> Pass:
        """What this pass decides from: its status (compact entries, their Results in
        ConfigMaps), its Pods (the index's, and those the index has not caught up with), and
        where it stands in the queue while it has started nothing."""
        metadata = body["metadata"]
        memory = self.memory.setdefault((metadata["namespace"], metadata["name"]), Memory())
        trials = plan_trials(spec)
        recorded = {e.name: e for e in status.entries}
        attempts = dict(status.attempts or {})
        pods = indexed + self._unindexed(
            metadata["namespace"], metadata["name"], trials, recorded, attempts, indexed, memory
        )
        target = next((p for p in pods if p.component == COMPONENT_TARGET), None)
        observed = Observed(
            spec, trials, recorded, attempts, pods, moment,
            target_ready=bool(target and target.ready and target.ip),
        )  # fmt: skip
        admitted = status.phase == Phase.RUNNING or bool(recorded) or any(attempts.values())
        why_impossible = impossible(spec, observed, admitted, self.nodes)
        observed = replace(observed, capacity_exists=why_impossible is None)
        admission = Admission()
        if not admitted:
            admission = admit(body, observed, why_impossible, queue, self.nodes)
        current = spec_json(body.get("spec") or {})
        spec_changed = (status.started_spec or current) != current
        return Pass(body, status, spec, spec_changed, observed, memory, admission)

    def _unindexed(
        self,
        namespace: str,
        name: str,
        trials: list[Trial],
        recorded: dict[str, TrialEntry],
        attempts: dict[str, int],
        pods: list[PodView],
        memory: Memory,
    ) -> list[PodView]:
        """Pods counted in status but not (yet) in the index — just created, or the index is
        still filling after a restart: read them, so they are not taken for lost. One this
        process created moments ago is taken as created (its event is on its way)."""
        seen = {p.name for p in pods}
        moment = time.monotonic()
        memory.created = {
            n: (at, view)
            for n, (at, view) in memory.created.items()
            if n not in seen and moment - at < CREATED_TRUST_SECONDS
        }
        found = []
        for trial in trials:
            attempt = attempts.get(trial.name, 0)
            if not attempt or trial.name in recorded:
                continue
            for index in pod_indexes(trial):
                pod_name = trial_pod_name(name, trial, attempt, index)
                if pod_name in seen:
                    continue
                if pod_name in memory.created:
                    found.append(memory.created[pod_name][1])
                elif pod := self.kube.get_pod(namespace, pod_name):
                    found.append(view_pod(pod))
        return found

    # ---- decide ----

    def _decide(self, state: Pass) -> Decision:
        """The queue's ruling while it waits (or fails before any Pod), else the decision on
        its trials; an experiment Kueue admits stands in Kueue's queue while its Pods are
        gated."""
        decision = state.admission.ruling or decide(state.observed, self.config)
        if state.spec.queue_name and not state.observed.recorded:
            state.admission = kueue_place(
                state.body, state.status, state.spec, decision, state.observed.now
            )
        return decision

    # ---- record ----

    def _record(
        self,
        state: Pass,
        decision: Decision,
        fresh: list[TrialEntry],
        running: list[RunningTrial],
        old: ExperimentStatus,
    ) -> ExperimentStatus:
        """Write the status after `decision`, whose `fresh` entries are new in this pass (their
        Results to ConfigMaps first); returns the status as written (or as it would be, when
        nothing changed worth a write)."""
        for entry in fresh:
            entry.metrics_scraped = entry.name in state.memory.scraped
            entry.prometheus = self._prometheus_usage(entry, state)
        new = self._status_after(state, decision, running, old)
        self.metrics.phases[state.key] = new.phase or Phase.PENDING
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
        if self.live.worth_writing(old, new, state.memory):
            self._store(state, full, positions)
            if summary:
                metadata = state.body["metadata"]
                self.kube.add_to_config_map(
                    summary_config_map(state.name, state.namespace, metadata["uid"], summary)
                )
            state.written = self.kube.write_status(state.namespace, state.name, new, state.version)
            self.metrics.status_writes.inc()
        for entry in fresh:
            self.metrics.trials_finished.labels(entry.phase.lower()).inc()
        return new

    def _status_after(
        self, state: Pass, decision: Decision, running: list[RunningTrial], old: ExperimentStatus
    ) -> ExperimentStatus:
        entries = [*state.observed.recorded.values(), *decision.finished]
        if len(entries) >= len(state.observed.trials):  # the last pass: the summary reads all
            entries = self._full_entries(state, entries)
        admission = state.admission
        return build_status(
            spec=state.spec,
            trials=state.observed.trials,
            entries=entries,
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
            old=old,
            started_spec=spec_json(state.body.get("spec") or {}),
            generation=state.body["metadata"].get("generation", 1),
            now=state.observed.now,
            spec_changed=state.spec_changed,
        )

    def _full_entries(self, state: Pass, entries: list[TrialEntry]) -> list[TrialEntry]:
        """The trial entries, full: a compact one replaced by its full entry from the
        experiment's ConfigMaps (one list). An entry with its Result inline (fresh in this
        pass, or written by an operator before the ConfigMaps) is its own full entry."""
        if not any(e.results_in for e in entries):
            return entries
        chunks = self.kube.list_config_maps(state.namespace, results_selector(state.name))
        stored = entries_of(chunks)
        return [stored.get(e.name, e) if e.results_in else e for e in entries]

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
        if pod is None or pod.started is None or pod.finished is None:
            why = "the trial's Pod has no start and end time"
            return prometheus_usage(None, {}, list(FIELDS), why)
        client = PrometheusClient(
            self.config.prometheus_url, self.config.prometheus_timeout_seconds
        )
        window = TrialWindow(state.namespace, pod.name, pod.started, pod.finished)
        return trial_usage(window, client.instant)

    # ---- act ----

    def _act(
        self, state: Pass, decision: Decision, recorded: ExperimentStatus, event: EventSink
    ) -> PassReport:
        """Only now, with results and attempts safely in status, touch the Pods: the delay
        target first (this pass counted it not ready), then the trials; release, delete;
        announce; and say when the next pass is due."""
        created: list[str] = []
        try:
            self._create(state, decision, created)
        except PodRefused as refused:
            # No Pod of this experiment can be created: it ends, its status saying why before
            # any of its Pods goes. (Lost in a crash before that write, the attempt counted
            # above finds no Pod on the next pass and is retried: refused again, and written.)
            logging.getLogger(__name__).warning("%s/%s: %s", *state.key, refused)
            before = {e.name for e in decision.finished}
            decision = pod_refused(
                decision, state.observed, pod=refused.pod, code=refused.code,
                reason=refused.reason, message=refused.message, created=created,
            )  # fmt: skip
            fresh = [e for e in decision.finished if e.name not in before]
            recorded = self._record(state, decision, fresh, [], recorded)
        unreleased = self._release(decision, state.memory)
        self._delete(state, decision)
        self._announce(state.status, recorded, decision, event)
        self._count_queue(state)
        if recorded.finished and state.target is not None:
            self.kube.delete_pod(state.namespace, target_pod_name(state.name))
        report = PassReport(written=state.written)
        report.recheck_seconds = self._recheck(state, decision)
        if recorded.finished:  # one more pass: tidy up, and time the TTL
            report.recheck_seconds = 0.0
        elif unreleased:  # no Pod event will say so: try the release again soon
            report.recheck_seconds = min(
                report.recheck_seconds or RELEASE_RETRY_SECONDS, RELEASE_RETRY_SECONDS
            )
        return report

    def _create(self, state: Pass, decision: Decision, created: list[str]) -> None:
        """The delay target of an http experiment (once, while trials are left), then the
        trial Pods the decision starts; each created Pod is remembered until the index has
        it."""
        spec, uid = state.spec, state.body["metadata"]["uid"]
        target = state.target
        unfinished = len(state.observed.recorded) < len(state.observed.trials)
        waiting = state.admission.place is not None
        needed = unfinished and not waiting and not decision.failure
        if spec.workload.type == "http" and target is None and needed:
            manifest = build_target_pod(
                experiment=state.name, namespace=state.namespace, uid=uid, spec=spec,
                config=self.config,
            )  # fmt: skip
            self.kube.create_pod(manifest)
            created.append(manifest["metadata"]["name"])
        url = f"http://{target.ip}:{self.config.target_port}/" if target and target.ip else None
        for trial, attempt, index in decision.create:
            pod = build_trial_pod(
                experiment=state.name, namespace=state.namespace, uid=uid, spec=spec,
                trial=trial, attempt=attempt, config=self.config, target_url=url, pod=index,
                locust_address=decision.locust_masters.get(trial.name),
            )  # fmt: skip
            if self.kube.create_pod(pod) and index == 0:
                self.metrics.trials_started.inc()
            view = replace(view_pod(pod), created=state.observed.now)
            state.memory.created[pod["metadata"]["name"]] = (time.monotonic(), view)
            created.append(pod["metadata"]["name"])

    def _release(self, decision: Decision, memory: Memory) -> bool:
        """Release each trial whose Pods all wait at the start barrier: one POST /start to
        every Pod at once (cxlab.barrier). Remembered per attempt, so a trial is released
        once; after a restart, again, which the runners take as a no-op. Returns whether a
        release failed (to be tried again)."""
        failures = False
        for trial, pods in decision.release:
            key = (trial.name, pods[0].attempt)
            if key in memory.released:
                continue
            port = self.config.metrics_port
            failed = release([f"{p.ip}:{port}" for p in pods])
            if failed:  # the next pass tries again, until the barrier's own timeout
                logging.getLogger(__name__).warning(
                    "trial %s: the start barrier could not release %s", trial.name, failed
                )
                failures = True
                continue
            memory.released.add(key)
        return failures

    def _delete(self, state: Pass, decision: Decision) -> None:
        """The Pods the decision lets go; a Pod this process deleted may show in the index a
        moment longer: once is enough."""
        memory = state.memory
        memory.deleted &= {p.name for p in state.observed.pods}
        for pod_name in dict.fromkeys(decision.delete):
            if pod_name not in memory.deleted:
                self.kube.delete_pod(state.namespace, pod_name)
                memory.deleted.add(pod_name)

    def _count_queue(self, state: Pass) -> None:
        place, waited = state.admission.place, state.admission.waited
        if place is not None and place.since is not None:
            self.metrics.queued[state.key] = place.since
        elif self.metrics.queued.pop(state.key, None) is not None and waited is not None:
            self.metrics.queue_wait.observe(waited)

    def _recheck(self, state: Pass, decision: Decision) -> float | None:
        """Seconds until the clock alone could change this experiment's next decision: a
        grace or barrier deadline of a starting Pod, the next read of running trials' task
        counts, the end of its queue timeout. None: only a change can."""
        moment, spec = state.observed.now, state.spec
        due: list[float] = []
        deadline = next_deadline(decision, state.observed.pods, self.config)
        if deadline is not None:
            due.append((deadline - moment).total_seconds())
        running = [p for _, p in decision.running if p.phase == PodPhase.RUNNING]
        created = [p.created for p in running if p.created]
        if created:  # the first read of a trial once it has run an interval, then every one
            eligible = min(created) + timedelta(seconds=self.config.progress_interval_seconds)
            next_read = state.memory.next_scrape - time.monotonic()
            due.append(max((eligible - moment).total_seconds(), next_read))
        if state.admission.place is not None and spec.queue_timeout:
            waited = (moment - candidate_created(state.body, moment)).total_seconds()
            due.append(parse_duration(spec.queue_timeout) - waited)
        future = [d for d in due if d > 0]
        return min(future) + 0.05 if future else None

    def _announce(
        self, old: ExperimentStatus, new: ExperimentStatus, decision: Decision, event: EventSink
    ) -> None:
        if new.queue and not old.queue:
            event("Normal", "Queued", new.queue.message or "")
        progress = new.progress
        assert progress is not None
        if new.start_time and not old.start_time:
            waited = new.queued_seconds
            after = f" after {waited:.1f} s in the queue" if waited else ""
            event("Normal", "Started", f"{progress.trials_total} trials planned{after}")
        for entry in decision.finished:
            if entry.failed:
                event("Warning", "TrialFailed", f"{entry.name}: {entry.message or ''}")
            else:
                assert entry.result is not None
                wall = entry.result["wallSeconds"]
                event("Normal", "TrialSucceeded", f"{entry.name}: {wall:.3f} s wall")
        if new.finished and not old.finished:
            if decision.failure:
                event("Warning", decision.failure_reason or "Failed", decision.failure[:1000])
            if new.phase == Phase.SUCCEEDED:
                event("Normal", "Completed", new.best or "all trials succeeded")
            else:
                failed, total = progress.trials_failed, progress.trials_total
                event("Warning", "Failed", f"{failed} of {total} trials failed")

    # ---- the ends of an experiment ----

    def _reject(
        self, body: Body, status: ExperimentStatus, message: str, event: EventSink, moment: datetime
    ) -> Body:
        metadata = body["metadata"]
        rejected = rejected_status(
            status, message, generation=metadata.get("generation", 1), now=moment
        )
        written = self.kube.write_status(
            metadata["namespace"], metadata["name"], rejected, metadata.get("resourceVersion")
        )
        self.metrics.status_writes.inc()
        self.metrics.phases[(metadata["namespace"], metadata["name"])] = Phase.FAILED
        event("Warning", "InvalidSpec", message[:1000])
        return written

    def _after_finish(
        self, body: Body, status: ExperimentStatus, pods: list[PodView], moment: datetime
    ) -> float | None:
        """Tidy leftovers (a restart between recording and deleting) and apply the TTL;
        returns the seconds left until the TTL falls due."""
        metadata, spec = body["metadata"], body.get("spec") or {}
        keep_failed = bool(spec.get("keepPodsOnFailure"))
        failed = {e.name for e in status.entries if e.failed}
        for pod in pods:
            if pod.deleting or (keep_failed and pod.trial in failed):
                continue
            self.kube.delete_pod(metadata["namespace"], pod.name)
        self.memory.pop((metadata["namespace"], metadata["name"]), None)
        ttl = spec.get("ttlSecondsAfterFinished")
        if ttl is None or status.completion_time is None:
            return None
        ends = status.completion_time + timedelta(seconds=ttl)
        if moment < ends:
            return (ends - moment).total_seconds() + 0.05
        logging.getLogger(__name__).info("deleting %s: TTL after finish", metadata["name"])
        self.kube.delete_experiment(metadata["namespace"], metadata["name"])
        return None

    def forget(self, namespace: str, name: str) -> None:
        """The experiment is gone: drop what this process remembered about it."""
        self.memory.pop((namespace, name), None)
        self.metrics.phases.pop((namespace, name), None)
        self.metrics.queued.pop((namespace, name), None)
