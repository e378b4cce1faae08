"""One reconcile pass over one experiment: read state (status + indexed Pods), decide,
write status, then act on Pods — in that order, so a crash at any point loses nothing.
A pass says when it wants the next one if nothing changes before (Pass.recheck_seconds):
the operator runs passes on changes (cxlab.controller.wakes), not on a clock."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from cxlab.barrier import release
from cxlab.controller.config import OperatorConfig
from cxlab.controller.kube import Kube, PodRefused, StaleStatus
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.prometheus import FIELDS, PrometheusClient, TrialWindow, trial_usage
from cxlab.experiments.decide import (
    Decision,
    decide,
    fail_experiment,
    next_deadline,
    pod_refused,
)
from cxlab.experiments.nodes import NodeView, Request, never_fits, view_node
from cxlab.experiments.plan import Trial, plan_trials, pod_indexes
from cxlab.experiments.pod_view import PodView, now, view_pod
from cxlab.experiments.pods import (
    COMPONENT_TARGET,
    build_target_pod,
    build_trial_pod,
    target_pod_name,
    trial_pod_name,
)
from cxlab.experiments.queue import Candidate, candidate, candidate_created, spec_of, verdict
from cxlab.experiments.results_store import (
    FULL_ONLY,
    chunk_of,
    compact,
    compact_summary,
    config_map,
    entries_of,
    results_selector,
    summary_config_map,
)
from cxlab.experiments.spec import ExperimentSpec, SpecError
from cxlab.experiments.status import (
    Live,
    build_status,
    prometheus_usage,
    queue_place,
    rejected_status,
    running_entry,
    spec_json,
)
from cxlab.scrape import tasks_done
from cxlab_contract.durations import parse_duration

FINISHED = ("Succeeded", "Failed")
# A pass refused twice for a stale status (someone else writes the object) tries this soon.
STALE_RETRY_SECONDS = 0.5
# A Pod this process created and the index does not have yet is taken as created this long
# (its watch event is on its way); then it is read from the apiserver.
CREATED_TRUST_SECONDS = 10.0
# A start barrier whose release failed (a runner not answering yet) is tried again this soon.
RELEASE_RETRY_SECONDS = 1.0
# Nodes are listed at most this often (capacity changes slowly; every waiting experiment
# asks on every pass, and a list of a hundred Nodes costs the operator tens of milliseconds).
NODES_CACHE_SECONDS = 5.0

Body = dict[str, Any]
Entry = dict[str, Any]
# (type Normal|Warning, reason, message) → a Kubernetes Event on the experiment
EventSink = Callable[[str, str, str], None]


@dataclass
class Memory:
    """What one operator process remembers about one experiment between passes; all of it
    can be lost (a restart) without losing results."""

    scraped: set[str] = field(default_factory=set)
    last_progress_patch: float = 0.0
    next_scrape: float = 0.0  # time.monotonic() from which running trials are read again
    tasks_done: dict[str, int] = field(default_factory=dict)  # running trials, last read
    # Pods this process created, until the index has them (time.monotonic(), as sent)
    created: dict[str, tuple[float, PodView]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)  # Pods it deleted, while still indexed
    released: set[tuple[str, int]] = field(default_factory=set)  # (trial, attempt)


@dataclass
class Pass:
    """What one pass did, for the loop that runs them."""

    # Look again after this long even if nothing changes (None: no deadline of its own).
    recheck_seconds: float | None = None
    # The object as the pass's status write returned it (None: nothing written).
    written: dict[str, Any] | None = None
    # Finished and tidied: only a change (or its TTL) can call for another pass.
    idle: bool = False


def _load_spec(body: Body) -> tuple[ExperimentSpec, bool]:
    """The spec this run follows — the one it started with — and whether the resource's
    spec has changed since (a change is reported, never half-applied)."""
    current = spec_json(body.get("spec") or {})
    started = (body.get("status") or {}).get("startedSpec") or current
    return spec_of(body), started != current


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
        self._nodes_read: tuple[float, list[NodeView]] | None = None
        self._nodes_lock = threading.Lock()

    def reconcile(
        self,
        body: Body,
        indexed: Iterable[PodView],
        event: EventSink,
        queue: Iterable[Candidate] = (),
    ) -> Pass:
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
                    return self._reconcile(fresh, pods, event, waiting) if fresh else Pass()
                except StaleStatus as again:  # a busy object: the loop's next pass, soon
                    logging.getLogger(__name__).info("%s again: next pass", again)
                    return Pass(recheck_seconds=STALE_RETRY_SECONDS)
        except Exception:
            self.metrics.reconcile_errors.inc()
            raise
        finally:
            self.metrics.reconcile_duration.observe(time.monotonic() - started)

    def _reconcile(
        self, body: Body, indexed: Iterable[PodView], event: EventSink, queue: list[Candidate]
    ) -> Pass:
        metadata, status = body["metadata"], body.get("status") or {}
        namespace, name = metadata["namespace"], metadata["name"]
        memory = self.memory.setdefault((namespace, name), Memory())
        moment = self.clock()
        pods = list(indexed)
        outcome = Pass()
        if status.get("phase") in FINISHED:
            self.metrics.phases[(namespace, name)] = status["phase"]
            return Pass(self._after_finish(body, pods, moment), idle=True)
        try:
            spec, spec_changed = _load_spec(body)
        except (SpecError, ValidationError, ValueError) as error:
            return Pass(written=self._reject(body, str(error), event, moment))
        trials = plan_trials(spec)
        # compact entries, their Results in ConfigMaps (cxlab.experiments.results_store)
        recorded = {e["name"]: e for e in status.get("trials") or []}
        attempts: dict[str, int] = dict(status.get("attempts") or {})
        pods += self._unindexed(namespace, name, trials, recorded, attempts, pods, memory)
        target = next((p for p in pods if p.component == COMPONENT_TARGET), None)
        target_ready = bool(target and target.ready and target.ip)
        # The nodes matter before admission (can a trial ever fit?) and to a Pod the scheduler
        # cannot place (busy or impossible?); other passes do not read them.
        admitted = status.get("phase") == "Running" or bool(recorded) or any(attempts.values())
        unplaced = any(p.unschedulable for p in pods)
        impossible = (
            never_fits(Request.of(spec), self._nodes()) if not admitted or unplaced else None
        )
        place: dict[str, Any] | None = None  # its place in the queue while it waits
        waited: float | None = None  # seconds it waited, in the pass that admits it
        ruled: Decision | None = None  # the queue's decision: wait, or fail before any Pod
        if not admitted:
            ruled, place, waited = self._admission(body, spec, trials, impossible, queue, moment)
        decision = ruled or decide(
            spec=spec, trials=trials, recorded=recorded, attempts=attempts, pods=pods,
            target_ready=target_ready, now=moment, config=self.config,
            capacity_exists=impossible is None,
        )  # fmt: skip
        if spec.queue_name and not recorded:
            place, waited = self._kueue_place(body, spec, decision, moment)

        positions = {t.name: i for i, t in enumerate(trials)}

        def record(decision: Decision, fresh: list[Entry], running: list[Entry], old: Body) -> Body:
            """Write the status after `decision`, whose `fresh` entries are new in this pass."""
            for entry in fresh:
                entry["metricsScraped"] = entry["name"] in memory.scraped
                self._add_prometheus_usage(entry, namespace, pods)
            entries = [*recorded.values(), *decision.finished]
            if len(entries) >= len(trials):  # the last pass: the summary reads every Result
                entries = self._full_entries(body, entries)
            new_status = build_status(
                spec=spec,
                trials=trials,
                entries=entries,
                live=Live(
                    running=running,
                    attempts=decision.attempts,
                    starting=bool(decision.running or decision.create),
                    failure=decision.failure,
                    failure_reason=decision.failure_reason,
                    waiting_for_target=decision.waiting_for_target,
                    queue=place,
                    queued_seconds=waited,
                ),
                old=old,
                started_spec=spec_json(body.get("spec") or {}),
                generation=metadata.get("generation", 1),
                now=moment,
                spec_changed=spec_changed,
            )
            self.metrics.phases[(namespace, name)] = new_status["phase"]
            # Results leave status for ConfigMaps: those of this pass's trials, and any still
            # inline (an older operator's), written before the status that points at them
            new = {e["name"] for e in fresh} | {e["name"] for e in old.get("trials") or []
                                                if any(k in e for k in FULL_ONLY)}  # fmt: skip
            full = [e for e in new_status["trials"] if e["name"] in new and e["name"] in positions
                    and any(k in e for k in FULL_ONLY)]  # fmt: skip
            new_status["trials"] = [
                compact(e, name, positions[e["name"]]) if e["name"] in positions else e
                for e in new_status["trials"]
            ]
            summary = new_status.get("summary")  # the last pass's: it goes beside the Results
            if summary:
                new_status["summary"] = compact_summary(summary, name)
            if self._worth_patching(old, new_status, memory):
                self._store(body, full, positions)
                if summary:
                    self.kube.add_to_config_map(
                        summary_config_map(name, namespace, metadata["uid"], summary)
                    )
                version = (outcome.written or body)["metadata"].get("resourceVersion")
                outcome.written = self.kube.write_status(namespace, name, new_status, version)
                self.metrics.status_writes.inc()
            for entry in fresh:
                self.metrics.trials_finished.labels(entry["phase"].lower()).inc()
            return new_status

        running = self._progress(name, decision, spec, memory, moment)
        new_status = record(decision, decision.finished, running, status)
        # Only now, with results and attempts safely in status, touch the Pods: the delay
        # target first (this pass counted it not ready), then the trials.
        created: list[str] = []
        try:
            unfinished = len(recorded) < len(trials) and not decision.failure
            if spec.workload.type == "http" and target is None and unfinished and place is None:
                manifest = build_target_pod(
                    experiment=name,
                    namespace=namespace,
                    uid=metadata["uid"],
                    spec=spec,
                    config=self.config,
                )
                self.kube.create_pod(manifest)
                created.append(manifest["metadata"]["name"])
            url = f"http://{target.ip}:{self.config.target_port}/" if target and target.ip else None
            for trial, attempt, index in decision.create:
                pod = build_trial_pod(
                    experiment=name,
                    namespace=namespace,
                    uid=metadata["uid"],
                    spec=spec,
                    trial=trial,
                    attempt=attempt,
                    config=self.config,
                    target_url=url,
                    pod=index,
                    locust_address=decision.locust_masters.get(trial.name),
                )
                if self.kube.create_pod(pod) and index == 0:
                    self.metrics.trials_started.inc()
                view = replace(view_pod(pod), created=moment)
                memory.created[pod["metadata"]["name"]] = (time.monotonic(), view)
                created.append(pod["metadata"]["name"])
        except PodRefused as refused:
            # No Pod of this experiment can be created: it ends, its status saying why before
            # any of its Pods goes. (Lost in a crash before that write, the attempt counted
            # above finds no Pod on the next pass and is retried: refused again, and written.)
            logging.getLogger(__name__).warning("%s/%s: %s", namespace, name, refused)
            before = {e["name"] for e in decision.finished}
            decision = pod_refused(
                decision,
                trials,
                recorded,
                pod=refused.pod,
                code=refused.code,
                reason=refused.reason,
                message=refused.message,
                created=created,
            )
            fresh = [e for e in decision.finished if e["name"] not in before]
            new_status = record(decision, fresh, [], new_status)
        unreleased = self._release(decision, memory)
        # a Pod this process deleted may show in the index a moment longer: once is enough
        memory.deleted &= {p.name for p in pods}
        for pod_name in dict.fromkeys(decision.delete):
            if pod_name not in memory.deleted:
                self.kube.delete_pod(namespace, pod_name)
                memory.deleted.add(pod_name)
        self._announce(status, new_status, decision, event)
        if place is not None:
            self.metrics.queued[(namespace, name)] = place["since"]
        elif self.metrics.queued.pop((namespace, name), None) is not None and waited is not None:
            self.metrics.queue_wait.observe(waited)
        if new_status["phase"] in FINISHED and target is not None:
            self.kube.delete_pod(namespace, target_pod_name(name))
        outcome.recheck_seconds = self._recheck(
            decision, pods, spec, memory, moment, waiting=place is not None, body=body
        )
        if new_status["phase"] in FINISHED:  # one more pass: tidy up, and time the TTL
            outcome.recheck_seconds = 0.0
        elif unreleased:  # no Pod event will say so: try the release again soon
            outcome.recheck_seconds = min(outcome.recheck_seconds or RELEASE_RETRY_SECONDS,
                                          RELEASE_RETRY_SECONDS)  # fmt: skip
        return outcome

    def _recheck(
        self,
        decision: Decision,
        pods: list[PodView],
        spec: ExperimentSpec,
        memory: Memory,
        moment: datetime,
        *,
        waiting: bool,
        body: Body,
    ) -> float | None:
        """Seconds until the clock alone could change this experiment's next decision: a
        grace or barrier deadline of a starting Pod, the next read of running trials' task
        counts, the end of its queue timeout. None: only a change can."""
        due: list[float] = []
        if (deadline := next_deadline(decision, pods, self.config)) is not None:
            due.append((deadline - moment).total_seconds())
        created = [p.created for _, p in decision.running if p.created and p.phase == "Running"]
        if created:  # the first read of a trial once it has run an interval, then every one
            eligible = min(created) + timedelta(seconds=self.config.progress_interval_seconds)
            due.append(
                max((eligible - moment).total_seconds(), memory.next_scrape - time.monotonic())
            )
        if waiting and spec.queue_timeout:
            waited = (moment - candidate_created(body, moment)).total_seconds()
            due.append(parse_duration(spec.queue_timeout) - waited)
        future = [d for d in due if d > 0]
        return min(future) + 0.05 if future else None

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

    def _full_entries(self, body: Body, entries: list[Entry]) -> list[Entry]:
        """The trial entries, full: a compact one replaced by its full entry from the
        experiment's ConfigMaps (one list). An entry with its Result inline (fresh in this
        pass, or written by an operator before the ConfigMaps) is its own full entry."""
        if not any("resultsIn" in e for e in entries):
            return entries
        metadata = body["metadata"]
        chunks = self.kube.list_config_maps(
            metadata["namespace"], results_selector(metadata["name"])
        )
        stored = entries_of(chunks)
        return [stored.get(e["name"], e) if "resultsIn" in e else e for e in entries]

    def _store(self, body: Body, entries: list[Entry], positions: dict[str, int]) -> None:
        """Add these full entries to their chunks: one merge patch per chunk touched, the
        keys of the entries only (the chunk's others stay as they are)."""
        metadata = body["metadata"]
        by_chunk: dict[int, list[Entry]] = {}
        for entry in entries:
            by_chunk.setdefault(chunk_of(positions[entry["name"]]), []).append(entry)
        for chunk, mine in sorted(by_chunk.items()):
            self.kube.add_to_config_map(
                config_map(metadata["name"], metadata["namespace"], metadata["uid"], chunk, mine)
            )

    def _kueue_place(
        self, body: Body, spec: ExperimentSpec, decision: Decision, moment: datetime
    ) -> tuple[dict[str, Any] | None, float | None]:
        """Before its first trial ends, an experiment Kueue admits is queued while all its
        trial Pods are gated; how long it waited is recorded when the first is admitted."""
        status = body.get("status") or {}
        gated = [p for _, p in decision.running if p.gated]
        since = candidate_created(body, moment)
        if decision.running and len(gated) == len(decision.running):
            message = (
                f"waiting for admission by Kueue (LocalQueue {spec.queue_name}): "
                f"{len(gated)} trial Pod(s) gated"
            )
            return queue_place(None, None, None, since, message), None
        if status.get("queue"):  # admitted in this pass
            return None, max(0.0, (moment - since).total_seconds())
        return None, None

    def _nodes(self) -> list[NodeView]:
        """The Nodes, read at most every NODES_CACHE_SECONDS by one thread at a time."""
        with self._nodes_lock:
            read = self._nodes_read
            if read is None or time.monotonic() - read[0] > NODES_CACHE_SECONDS:
                read = (time.monotonic(), [view_node(n) for n in self.kube.list_nodes()])
                self._nodes_read = read
            return read[1]

    def _admission(
        self,
        body: Body,
        spec: ExperimentSpec,
        trials: list[Trial],
        impossible: str | None,
        queue: list[Candidate],
        moment: datetime,
    ) -> tuple[Decision | None, dict[str, Any] | None, float | None]:
        """An experiment that has started no trial yet: it fails at once if no node could
        ever hold a trial, or once it has waited spec.queueTimeout; it is admitted when the
        queue (cxlab.experiments.queue) says so; else it keeps its place, with no Pods.
        Returns the decision (None once admitted: the usual one follows), its queue place
        (None unless it waits) and how long it waited (once admitted)."""
        recorded = {e["name"]: e for e in (body.get("status") or {}).get("trials") or []}
        me = candidate(body, spec, moment)  # the spec this pass read, not read again
        waited = max(0.0, (moment - me.created).total_seconds())
        if impossible:
            message = f"no trial can ever be scheduled: {impossible}"
            return fail_experiment(trials, recorded, message, "DoesNotFit"), None, None
        if spec.queue_name:
            return None, None, None  # Kueue admits its Pods: they are created (gated) now
        seen = verdict(me, [c for c in queue if c.key != me.key] + [me], self._nodes(), moment)
        if seen.admit:
            return None, None, waited
        if spec.queue_timeout and waited >= parse_duration(spec.queue_timeout):
            message = (
                f"waited {waited:.0f} s for capacity, longer than spec.queueTimeout "
                f"({spec.queue_timeout}): {seen.message}"
            )
            return fail_experiment(trials, recorded, message, "QueueTimeout"), None, None
        place = queue_place(seen.position, seen.length, seen.behind, me.created, seen.message)
        return Decision(), place, None

    def forget(self, namespace: str, name: str) -> None:
        """The experiment is gone: drop what this process remembered about it."""
        self.memory.pop((namespace, name), None)
        self.metrics.phases.pop((namespace, name), None)
        self.metrics.queued.pop((namespace, name), None)

    def _add_prometheus_usage(
        self, entry: dict[str, Any], namespace: str, pods: list[PodView]
    ) -> None:
        """The trial container's CPU throttling and peak working set over its Pod's life,
        when a Prometheus is configured; whatever goes wrong, the reconcile goes on."""
        if not self.config.prometheus_url:
            return
        pod = next(
            (p for p in pods if p.trial == entry["name"] and p.attempt == entry.get("attempts")),
            None,
        )
        if pod is None or pod.started is None or pod.finished is None:
            why = "the trial's Pod has no start and end time"
            entry["prometheus"] = prometheus_usage(None, {}, list(FIELDS), why)
            return
        client = PrometheusClient(
            self.config.prometheus_url, self.config.prometheus_timeout_seconds
        )
        window = TrialWindow(namespace, pod.name, pod.started, pod.finished)
        entry["prometheus"] = trial_usage(window, client.instant)

    def _unindexed(
        self,
        namespace: str,
        name: str,
        trials: list[Trial],
        recorded: dict[str, Any],
        attempts: dict[str, int],
        pods: list[PodView],
        memory: Memory,
    ) -> list[PodView]:
        """Pods counted in status but not (yet) in the index — just created, or the index is
        still filling after a restart: read them, so they are not taken for lost. One this
        process created moments ago is taken as created (its event is on its way)."""
        seen = {p.name for p in pods}
        now = time.monotonic()
        memory.created = {
            n: (at, view)
            for n, (at, view) in memory.created.items()
            if n not in seen and now - at < CREATED_TRUST_SECONDS
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

    def _progress(
        self,
        experiment: str,
        decision: Decision,
        spec: ExperimentSpec,
        memory: Memory,
        moment: datetime,
    ) -> list[dict[str, Any]]:
        """One entry per running trial: its tasks done summed over its Pods (None until every
        Pod answers), from its first Pod's creation. Read once the trial has run a progress
        interval, then at most every interval: a trial shorter than that is never read (its
        Result has the final counts), and a pass a Pod event brings reads nothing."""
        by_trial: dict[str, list[PodView]] = {}
        masters: set[str] = set()  # a distributed Locust master counts only at its end
        for trial, pod in decision.running:
            by_trial.setdefault(trial.name, []).append(pod)
            if pod.pod >= trial.pods:
                masters.add(pod.name)
        running = []
        interval = self.config.progress_interval_seconds
        read = time.monotonic() >= memory.next_scrape
        for trial_name, pods in by_trial.items():
            first = min(pods, key=lambda p: p.pod)  # named in the entry; the earliest created:
            created = [p.created for p in pods if p.created]
            elapsed = (moment - min(created)).total_seconds() if created else None
            if read and elapsed is not None and elapsed >= interval:
                memory.next_scrape = time.monotonic() + interval
                counts = [self._tasks_done(pod) for pod in pods if pod.name not in masters]
                if counts and None not in counts:
                    memory.tasks_done[trial_name] = sum(c or 0 for c in counts)
                    memory.scraped.add(trial_name)
            done = memory.tasks_done.get(trial_name)
            running.append(
                running_entry(trial_name, first.name, spec.workload.tasks, done, elapsed)
            )
        # Trials whose first Pods this pass creates are running as of this write: the pass
        # the new Pod's event brings then has nothing to add (one status patch per trial).
        for trial, attempt, index in decision.create:
            if trial.name not in by_trial and index == min(pod_indexes(trial)):
                pod_name = trial_pod_name(experiment, trial, attempt, index)
                running.append(running_entry(trial.name, pod_name, spec.workload.tasks, None, 0.0))
        return running

    def _tasks_done(self, pod: PodView) -> int | None:
        if not (pod.ip and pod.phase == "Running"):
            return None
        began = time.monotonic()
        done = tasks_done(pod.ip, self.config.metrics_port, self.config.scrape_timeout_seconds)
        self.metrics.scrape_duration.observe(time.monotonic() - began)
        self.metrics.scrapes.labels("error" if done is None else "ok").inc()
        return done

    def _worth_patching(self, old: dict[str, Any], new: dict[str, Any], memory: Memory) -> bool:
        """Every change of substance at once; the live task counts at most every few seconds."""

        def without_live(status: dict[str, Any]) -> str:
            progress = dict(status.get("progress") or {})
            progress["running"] = [
                {k: v for k, v in r.items() if k not in ("tasksDone", "elapsedSeconds")}
                for r in progress.get("running") or []
            ]
            conditions = [
                {k: v for k, v in c.items() if k != "lastTransitionTime"}
                for c in status.get("conditions") or []
            ]
            trimmed = {
                **status,
                "progress": progress,
                "conditions": conditions,
            }
            return json.dumps(trimmed, sort_keys=True, default=str)

        if without_live(old) != without_live(new):
            memory.last_progress_patch = time.monotonic()
            return True
        if (old.get("progress") or {}).get("running") == new["progress"]["running"]:
            return False
        if time.monotonic() - memory.last_progress_patch >= self.config.progress_interval_seconds:
            memory.last_progress_patch = time.monotonic()
            return True
        return False

    def _announce(
        self, old: dict[str, Any], new: dict[str, Any], decision: Decision, event: EventSink
    ) -> None:
        if new.get("queue") and not old.get("queue"):
            event("Normal", "Queued", new["queue"]["message"])
        if new.get("startTime") and not old.get("startTime"):
            waited = new.get("queuedSeconds")
            after = f" after {waited:.1f} s in the queue" if waited else ""
            event("Normal", "Started", f"{new['progress']['trialsTotal']} trials planned{after}")
        for entry in decision.finished:
            if entry["phase"] == "Succeeded":
                wall = entry["result"]["wallSeconds"]
                event("Normal", "TrialSucceeded", f"{entry['name']}: {wall:.3f} s wall")
            else:
                event("Warning", "TrialFailed", f"{entry['name']}: {entry.get('message', '')}")
        if new["phase"] in FINISHED and old.get("phase") not in FINISHED:
            if decision.failure:
                event("Warning", decision.failure_reason or "Failed", decision.failure[:1000])
            if new["phase"] == "Succeeded":
                event("Normal", "Completed", new.get("best") or "all trials succeeded")
            else:
                failed = new["progress"]["trialsFailed"]
                event(
                    "Warning",
                    "Failed",
                    f"{failed} of {new['progress']['trialsTotal']} trials failed",
                )

    def _reject(self, body: Body, message: str, event: EventSink, moment: datetime) -> Body:
        metadata = body["metadata"]
        status = rejected_status(
            body.get("status") or {}, message, generation=metadata.get("generation", 1), now=moment
        )
        written = self.kube.write_status(
            metadata["namespace"], metadata["name"], status, metadata.get("resourceVersion")
        )
        self.metrics.status_writes.inc()
        self.metrics.phases[(metadata["namespace"], metadata["name"])] = "Failed"
        event("Warning", "InvalidSpec", message[:1000])
        return written

    def _after_finish(self, body: Body, pods: list[PodView], moment: datetime) -> float | None:
        """Tidy leftovers (a restart between recording and deleting) and apply the TTL;
        returns the seconds left until the TTL falls due."""
        metadata, status = body["metadata"], body.get("status") or {}
        spec = body.get("spec") or {}
        keep_failed = bool(spec.get("keepPodsOnFailure"))
        failed = {e["name"] for e in status.get("trials") or [] if e["phase"] == "Failed"}
        for pod in pods:
            if pod.deleting or (keep_failed and pod.trial in failed):
                continue
            self.kube.delete_pod(metadata["namespace"], pod.name)
        self.memory.pop((metadata["namespace"], metadata["name"]), None)
        ttl = spec.get("ttlSecondsAfterFinished")
        finished = status.get("completionTime")
        if ttl is None or not finished:
            return None
        ends = datetime.fromisoformat(finished.replace("Z", "+00:00")) + timedelta(seconds=ttl)
        if moment < ends:
            return (ends - moment).total_seconds() + 0.05
        logging.getLogger(__name__).info("deleting %s: TTL after finish", metadata["name"])
        self.kube.delete_experiment(metadata["namespace"], metadata["name"])
        return None
