"""The operator's final read of a trial Pod whose tasks have ended, against a real runner on
this machine standing in for the Pod (its IP 127.0.0.1): a trial far shorter than the
progress interval is read all the same, once, its Result taken from the runner (the Pod is
seen as ended with it, before its container exits), and its runner then exits."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime

from helpers import runner_argv
from helpers.specs import document

from cxlab.config import OperatorConfig
from cxlab.controller.live import LiveReads
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.experiments.decide import Decision
from cxlab.experiments.plan import Trial, plan_trials
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import trial_pod_name
from cxlab.experiments.resource import parse_experiment

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _done(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/done", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def running_pod(trial: Trial, ready: bool) -> PodView:
    """The trial's Pod, running on this machine (the runner at 127.0.0.1 stands for it)."""
    return PodView(
        name=trial_pod_name("ex", trial, 1, 0), component="trial", trial=trial.name,
        attempt=1, phase="Running", reason=None, deleting=False, created=NOW, ip="127.0.0.1",
        node="node-1", ready=ready, exit_code=None, termination_reason=None,
        termination_message=None, unschedulable=None, container_started=True,
    )  # fmt: skip


def test_a_short_trial_is_read_once_its_tasks_end_and_its_runner_then_exits(
    metrics_port: int,
) -> None:
    spec = parse_experiment(document()).spec
    trial = plan_trials(spec)[0]
    runner = subprocess.Popen(
        runner_argv("asyncio", "--workload", "sleep", "--tasks", "2", "--rtt", "1ms",
                    "--metrics-port", str(metrics_port), "--final-read", "30s"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        config = OperatorConfig(metrics_port=metrics_port)  # progress interval 10 s
        live = LiveReads(config, OperatorMetrics())
        memory = Memory()
        pod = running_pod(trial, ready=False)
        # Its tasks run (not Ready): nothing is read, not even at the progress interval.
        assert live.final_reads("ex", [trial], [pod], memory, NOW) == [pod]
        live.running("ex", Decision(running=[(trial, pod)]), 2, memory, NOW)
        assert trial.name not in memory.scraped
        deadline = time.monotonic() + 20
        while not _done(metrics_port):  # the kubelet's readiness probe, standing in
            assert runner.poll() is None and time.monotonic() < deadline, "never done"
            time.sleep(0.02)
        ready = replace(pod, ready=True)
        [seen] = live.final_reads("ex", [trial], [ready], memory, NOW)
        assert trial.name in memory.scraped
        stdout, stderr = runner.communicate(timeout=10)  # not the 30 s: the read came
        assert runner.returncode == 0 and "no final read" not in stderr, stderr
        # Seen as ended, with the very Result its termination message would carry.
        assert (seen.phase, seen.exit_code, seen.finished) == ("Succeeded", 0, NOW)
        assert seen.termination_message == stdout
        # Read once: a pass that still sees the Pod Ready does not read it again, and still
        # sees it ended with its Result until the Pod goes.
        [again] = live.final_reads("ex", [trial], [ready], memory, NOW)
        assert memory.final_reads == {trial.name: {pod.name: True}} and again == seen
        assert live.final_reads("ex", [trial], [], memory, NOW) == []
        assert memory.results == {} and memory.final_reads == {}
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()


def test_a_runner_that_lingers_for_other_scrapers_is_read_but_its_pod_is_not_taken_as_ended(
    metrics_port: int,
) -> None:
    """With CXLAB_RUNNER_LINGER the Pod stays until its container ends (Prometheus scrapes it
    meanwhile): the final read happens, the Result is left to the termination message."""
    trial = plan_trials(parse_experiment(document()).spec)[0]
    runner = subprocess.Popen(
        runner_argv("asyncio", "--workload", "sleep", "--tasks", "2", "--rtt", "1ms",
                    "--metrics-port", str(metrics_port), "--final-read", "30s", "--linger", "2s"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        live = LiveReads(OperatorConfig(metrics_port=metrics_port, linger="2s"), OperatorMetrics())
        memory = Memory()
        pod = running_pod(trial, ready=True)
        deadline = time.monotonic() + 20
        while not _done(metrics_port):
            assert runner.poll() is None and time.monotonic() < deadline, "never done"
            time.sleep(0.02)
        assert live.final_reads("ex", [trial], [pod], memory, NOW) == [pod]  # still running
        assert trial.name in memory.scraped and memory.results == {}
    finally:
        runner.kill()
        runner.communicate()


def test_a_status_write_for_progress_alone_needs_a_count_that_moved_and_the_interval() -> None:
    live = LiveReads(OperatorConfig(progress_interval_seconds=10.0), OperatorMetrics())
    memory = Memory()

    def status(done: int | None, elapsed: float, phase: str = "Running") -> dict[str, object]:
        entry = {"trial": "t", "pod": "p", "tasks": 100, "tasksDone": done,
                 "elapsedSeconds": elapsed}  # fmt: skip
        return {"phase": phase, "progress": {"running": [entry]}}

    # A change of substance is written at once, and starts the interval.
    assert live.worth_writing(status(None, 1.0, "Pending"), status(None, 1.0), memory)
    # Its elapsed time alone is never worth a write, however long since the last one (a trial
    # whose count cannot be read would otherwise cost a write every interval).
    memory.last_progress_patch -= 3600
    assert not live.worth_writing(status(None, 1.0), status(None, 3601.0), memory)
    assert not live.worth_writing(status(40, 1.0), status(40, 3601.0), memory)
    # A count that moved: once the interval has passed since the last write, not before.
    assert live.worth_writing(status(40, 1.0), status(60, 3601.0), memory)
    assert not live.worth_writing(status(60, 1.0), status(80, 3602.0), memory)
    memory.last_progress_patch -= 10
    assert live.worth_writing(status(60, 1.0), status(80, 3602.0), memory)
