"""One reconcile pass as the event-driven loop runs it: it never writes over a newer status,
and it says when the clock alone needs the next pass."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import Apiserver as InMemory
from helpers import ApiserverBase, run_runner
from helpers.pods import pod
from helpers.refusals import experiment

from cxlab.config import OperatorConfig
from cxlab.controller.experiment_pass import Reconciler
from cxlab.controller.kube import PodRefused, StaleStatus
from cxlab.controller.metrics import OperatorMetrics
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import view_pod
from cxlab.experiments.pods import trial_pod_name
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.status import ExperimentStatus

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


class Apiserver(ApiserverBase):
    """Status writes with a resourceVersion precondition, as the apiserver checks it."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.writes: list[str | None] = []  # the version each write was made against
        self.created: list[str] = []

    def write_status(
        self, namespace: str, name: str, document: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        status = copy.deepcopy(ExperimentStatus.read(document).document())  # as a valid status
        self.writes.append(version)
        if version != self.body["metadata"]["resourceVersion"]:
            raise StaleStatus(f"{name} changed since version {version}")
        self.body = copy.deepcopy(self.body) | {"status": copy.deepcopy(status)}
        self.body["metadata"]["resourceVersion"] = str(int(version or 0) + 1)
        return self.body

    def get_experiment(self, namespace: str, name: str, full: bool = False) -> dict[str, Any]:
        return copy.deepcopy(self.body)

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        self.created.append(manifest["metadata"]["name"])
        return True

    def delete_pod(self, namespace: str, name: str) -> None:
        pass


def reconciler(kube: Apiserver, **config: Any) -> Reconciler:
    return Reconciler(kube, OperatorConfig(**config), OperatorMetrics(), clock=lambda: NOW)  # type: ignore[arg-type]


def test_a_pass_from_a_stale_status_writes_nothing_and_runs_again_on_the_fresh_object() -> None:
    body = experiment() | {"status": {}}
    body["metadata"]["resourceVersion"] = "5"
    kube = Apiserver(copy.deepcopy(body))
    stale = copy.deepcopy(body)
    stale["metadata"]["resourceVersion"] = "4"  # the watch has not delivered version 5 yet
    done = reconciler(kube).reconcile(stale, [], lambda *_: None)
    assert kube.writes == ["4", "5"]  # refused, then made against the object read again
    assert len(kube.created) == 1  # the Pods of the pass that wrote, not of the stale one
    assert done.written is not None and done.written["metadata"]["resourceVersion"] == "6"


def test_a_pass_asks_to_look_again_when_a_starting_pods_grace_or_a_progress_read_is_due() -> None:
    body = experiment()
    body["metadata"]["resourceVersion"] = "1"
    trials = plan_trials(parse_experiment(body).spec)
    first = trials[0].name
    body["status"] = {"phase": "Running", "attempts": {first: 1}}
    kube = Apiserver(copy.deepcopy(body))
    config = {"unschedulable_grace_seconds": 15, "progress_interval_seconds": 10}
    created = NOW - timedelta(seconds=3)
    unplaced = pod(first, phase="Pending", created=created, ready=False, ip=None, node=None,
                   unschedulable="0/1 nodes are available: 1 Insufficient cpu.")  # fmt: skip
    done = reconciler(kube, **config).reconcile(copy.deepcopy(body), [unplaced], lambda *_: None)
    assert done.recheck_seconds is not None and 11.9 < done.recheck_seconds < 12.2  # 15 - 3
    running = replace(unplaced, phase="Running", unschedulable=None, ready=True, ip="10.0.0.9")
    done = reconciler(kube, **config).reconcile(copy.deepcopy(body), [running], lambda *_: None)
    assert done.recheck_seconds is not None and 6.9 < done.recheck_seconds < 7.2  # 10 - 3


def test_a_pod_just_created_is_not_read_back_nor_made_again_before_its_event() -> None:
    body = experiment()
    body["metadata"]["resourceVersion"] = "1"
    kube = Apiserver(copy.deepcopy(body))
    reads: list[str] = []
    kube.get_pod = lambda namespace, name: reads.append(name)  # type: ignore[method-assign,assignment,func-returns-value]
    operator = reconciler(kube)
    done = operator.reconcile(copy.deepcopy(body), [], lambda *_: None)
    assert done.written is not None and len(kube.created) == 1
    # the next pass comes before the index has the Pod: no read, no second Pod, no new attempt
    again = operator.reconcile(done.written, [], lambda *_: None)
    assert reads == [] and len(kube.created) == 1
    assert (
        again.written is None
        or again.written["status"]["attempts"] == done.written["status"]["attempts"]
    )


def test_once_the_sweep_ended_what_follows_it_starts_without_a_verification() -> None:
    """A rate search asked for without a verification, and a calibration: each runs on the
    cluster after the sweep (the operator once waited for a verification to look)."""
    for follows, first in (
        ({"capacity": {"target": {"ratePerSecond": 50, "latency": {"max": "1s"}}},
          "search": {"rate": {"start": 20}}}, "001-s1-threads-w4-rtt10ms-a20-r1"),
        ({"calibration": True}, "001-calcpu-sequential-w1-r1"),
    ):  # fmt: skip
        body = experiment(models=[{"model": "threads", "workers": [4]}], **follows)
        body["metadata"]["resourceVersion"] = "1"
        [only] = plan_trials(parse_experiment(body).spec)
        measured = {"phase": "Succeeded", "name": only.name, "model": "threads", "workers": 4,
                    "gomaxprocs": None, "rttSeconds": 0.01, "repetition": 1}  # fmt: skip
        body["status"] = {"phase": "Running", "trials": [measured]}
        kube = Apiserver(copy.deepcopy(body))
        reconciler(kube).reconcile(copy.deepcopy(body), [], lambda *_: None)
        assert kube.created == ["bad-t001-a1"], (follows, kube.created)
        assert kube.body["status"]["attempts"] == {first: 1}, kube.body["status"]


def test_a_trial_that_succeeds_posts_no_event_one_that_fails_a_warning() -> None:
    result_text = json.dumps(run_runner("asyncio", "--workload", "sleep", "--tasks", "2"))
    body = experiment()
    body["metadata"]["resourceVersion"] = "1"
    first, second = plan_trials(parse_experiment(body).spec)[:2]
    body["status"] = {"phase": "Running", "attempts": {first.name: 1, second.name: 1}}
    kube = Apiserver(copy.deepcopy(body))
    events: list[tuple[str, str, str]] = []
    ended = [
        pod(first.name, phase="Succeeded", exit_code=0, termination_message=result_text,
            name=f"{body['metadata']['name']}-{first.name}-a1"),
        pod(second.name, phase="Failed", exit_code=1, termination_reason="Error",
            termination_message="boom", name=f"{body['metadata']['name']}-{second.name}-a1"),
    ]  # fmt: skip
    reconciler(kube).reconcile(copy.deepcopy(body), ended, lambda *e: events.append(e))
    recorded = {t["name"]: t["phase"] for t in kube.body["status"]["trials"]}
    assert recorded == {first.name: "Succeeded", second.name: "Failed"}
    trials = [(kind, reason) for kind, reason, _ in events if reason.startswith("Trial")]
    assert trials == [("Warning", "TrialFailed")]


def test_a_crowded_pass_creates_one_pod_and_leaves_the_rest_for_later() -> None:
    """After a takeover every experiment's pass waits at once: each records what ended and
    starts one trial, and its other creates and deletes wait until the others have done
    the same (PassReport.later), so no experiment waits for all the others' Pods."""
    body = experiment(parallelism=3, models=[{"model": "threads", "workers": [1, 2, 4, 8]}])
    body["metadata"]["resourceVersion"] = "1"
    trials = plan_trials(parse_experiment(body).spec)
    body["status"] = {"phase": "Running", "attempts": {trials[0].name: 1}}
    result = json.dumps(run_runner("threads", "--workload", "sleep", "--workers", "1",
                                   "--tasks", "2"))  # fmt: skip
    ended = pod(trials[0].name, phase="Succeeded", exit_code=0, termination_message=result)
    deleted: list[str] = []
    for crowded in (False, True):
        kube = Apiserver(copy.deepcopy(body))
        kube.delete_pod = lambda namespace, name: deleted.append(name)  # type: ignore[method-assign]
        deleted.clear()
        passes = Reconciler(kube, OperatorConfig(), OperatorMetrics(), clock=lambda: NOW,  # type: ignore[arg-type]
                            crowded=lambda crowded=crowded: crowded)  # fmt: skip
        done = passes.reconcile(copy.deepcopy(body), [ended], lambda *_: None)
        recorded = [t["name"] for t in kube.body["status"]["trials"]]
        assert recorded == [trials[0].name]  # recorded, and its next trials counted, first
        assert set(kube.body["status"]["attempts"]) == {t.name for t in trials[1:4]}
        if not crowded:
            assert len(kube.created) == 3 and deleted == [ended.name] and done.later is None
            continue
        assert len(kube.created) == 1 and deleted == []
        assert done.later is not None
        assert done.later() is None  # no refusal: no sooner pass
        assert len(kube.created) == 3 and deleted == [ended.name]


def test_a_refusal_in_the_rest_of_a_crowded_pass_ends_the_experiment_as_before() -> None:
    body = experiment(parallelism=3, models=[{"model": "threads", "workers": [1, 2, 4]}])
    body["metadata"]["resourceVersion"] = "1"
    kube = Apiserver(copy.deepcopy(body))
    created = kube.create_pod

    def refuse_the_second(manifest: dict[str, Any]) -> bool:
        if kube.created:
            raise PodRefused(manifest["metadata"]["name"], 422, "Invalid", "no such field")
        return created(manifest)

    kube.create_pod = refuse_the_second  # type: ignore[method-assign]
    passes = Reconciler(kube, OperatorConfig(), OperatorMetrics(), clock=lambda: NOW,  # type: ignore[arg-type]
                        crowded=lambda: True)  # fmt: skip
    events: list[tuple[str, str, str]] = []
    done = passes.reconcile(copy.deepcopy(body), [], lambda *e: events.append(e))
    assert len(kube.created) == 1 and kube.body["status"]["phase"] == "Running"
    assert done.later is not None
    assert done.later() == 0  # refused: the next pass decides on it, at once
    assert len(kube.writes) == 1 and kube.body["status"]["phase"] == "Running"  # not here
    passes.reconcile(copy.deepcopy(kube.body), [], lambda *e: events.append(e))
    written = kube.body
    assert written["status"]["phase"] == "Failed" and len(kube.created) == 1
    failed = {c["type"]: c for c in written["status"]["conditions"]}["Failed"]
    assert failed["reason"] == "PodRejected" and "no such field" in failed["message"]
    assert ("Warning", "PodRejected") in [(kind, reason) for kind, reason, _ in events]


def test_the_next_trial_waits_for_its_predecessors_cores_only_where_nothing_else_has_room() -> None:
    """A Pod created while the one node's core is still held by the trial just recorded (its
    Pod deleted, not yet torn down) would wait out the scheduler's backoff; it is created by
    the pass the teardown brings instead. With room elsewhere, or nothing leaving, at once."""
    body = experiment()
    body["metadata"]["resourceVersion"] = "1"
    first, second = plan_trials(parse_experiment(body).spec)[:2]
    entry = {"phase": "Succeeded", "name": first.name, "model": "threads", "workers": 1,
             "gomaxprocs": None, "rttSeconds": 0.01, "repetition": 1}  # fmt: skip
    body["status"] = {"phase": "Running", "trials": [entry]}
    name = trial_pod_name(body["metadata"]["name"], first, 1, 0)
    one_core = {"metadata": {"name": "node-1"},
                "status": {"allocatable": {"cpu": "1", "memory": "16Gi"}}}  # fmt: skip
    for cpus, leaving, created in (
        ("1", [pod(first.name, name=name, deleting=True, ready=False)], 0),
        ("1", [pod(first.name, name=name, ready=False)], 0),  # recorded, not deleted yet
        ("1", [pod(first.name, name=name, phase="Succeeded", ready=False, deleting=True)], 1),
        ("1", [], 1),
        ("2", [pod(first.name, name=name, deleting=True, ready=False)], 1),
    ):
        kube = Apiserver(copy.deepcopy(body))
        node = copy.deepcopy(one_core)
        node["status"]["allocatable"]["cpu"] = cpus
        kube.list_nodes = lambda node=node: [node]  # type: ignore[method-assign]
        reconciler(kube).reconcile(copy.deepcopy(body), leaving, lambda *_: None)
        assert len(kube.created) == created, (cpus, leaving, kube.created)
        assert kube.created in ([], [trial_pod_name(body["metadata"]["name"], second, 1, 0)])


def test_the_sweeps_end_reads_the_results_once_and_hands_its_plan_to_the_next_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What follows the sweep (a calibration, one trial at a time) is planned once, by the
    decision that ends what runs, from the Results read back once in that pass; the next pass
    starts from that plan (no read, no planning). A restarted operator, which remembers no
    plan, plans it again from the same Results (one read): the same trials."""
    import cxlab.controller.experiment_pass as experiment_pass
    import cxlab.experiments.followups as followups

    planned: list[str] = []
    for module in (followups, experiment_pass):
        real = module.trials_of

        def counted(*args: Any, real: Any = real, module: Any = module) -> Any:
            planned.append(module.__name__.rsplit(".", 1)[-1])
            return real(*args)

        monkeypatch.setattr(module, "trials_of", counted)
    body = experiment(parallelism=2, calibration=True,
                      models=[{"model": "threads", "workers": [1, 2]}])  # fmt: skip
    kube = InMemory(body)
    result = run_runner("threads", "--workload", "sleep", "--workers", "1", "--tasks", "2")
    process = reconciler(kube)  # type: ignore[arg-type]
    ended: set[str] = set()
    passes: list[tuple[list[str], list[str]]] = []  # (reads, plans) of each pass
    while not kube.body.get("status", {}).get("completionTime") and len(passes) < 12:
        if len(passes) == 4:
            process = reconciler(kube)  # type: ignore[arg-type]  # a restart
        views = [ended_view(m, result) if n in ended else view_pod(m)
                 for n, m in kube.pods.items()]  # fmt: skip
        kube.calls.clear()
        planned.clear()
        process.reconcile(copy.deepcopy(kube.body), views, lambda *_: None)
        passes.append(([c for c in kube.calls if c == "list ConfigMaps"], list(planned)))
        ended = set(kube.pods)  # the Pods there now end before the next pass
    status = kube.body["status"]
    assert status["phase"] == "Succeeded" and len(status["trials"]) == 4, status
    reads = [len(r) for r, _ in passes]
    plans = [p for _, p in passes]
    # 1 starts the sweep; 2 ends it, planning the calibration's first trial from the Results
    # in hand (none kept elsewhere yet); 3 starts it from that plan, reading nothing; 4 ends
    # it: one read, one plan. A restart: 5 plans again (one read) and starts the second; 6
    # ends it: one read, one plan, finished.
    assert reads == [0, 0, 0, 1, 1, 1], passes
    assert plans == [[], ["followups"], [], ["followups"], ["experiment_pass"], ["followups"]]


def ended_view(manifest: dict[str, Any], result: dict[str, Any]) -> Any:
    """A trial Pod as the kubelet leaves it: Succeeded, its Result the termination message."""
    return replace(view_pod(manifest), phase="Succeeded", exit_code=0,
                   termination_reason="Completed", termination_message=json.dumps(result),
                   node="node-1", ip="10.0.0.1", created=NOW)  # fmt: skip
