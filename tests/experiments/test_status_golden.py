"""What each backend writes for the same trials: the local backend's result.json status and
the operator's status patches, built by the one builder (cxlab.experiments.status.build_status). The
operator side runs the real Reconciler against a stand-in for the apiserver that records
what it is asked to do; the trial Pods end with a frozen real Result (golden/result.json).
Regenerate golden/status.json with CXLAB_UPDATE_GOLDEN=1 after an intended change."""

from __future__ import annotations

import copy
import json
import os
from datetime import UTC, datetime
from typing import Any

from helpers import NODE
from helpers.golden import GOLDEN, result

from cxlab.analysis.outcome import TrialOutcome
from cxlab.config import OperatorConfig
from cxlab.controller.experiment_pass import Reconciler
from cxlab.controller.metrics import OperatorMetrics
from cxlab.experiments.plan import Trial, plan_trials
from cxlab.experiments.pod_view import view_pod
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.results_store import SUFFIX, with_full_results
from cxlab.experiments.status import ExperimentStatus
from cxlab.local.backend import local_status

STARTED = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
ENDED = datetime(2026, 11, 23, 10, 1, tzinfo=UTC)
DOCUMENT = {
    "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
    "metadata": {"name": "gold"},
    "spec": {"workload": {"type": "sleep", "tasks": 5, "rtt": "1ms"},
             "models": [{"model": "threads", "workers": [1, 2]}, {"model": "asyncio"}]},
}  # fmt: skip
EXPERIMENT = parse_experiment(DOCUMENT)
# the spec as both backends keep it in startedSpec: every field, defaults included
SPEC = EXPERIMENT.spec.model_dump(by_alias=True, exclude_none=True)
FAILING = "001-threads-w2-rtt1ms-r1"  # ends with exit 1 on both backends


class RecordingKube:
    """The apiserver as the Reconciler sees it: Pods it created, statuses it wrote."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.config_maps: dict[str, dict[str, Any]] = {}

    def add_to_config_map(self, manifest: dict[str, Any]) -> None:
        held = self.config_maps.setdefault(manifest["metadata"]["name"], copy.deepcopy(manifest))
        held["binaryData"].update(manifest["binaryData"])

    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return list(self.config_maps.values())

    def write_status(
        self, namespace: str, name: str, document: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        status = copy.deepcopy(ExperimentStatus.read(document).document())  # as a valid status
        # what a status points at is stored before it
        stored = {
            f"{k[: -len(SUFFIX)]}" for m in self.config_maps.values() for k in m["binaryData"]
        }
        assert all(e["name"] in stored for e in status.get("trials") or [] if "resultsIn" in e)
        assert "summaryIn" not in status.get("summary", {}) or "summary" in stored
        self.statuses.append(copy.deepcopy(status))
        return {"metadata": {"resourceVersion": str(len(self.statuses))}, "status": status}

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        self.pods[manifest["metadata"]["name"]] = copy.deepcopy(manifest)
        return True

    def delete_pod(self, namespace: str, name: str) -> None:
        self.pods.pop(name, None)

    def list_nodes(self) -> list[dict[str, Any]]:
        return [NODE]

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get(name)


def end_pod(pod: dict[str, Any], trial: Trial) -> None:
    """The kubelet's part: the trial's runner ran and exited."""
    failing = trial.name == FAILING
    terminated = {
        "exitCode": 1 if failing else 0, "reason": "Error" if failing else "Completed",
        "message": "boom" if failing else json.dumps(result(trial)),
        "finishedAt": "2026-11-23T10:00:30Z",
    }  # fmt: skip
    pod["spec"]["nodeName"] = "node-1"
    pod["status"] = {
        "phase": "Failed" if failing else "Succeeded", "startTime": "2026-11-23T10:00:20Z",
        "containerStatuses": [{"name": "runner", "state": {"terminated": terminated}}],
    }  # fmt: skip


def operator_status() -> dict[str, Any]:
    """The status as the operator writes it, with the full trial entries from its ConfigMaps,
    as `cxlab report cx/NAME` reads it."""
    kube = RecordingKube()
    moments = iter([STARTED] + [ENDED] * 50)
    reconciler = Reconciler(kube, OperatorConfig(), OperatorMetrics(), clock=lambda: next(moments))  # type: ignore[arg-type]
    body: dict[str, Any] = {
        "apiVersion": DOCUMENT["apiVersion"], "kind": DOCUMENT["kind"], "spec": SPEC,
        "metadata": {"name": "gold", "namespace": "lab", "uid": "u-1", "generation": 1},
    }  # fmt: skip
    by_name = {t.name: t for t in plan_trials(EXPERIMENT.spec)}
    for _ in range(20):
        reconciler.reconcile(body, [view_pod(p) for p in kube.pods.values()], lambda *_: None)
        body["status"] = kube.statuses[-1]
        if body["status"]["phase"] in ("Succeeded", "Failed"):
            assert not any("result" in e for e in body["status"]["trials"])  # compact in status
            assert "points" not in body["status"]["summary"]
            written = ExperimentStatus.read(body["status"])
            return with_full_results(written, kube.config_maps.values()).document()
        for pod in kube.pods.values():
            if "status" not in pod:
                end_pod(pod, by_name[pod["metadata"]["labels"]["cxlab.dev/trial"]])
    raise AssertionError(f"the operator did not finish: {kube.statuses[-1]}")


def local_run_status() -> dict[str, Any]:
    trials = plan_trials(EXPERIMENT.spec)
    outcomes = [
        TrialOutcome(t, None, "runner exited 1: boom")
        if t.name == FAILING
        else TrialOutcome(t, result(t))
        for t in trials
    ]
    first = local_status(EXPERIMENT, trials, [], set(), None, STARTED)
    return local_status(EXPERIMENT, trials, outcomes, set(), first, ENDED).document()


def test_the_local_status_is_the_operators_but_for_pods() -> None:
    on_cluster = operator_status()
    # what only a cluster has: the wait for capacity, the Pod's attempt and node per trial,
    # the failed Pod's reason
    assert on_cluster.pop("queuedSeconds") == 0.0
    for entry in on_cluster["trials"]:
        assert entry.pop("attempts") == 1 and entry.pop("node") == "node-1"
    failed = next(e for e in on_cluster["trials"] if e["name"] == FAILING)
    assert failed["message"].startswith("runner exited 1") and failed["message"].endswith("boom")
    failed["message"] = "runner exited 1: boom"
    assert local_run_status() == on_cluster


def test_the_status_is_the_golden_one() -> None:
    status = local_run_status()
    path = GOLDEN / "status.json"
    text = json.dumps(status, indent=2, sort_keys=True) + "\n"
    if os.environ.get("CXLAB_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.read_text() == text, "the status changed: CXLAB_UPDATE_GOLDEN=1 to accept it"
