"""What a pass shows of the trials still running: their tasks done, read from the runners'
/metrics at most every progress interval; the final read of each Pod whose tasks have ended;
and whether a status is worth writing for it (a change of substance at once, the live counts
at most every interval)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from typing import Any

from cxlab.config import OperatorConfig
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.experiments.decide import Decision
from cxlab.experiments.plan import Trial, pod_indexes
from cxlab.experiments.pod_view import PodPhase, PodView
from cxlab.experiments.pods import COMPONENT_TRIAL, trial_pod_name
from cxlab.experiments.status import RunningTrial, running_entry
from cxlab.scrape import final_read, result_of, tasks_done
from cxlab_contract.durations import parse_duration


class LiveReads:
    def __init__(self, config: OperatorConfig, metrics: OperatorMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.final_reads_on = parse_duration(config.final_read) > 0
        # A runner that lingers after its tasks is there for other scrapers (Prometheus): its
        # Pod is not let go before its container ends, so its Result is not taken early.
        self.results_early = parse_duration(config.linger) == 0

    def running(
        self,
        experiment: str,
        decision: Decision,
        tasks: int | None,
        memory: Memory,
        moment: datetime,
    ) -> list[RunningTrial]:
        """One entry per running trial: its tasks done summed over its Pods (None until every
        Pod answers), from its first Pod's creation. Read once the trial has run a progress
        interval, then at most every interval (a pass a Pod event brings reads nothing of
        that); and each Pod once its tasks have ended (its final read, _final_reads)."""
        by_trial: dict[str, list[PodView]] = {}
        trials: dict[str, Trial] = {}
        masters: set[str] = set()  # a distributed Locust master counts only at its end
        for trial, pod in decision.running:
            by_trial.setdefault(trial.name, []).append(pod)
            trials[trial.name] = trial
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
            total = None if trials[trial_name].verify else tasks  # a verification: arrivals
            running.append(running_entry(trial_name, first.name, total, done, elapsed))
        # Trials whose first Pods this pass creates are running as of this write: the pass
        # the new Pod's event brings then has nothing to add (one status patch per trial).
        for trial, attempt, index in decision.create:
            if trial.name not in by_trial and index == _first_pod(trial):
                pod_name = trial_pod_name(experiment, trial, attempt, index)
                total = None if trial.verify else tasks
                running.append(running_entry(trial.name, pod_name, total, None, 0.0))
        return running

    def final_reads(
        self, experiment: str, trials: list[Trial], pods: list[PodView], memory: Memory,
        moment: datetime,
    ) -> list[PodView]:  # fmt: skip
        """Each trial Pod whose tasks have ended (Ready: its runner's /done) is read once,
        however short the trial: first its Result (GET /result), then its final metrics (the
        runner waits for that read, then exits). A trial counts as scraped once every Pod of
        its attempt said it finished. Returns the Pods with those that gave their Result seen
        as ended with it: the trial is recorded now, not after the container's exit, the
        kubelet's next relist (up to a second) and the Pod's status update. Not with a
        linger (CXLAB_RUNNER_LINGER): deleting the Pod would cut the runner's linger short."""
        if not self.final_reads_on:
            return pods
        by_name = {t.name: t for t in trials}
        seen_trials = set()
        for pod in pods:
            trial = by_name.get(pod.trial or "")
            if trial is None or pod.component != COMPONENT_TRIAL:
                continue
            seen_trials.add(trial.name)
            tried = memory.final_reads.setdefault(trial.name, {})
            if pod.name in tried or pod.deleting or not pod.ready:
                continue
            if not (pod.ip and pod.phase == PodPhase.RUNNING):
                continue
            began = time.monotonic()
            port, timeout = self.config.metrics_port, self.config.scrape_timeout_seconds
            result = result_of(pod.ip, port, timeout)
            finished = final_read(pod.ip, port, timeout)
            self.metrics.scrape_duration.observe(time.monotonic() - began)
            self.metrics.scrapes.labels("ok" if finished else "error").inc()
            tried[pod.name] = finished
            if result is not None and self.results_early:
                memory.results[pod.name] = result
            names = [trial_pod_name(experiment, trial, pod.attempt, i) for i in pod_indexes(trial)]
            if all(tried.get(name) for name in names):
                memory.scraped.add(trial.name)
        for gone in memory.final_reads.keys() - seen_trials:
            del memory.final_reads[gone]
        present = {p.name for p in pods}
        memory.results = {n: r for n, r in memory.results.items() if n in present}
        return [_ended_with(p, memory.results[p.name], moment) if _taken(p, memory) else p
                for p in pods]  # fmt: skip

    def _tasks_done(self, pod: PodView) -> int | None:
        if not (pod.ip and pod.phase == PodPhase.RUNNING):
            return None
        began = time.monotonic()
        done = tasks_done(pod.ip, self.config.metrics_port, self.config.scrape_timeout_seconds)
        self.metrics.scrape_duration.observe(time.monotonic() - began)
        self.metrics.scrapes.labels("error" if done is None else "ok").inc()
        return done

    def worth_writing(self, before: dict[str, Any], after: dict[str, Any], memory: Memory) -> bool:
        """Every change of substance at once; the live task counts at most every interval
        (`before`, `after`: the status documents). The elapsed time alone is never worth a
        write (it goes with the next): a trial whose count cannot be read, or does not move,
        would otherwise cost a write every interval for as long as it runs (at 200
        experiments PATCHes per trial went from 3.4 to 1.5 with this and the queue's
        cheaper placement, which shortened the run)."""
        if _substance(before) != _substance(after):
            memory.last_progress_patch = time.monotonic()
            return True
        if _counts(before) == _counts(after):
            return False
        if time.monotonic() - memory.last_progress_patch >= self.config.progress_interval_seconds:
            memory.last_progress_patch = time.monotonic()
            return True
        return False


def _taken(pod: PodView, memory: Memory) -> bool:
    """The Pod gave its Result at the final read and has not ended on its own yet."""
    return pod.name in memory.results and not PodPhase(pod.phase).ended and not pod.deleting


def _ended_with(pod: PodView, result: str, moment: datetime) -> PodView:
    """The Pod as it will end: succeeded, its Result the one its runner gave."""
    return replace(
        pod, phase=PodPhase.SUCCEEDED, ready=False, exit_code=0, termination_reason="Completed",
        termination_message=result, finished=moment,
    )  # fmt: skip


def _first_pod(trial: Trial) -> int:
    return min(pod_indexes(trial))


def _counts(document: dict[str, Any]) -> list[Any]:
    """The running trials' task counts (the rest of their entries is substance, or elapsed)."""
    return [r.get("tasksDone") for r in (document.get("progress") or {}).get("running") or []]


def _substance(document: dict[str, Any]) -> dict[str, Any]:
    """A status document but for what moves on its own: running trials' counts and elapsed
    time, and the conditions' transition times."""
    progress = dict(document.get("progress") or {})
    progress["running"] = [
        {k: v for k, v in r.items() if k not in ("tasksDone", "elapsedSeconds")}
        for r in progress.get("running") or []
    ]
    conditions = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in document.get("conditions") or []
    ]
    return {**document, "progress": progress, "conditions": conditions}
