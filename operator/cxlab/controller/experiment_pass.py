"""One reconcile pass over one experiment, as the schedule's pass is: gather (its status, its
Pods from the index, the queue; the full entries when a decision needs them) → decide (pure:
cxlab.experiments.decide, which also plans the trials that follow) → record (the status
written, the Results it points at stored first) → act (Pods created, released, deleted;
events). Each step hands the next what it made and none calls back: what act learns (a Pod
the apiserver refused) the next pass gathers as a fact (Memory.refused). In that order, so a
crash at any point loses nothing. A pass says when it wants the next one if nothing changes
before (PassReport.recheck_seconds): the operator runs passes on changes
(cxlab.controller.wakes), not on a clock."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from pydantic import ValidationError

from cxlab.config import OperatorConfig
from cxlab.controller.actor import Actor
from cxlab.controller.admission import Admission, NodeReader, admit, impossible, kueue_place
from cxlab.controller.copier import Copier
from cxlab.controller.copy_meter import CopyMeter, keep_windows, measured_gate
from cxlab.controller.done_watch import DoneWatches
from cxlab.controller.full_entries import Full, FullReader
from cxlab.controller.kube import Kube, StaleStatus
from cxlab.controller.live import LiveReads
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import Body, EventSink, Pass, PassReport
from cxlab.controller.recorder import Recorder
from cxlab.experiments.decide import Decision, Observed, decide, follow
from cxlab.experiments.fields import SpecError
from cxlab.experiments.followups import Trials, outcomes_matter, searching, trials_of
from cxlab.experiments.nodes import Request, trials_fitting
from cxlab.experiments.plan import Trial, plan_trials, pod_indexes
from cxlab.experiments.pod_view import HOLDING, PodPhase, PodView, view_pod
from cxlab.experiments.pods import (
    COMPONENT_COPY,
    COMPONENT_HOST,
    COMPONENT_TARGET,
    COMPONENT_TRIAL,
    trial_pod_name,
)
from cxlab.experiments.queue import Candidate, spec_of
from cxlab.experiments.record import rejected_status
from cxlab.experiments.service_run import (
    GONE_RECHECK_SECONDS,
    copies_left,
    plan_copies,
    seen_gone,
)
from cxlab.experiments.spec import ExperimentSpec, spec_json
from cxlab.experiments.status import (
    ExperimentStatus,
    Phase,
    TrialEntry,
)
from cxlab.times import now

# A pass refused twice for a stale status (someone else writes the object) tries this soon.
STALE_RETRY_SECONDS = 0.5
# A Pod this process created and the index does not have yet is taken as created this long
# (its watch event is on its way); then it is read from the apiserver.
CREATED_TRUST_SECONDS = 10.0


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        metrics: OperatorMetrics,
        clock: Callable[[], datetime] = now,
        crowded: Callable[[], bool] = lambda: False,
        done_watches: DoneWatches | None = None,
    ) -> None:
        """`crowded()`: whether passes wait in a crowd; `done_watches`: where a trial Pod
        reserves the watch that lets it go without its readiness probe (cxlab.controller.actor)."""
        self.kube = kube
        self.config = config
        self.metrics = metrics
        self.clock = clock  # every time written to status comes from here
        self.memory: dict[tuple[str, str], Memory] = {}
        self.nodes = NodeReader(kube.list_nodes)
        self.live = LiveReads(config, metrics)
        self.reader = FullReader(kube, self.nodes)
        self.recorder = Recorder(kube, config, metrics, self.live)
        self.actor = Actor(kube, config, metrics, crowded, done_watches)
        self.copier = Copier(kube, metrics)
        self.copy_meter = CopyMeter(kube)

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
            self.metrics.observe_objectives(*key, status.objectives)
            again, written = self._after_finish(body, status, pods, moment)
            return PassReport(again, written=written, idle=True)
        try:
            spec = spec_of(body)
        except (SpecError, ValidationError, ValueError) as error:
            return PassReport(written=self._reject(body, status, str(error), event, moment))
        state = self._gather(body, status, spec, pods, queue, moment)
        decision = self._decide(state)
        self._plan_copies(state, decision)
        running = self.live.running(state.name, decision, spec.workload.tasks, state.memory, moment)
        recorded = self.recorder.record(state, decision, running)
        planned = decision.planned
        if planned is not None and planned.followed:  # the next pass starts from this plan
            names = frozenset(e.name for e in planned.entries)
            state.memory.followed = (names, Trials(planned.trials, planned.unverified))
        if state.service_plan is not None:  # the copies first: a new one is made now
            self.copier.act(state, state.service_plan, event)
        report = self.actor.act(state, decision, recorded, event)
        again = state.service_plan.recheck_seconds if state.service_plan else None
        if again is not None and not recorded.finished:
            report.recheck_seconds = min(report.recheck_seconds or again, again)
        return report

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
        followed, full = self._trials(metadata["namespace"], metadata["name"], spec, status, memory)
        trials = followed.trials
        recorded = {e.name: e for e in status.entries}
        attempts = dict(status.attempts or {})
        pods = indexed + self._unindexed(
            metadata["namespace"], metadata["name"], trials, recorded, attempts, indexed, memory,
            hosted=spec.isolation == "process",
        )  # fmt: skip
        as_listed = pods
        pods = self.live.final_reads(metadata["name"], trials, pods, memory, moment)
        target = next((p for p in pods if p.component == COMPONENT_TARGET), None)
        observed = Observed(
            spec, trials, recorded, attempts, pods, moment,
            target_ready=bool(target and target.ready and target.ip), skipped=followed.skipped,
            room=self._room(spec, trials, recorded, as_listed, pods),
            unverified=followed.unverified, full=full.entries if full else None,
            fits=full.fits if full else None, refused=memory.refused,
            service_copy=status.service_copy,
        )  # fmt: skip
        admitted = status.phase == Phase.RUNNING or bool(recorded) or any(attempts.values())
        why_impossible = impossible(spec, observed, admitted, self.nodes)
        observed = replace(observed, capacity_exists=why_impossible is None)
        admission, copy = Admission(), None
        if not admitted:
            held = status.queue is not None
            if spec.service is not None and spec.service.deployment is not None:
                copy = self.copier.request(metadata["namespace"], spec)
            admission = admit(body, observed, why_impossible, queue, self.nodes, held, copy)
        current = spec_json(body.get("spec") or {})
        spec_changed = (status.started_spec or current) != current
        state = Pass(body, status, spec, spec_changed, observed, memory, admission)
        state.service_copy = copy
        # no copy while it waits in the queue (or fails before any Pod): the queue holds the
        # service and the copy's room for the one admitted
        waiting = admission.ruling is not None
        if spec.service is not None and spec.service.deployment is not None and not waiting:
            state.copies = self.copier.observe(
                metadata["namespace"], metadata["name"], pods, memory
            )
            before = plan_copies(
                spec, metadata["name"], trials, recorded, state.copies,
                status.service_variants or [], moment,
            )  # fmt: skip
            state.service_plan = before
            gate = measured_gate(self.copy_meter, state, before)
            state.observed = replace(state.observed, service=gate)
        return state

    def _plan_copies(self, state: Pass, decision: Decision) -> None:
        """spec.service: what to do about the copies once this decision's trials have ended
        (from what the pass saw before deciding: a variant whose copy failed has failed)."""
        if state.copies is None or state.service_plan is None:
            return
        ended = set(state.observed.recorded) | {e.name for e in decision.finished}
        before = state.service_plan
        # the trials as this decision planned them: a variant's next probe keeps its copy
        trials = decision.planned.trials if decision.planned else state.observed.trials
        state.service_plan = plan_copies(
            state.spec, state.name, trials, ended, state.copies,
            before.statuses, state.observed.now,
        )  # fmt: skip
        state.service_plan.became_ready[:0] = before.became_ready  # seen by either: logged
        state.service_plan.gone[:0] = before.gone
        keep_windows(self.copy_meter, state, decision)

    def _trials(
        self, namespace: str, name: str, spec: ExperimentSpec, status: ExperimentStatus,
        memory: Memory,
    ) -> tuple[Trials, Full | None]:  # fmt: skip
        """The trials as status records them, and the full entries if they were read for it:
        the sweep, and once it has ended what follows it when the spec asks for it (the
        calibration, a rate search, a verification of the plan). The pass that recorded the
        entries planned it and handed it on (Memory.followed); else (a restart) it is planned
        again from the same entries, their Results read back from their ConfigMaps, which
        gives the same trials (followups.trials_of is pure). With abortOnFail the Results are
        read as trials end, to skip the trials an objective makes pointless."""
        sweep = plan_trials(spec)
        recorded = {e.name for e in status.entries}
        verifying = spec.capacity is not None and spec.capacity.verifying is not None
        follows = verifying or searching(spec) or spec.calibration
        aborting = any(o.abort_on_fail for o in spec.objectives or ())
        swept = outcomes_matter(spec, recorded)  # a search per service variant: its first's
        if not (aborting and not swept) and (not follows or not swept):
            return Trials(sweep), None
        key = frozenset(recorded)
        if memory.followed is not None and memory.followed[0] == key:
            return memory.followed[1], None
        full = self.reader.read(namespace, name, spec, status.entries, status.service_copy)
        entries = list(full.entries.values())
        memory.followed = (key, trials_of(spec, entries, full.fits, status.service_copy))
        return memory.followed[1], full

    def _room(
        self, spec: ExperimentSpec, trials: list[Trial], recorded: dict[str, TrialEntry],
        as_listed: list[PodView], pods: list[PodView],
    ) -> tuple[int, int] | None:  # fmt: skip
        """One-Pod trials that fit now and once this experiment's Pods on their way out have
        gone (Observed.room): only while one of them still holds its cores on its node (its
        listed phase; the final read may show it ended already). Trial hosts and Kueue place
        trials their own way; trials of several Pods are left to the scheduler."""
        if spec.isolation != "pod" or spec.queue_name or any(t.pods > 1 for t in trials):
            return None
        views = {p.name: p for p in pods}
        leaving: list[str] = []
        staying: list[str] = []
        for listed in as_listed:
            if listed.component != COMPONENT_TRIAL or not listed.node:
                continue
            if listed.phase not in HOLDING:
                continue
            view = views.get(listed.name, listed)
            out = view.deleting or PodPhase(view.phase).ended or view.trial in recorded
            (leaving if out else staying).append(listed.node)
        if not leaving:
            return None
        request, nodes, most = Request.of(spec), self.nodes(), spec.parallelism
        return (
            trials_fitting(request, nodes, staying + leaving, most),
            trials_fitting(request, nodes, staying, most),
        )

    def _unindexed(
        self,
        namespace: str,
        name: str,
        trials: list[Trial],
        recorded: dict[str, TrialEntry],
        attempts: dict[str, int],
        pods: list[PodView],
        memory: Memory,
        hosted: bool = False,
    ) -> list[PodView]:
        """Pods counted in status but not (yet) in the index — just created, or the index is
        still filling after a restart: read them, so they are not taken for lost. One this
        process created moments ago is taken as created (its event is on its way). A trial
        host just created too; a trial started on a host (`hosted`) is not a Pod to read:
        the host says what it runs."""
        seen = {p.name for p in pods}
        moment = time.monotonic()
        memory.created = {
            n: (at, view)
            for n, (at, view) in memory.created.items()
            if n not in seen and moment - at < CREATED_TRUST_SECONDS
        }
        found = [view for _, view in memory.created.values() if view.component == COMPONENT_HOST]
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
                elif not hosted and (pod := self.kube.get_pod(namespace, pod_name)):
                    found.append(view_pod(pod))
        return found

    # ---- decide ----

    def _decide(self, state: Pass) -> Decision:
        """The queue's ruling while it waits (or fails before any Pod), else the decision on
        its trials, each with what follows it. A decision that needs the full entries (every
        trial has ended: the summary, and what follows the sweep) has them read, and is made
        again from them. An experiment Kueue admits stands in Kueue's queue while its Pods
        are gated."""
        decision = self._decision(state)
        if decision.needs_full:
            full = self.reader.read(
                state.namespace, state.name, state.spec, list(state.observed.recorded.values()),
                state.observed.service_copy,
            )  # fmt: skip
            state.observed = replace(state.observed, full=full.entries, fits=full.fits)
            decision = self._decision(state)
        if state.spec.queue_name and not state.observed.recorded:
            state.admission = kueue_place(
                state.body, state.status, state.spec, decision, state.observed.now
            )
        return decision

    def _decision(self, state: Pass) -> Decision:
        ruling = state.admission.ruling
        return follow(state.observed, ruling) if ruling else decide(state.observed, self.config)

    # ---- the ends of an experiment ----

    def _reject(
        self, body: Body, status: ExperimentStatus, message: str, event: EventSink, moment: datetime
    ) -> Body:
        metadata = body["metadata"]
        rejected = rejected_status(
            status, message, generation=metadata.get("generation", 1), now=moment
        )
        written = self.kube.write_status(
            metadata["namespace"], metadata["name"], rejected.document(),
            metadata.get("resourceVersion"),
        )  # fmt: skip
        self.metrics.status_writes.inc()
        self.metrics.phases[(metadata["namespace"], metadata["name"])] = Phase.FAILED
        event("Warning", "InvalidSpec", message[:1000])
        return written

    def _after_finish(
        self, body: Body, status: ExperimentStatus, pods: list[PodView], moment: datetime
    ) -> tuple[float | None, Body | None]:
        """Tidy leftovers (a restart between recording and deleting) and apply the TTL;
        returns the seconds left until the TTL falls due, and the object if its status was
        written (its last copy seen gone)."""
        metadata, spec = body["metadata"], body.get("spec") or {}
        keep_failed = bool(spec.get("keepPodsOnFailure"))
        failed = {e.name for e in status.entries if e.failed}
        for pod in pods:
            if pod.deleting or (keep_failed and pod.trial in failed):
                continue
            if pod.host or pod.component == COMPONENT_COPY:  # they go with their host, copy
                continue
            self.kube.delete_pod(metadata["namespace"], pod.name)
        key = (metadata["namespace"], metadata["name"])
        serves = bool((spec.get("service") or {}).get("deployment"))
        if serves and self.copier.tidy(*key, self.memory.get(key)):  # events may be over
            return GONE_RECHECK_SECONDS, None
        if serves and copies_left(status.service_variants or []):
            # none left: status says so, and the queue lets the service go (the TTL's wait
            # starts from the version written)
            status.service_variants = seen_gone(status.service_variants or [], moment)
            version = metadata.get("resourceVersion")
            written = self.kube.write_status(*key, status.document(), version)
            self.metrics.status_writes.inc()
            return 0.0, written
        self.memory.pop(key, None)
        ttl = spec.get("ttlSecondsAfterFinished")
        if ttl is None or status.completion_time is None:
            return None, None
        ends = status.completion_time + timedelta(seconds=ttl)
        if moment < ends:
            return (ends - moment).total_seconds() + 0.05, None
        logging.getLogger(__name__).info("deleting %s: TTL after finish", metadata["name"])
        self.kube.delete_experiment(metadata["namespace"], metadata["name"])
        return None, None

    def forget(self, namespace: str, name: str) -> None:
        """The experiment is gone: drop what this process remembered about it."""
        self.memory.pop((namespace, name), None)
        self.copy_meter.forget(namespace, name)
        self.metrics.phases.pop((namespace, name), None)
        self.metrics.queued.pop((namespace, name), None)
        self.metrics.objectives.pop((namespace, name), None)
        self.metrics.service.pop((namespace, name), None)
