"""The act step of an experiment pass, once its status is written: the delay target and the
trial Pods created, a trial's Pods released from their start barrier, Pods let go, Events
posted, and when the next pass is due. It writes no status: a Pod the apiserver refuses is
remembered (Memory.refused) for the next pass to decide on, which it asks for at once."""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from cxlab.barrier import release
from cxlab.config import OperatorConfig
from cxlab.controller.done_watch import DoneWatches
from cxlab.controller.host_watch import HostUnavailable, forget_trial, start_trial
from cxlab.controller.kube import Kube, PodRefused
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import EventSink, Pass, PassReport
from cxlab.experiments.deadline import next_deadline
from cxlab.experiments.decide import Decision
from cxlab.experiments.plan import Trial
from cxlab.experiments.pod_view import PodPhase, PodView, view_pod
from cxlab.experiments.pods import (
    build_host_pod,
    build_target_pod,
    build_trial_pod,
    target_pod_name,
    trial_pod_name,
)
from cxlab.experiments.queue import candidate_created
from cxlab.experiments.refusal import Refusal
from cxlab.experiments.service_copy import copy_url
from cxlab.experiments.status import ExperimentStatus, Phase
from cxlab_contract.durations import parse_duration

# A start barrier whose release failed (a runner not answering yet) is tried again this soon.
RELEASE_RETRY_SECONDS = 1.0


class Actor:
    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        metrics: OperatorMetrics,
        crowded: Callable[[], bool] = lambda: False,
        done_watches: DoneWatches | None = None,
    ) -> None:
        """`crowded()`: whether more passes wait for a thread than there are threads (a
        takeover's burst): a pass then creates one Pod and leaves the rest of its Pods to
        PassReport.later, which runs after the other experiments' waiting passes.
        `done_watches`: a trial of one Pod whose end of tasks is watched there (a watch
        reserved for it) goes without its readiness probe, and its Pod's teardown with it
        takes half as long (cxlab.controller.done_watch)."""
        self.kube = kube
        self.config = config
        self.metrics = metrics
        self.crowded = crowded
        self.done_watches = done_watches

    def act(
        self, state: Pass, decision: Decision, recorded: ExperimentStatus, event: EventSink
    ) -> PassReport:
        """Only now, with results and attempts safely in status, touch the Pods: the delay
        target first (this pass counted it not ready), then the trials; release, delete;
        announce; and say when the next pass is due. When crowded, one Pod now and the rest
        of the creates and deletes later (PassReport.later): after a takeover every
        experiment then has a new trial running within seconds, not the first few all ten."""
        created: list[str] = []
        now, rest = decision.create, []
        later = self.crowded() and (len(decision.create) > 1 or bool(decision.delete))
        if later:
            now, rest = decision.create[:1], decision.create[1:]
        refused = self._create_or_remember(state, decision, now, created)
        later = later and not refused
        unreleased = self._release(decision, state.memory)
        if not later:
            self._delete(state, decision)
        self._announce(state.status, recorded, decision, event)
        self._count_queue(state)
        if recorded.finished and state.target is not None:
            self.kube.delete_pod(state.namespace, target_pod_name(state.name))
        running = {t.name for t, _ in decision.running} | {t.name for t, _, _ in decision.create}
        report = PassReport(written=state.written, space=len(running) > 1)
        if later:
            report.later = functools.partial(self._later, state, decision, rest, created)
        report.recheck_seconds = self._recheck(state, decision)
        if recorded.finished or refused:  # one more pass: tidy up (and time the TTL), or
            report.recheck_seconds = 0.0  # decide on the refusal
        elif unreleased:  # no Pod event will say so: try the release again soon
            report.recheck_seconds = min(
                report.recheck_seconds or RELEASE_RETRY_SECONDS, RELEASE_RETRY_SECONDS
            )
        return report

    def _create_or_remember(
        self,
        state: Pass,
        decision: Decision,
        trials: list[tuple[Trial, int, int]],
        created: list[str],
        target: bool = True,
    ) -> bool:
        """Create the Pods (`_create`); returns whether the apiserver refused one, which stops
        the creating. The refusal is remembered for the next pass to decide on (Memory.refused),
        with the Pods created before it, which go with the experiment. (Lost in a crash before
        that pass records it, the attempt counted finds no Pod on the next pass and is created
        again: refused again, the same way.)"""
        try:
            self._create(state, decision, trials, created, target)
        except PodRefused as refused:
            logging.getLogger(__name__).warning("%s/%s: %s", *state.key, refused)
            state.memory.refused = Refusal(
                refused.pod, refused.code, refused.reason, refused.message, tuple(created)
            )
            return True
        return False

    def _later(
        self,
        state: Pass,
        decision: Decision,
        rest: list[tuple[Trial, int, int]],
        created: list[str],
    ) -> float | None:
        """The rest of a crowded pass: its other creates, then its deletes. Returns 0 when a
        Pod was refused (the next pass decides on it at once), else None."""
        refused = self._create_or_remember(state, decision, rest, created, target=False)
        self._delete(state, decision)
        return 0.0 if refused else None

    def _create(
        self,
        state: Pass,
        decision: Decision,
        trials: list[tuple[Trial, int, int]],
        created: list[str],
        target: bool = True,
    ) -> None:
        """The delay target of an http experiment and the trial hosts (not with `target`
        False), then the trial Pods `trials` of the decision's creates; each created Pod is
        remembered until the index has it."""
        if target:
            self._create_beside(state, decision, created)
        delay, spec = state.target, state.spec
        url = f"http://{delay.ip}:{self.config.target_port}/" if delay and delay.ip else None
        if spec.workload.target is not None:  # the user's own service
            url = spec.workload.target.resolved_url(state.namespace)
        hosts = {p.name: p for p in state.observed.pods}
        subject = spec.workload.target.service if spec.workload.target else None
        for trial, attempt, index in trials:
            host = hosts.get(decision.hosted.get(trial.name, ""))
            if trial.service_variant and subject is not None:  # its variant's copy
                url = copy_url(subject, state.name, trial.service_variant, state.namespace)
            pod_key = f"{state.namespace}/{trial_pod_name(state.name, trial, attempt, index)}"
            watches = self.done_watches if host is None and trial.pods == 1 else None
            unprobed = watches is not None and watches.reserve(pod_key)
            pod = build_trial_pod(
                experiment=state.name, namespace=state.namespace,
                uid=state.body["metadata"]["uid"], spec=spec, trial=trial, attempt=attempt,
                config=self.config, target_url=url, pod=index,
                locust_address=decision.locust_masters.get(trial.name), hosted=bool(host),
                unprobed=unprobed,
            )  # fmt: skip
            view: PodView | None = None
            if host is not None:
                view = self._start_on(host, pod, state)
            else:
                try:
                    new = self.kube.create_pod(pod)
                except BaseException:
                    if watches is not None and unprobed:
                        watches.forget(pod_key)  # not created: its watch is free
                    raise
                if new and index == 0:
                    self.metrics.trials_started.inc()
                view = replace(view_pod(pod), created=state.observed.now)
            if view is not None:
                state.memory.created[pod["metadata"]["name"]] = (time.monotonic(), view)
                created.append(pod["metadata"]["name"])

    def _create_beside(self, state: Pass, decision: Decision, created: list[str]) -> None:
        """The delay target of an http experiment (once, while trials are left), and the
        trial hosts the decision makes (isolation: process)."""
        spec, uid = state.spec, state.body["metadata"]["uid"]
        unfinished = len(state.observed.recorded) < len(state.observed.trials)
        waiting = state.admission.place is not None
        needed = unfinished and not waiting and not decision.failure
        if spec.workload.delay_target and state.target is None and needed:
            manifest = build_target_pod(
                experiment=state.name, namespace=state.namespace, uid=uid, spec=spec,
                config=self.config,
            )  # fmt: skip
            self.kube.create_pod(manifest)
            created.append(manifest["metadata"]["name"])
        for index in decision.hosts_create:
            manifest = build_host_pod(
                experiment=state.name, namespace=state.namespace, uid=uid, spec=spec,
                config=self.config, index=index, token=secrets.token_urlsafe(24),
            )  # fmt: skip
            self.kube.create_pod(manifest)
            made = replace(view_pod(manifest), created=state.observed.now)
            state.memory.created[manifest["metadata"]["name"]] = (time.monotonic(), made)
            created.append(manifest["metadata"]["name"])

    def _start_on(self, host: PodView, pod: dict[str, Any], state: Pass) -> PodView | None:
        """A trial started on a trial host (its attempt is counted already): the host runs the
        Pod's command as a process. One the host did not take is a lost attempt: the next
        pass, finding it nowhere, starts it again."""
        try:
            view = start_trial(host, self.config.host_port, pod)
        except HostUnavailable as error:
            logging.getLogger(__name__).warning(
                "%s/%s: trial host %s did not start %s: %s",
                *state.key, host.name, pod["metadata"]["name"], error,
            )  # fmt: skip
            return None
        self.metrics.trials_started.inc()
        return view

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
        views = {p.name: p for p in state.observed.pods}
        for pod_name in dict.fromkeys(decision.delete):
            if pod_name in memory.deleted:
                continue
            hosted = views.get(pod_name)
            host = views.get(hosted.host or "") if hosted is not None else None
            if hosted is not None and hosted.host:  # a trial run by a host: the host lets it go
                if host is None or not host.ip:
                    continue  # its host is gone, and the trial with it
                try:
                    forget_trial(host, self.config.host_port, pod_name)
                except HostUnavailable as error:  # the next pass tries again
                    logging.getLogger(__name__).warning("%s/%s: %s", *state.key, error)
                    continue
            else:
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
        # No Event per succeeded trial: status records each, and at thousands of trials one
        # POST each was half the operator's writes. A failure is worth a Warning each;
        # trials skipped together (abortOnFail) are one Event.
        skipped = [e for e in decision.finished if e.skipped]
        for entry in decision.finished:
            if entry.failed:
                event("Warning", "TrialFailed", f"{entry.name}: {entry.message or ''}")
        if skipped:
            names = ", ".join(e.name for e in skipped[:3])
            more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
            message = f"{len(skipped)} trial(s) skipped ({names}{more}): {skipped[0].message or ''}"
            event("Normal", "TrialsSkipped", message[:1000])
        if new.finished and not old.finished:
            if decision.failure:
                event("Warning", decision.failure_reason or "Failed", decision.failure[:1000])
            if new.phase == Phase.SUCCEEDED:
                event("Normal", "Completed", new.best or "all trials succeeded")
            else:
                failed, total = progress.trials_failed, progress.trials_total
                event("Warning", "Failed", f"{failed} of {total} trials failed")
