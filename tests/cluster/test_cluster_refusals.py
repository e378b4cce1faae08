"""What only the cluster can tell ends the experiment as Failed with a condition naming the
field to change, within a bounded time, never Running forever: a trial Pod the apiserver
refuses, an image the kubelet cannot pull. (The decisions, without a cluster:
tests/controller/test_experiment_pass_refusals.py.)"""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.cluster import Lab, experiment_spec

ASYNCIO = [{"model": "asyncio"}]


def failed_condition(experiment: dict[str, Any]) -> dict[str, Any]:
    found = {c["type"]: c for c in (experiment.get("status") or {}).get("conditions", [])}
    return found["Failed"]


def test_a_pod_the_apiserver_refuses_fails_the_experiment(lab: Lab) -> None:
    # The CRD's schema takes it; Pod validation does not: with Exists, value must be empty.
    placement = {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}
    spec = experiment_spec([{"model": "asyncio"}, {"model": "threads", "workers": [2]}],
                           placement=placement)  # fmt: skip
    lab.apply("refused", spec)
    experiment = lab.wait_finished("refused", timeout=30)
    status = experiment["status"]
    assert status["phase"] == "Failed", status
    failed = failed_condition(experiment)
    assert failed["status"] == "True" and failed["reason"] == "PodRejected", failed
    # the apiserver's own words, the field to change, no Python repr
    assert "is invalid" in failed["message"] and "spec.tolerations[0]" in failed["message"]
    assert "check spec.placement.tolerations" in failed["message"]
    assert "HTTP response" not in failed["message"] and "(422)" not in failed["message"]
    assert [e["phase"] for e in status["trials"]] == ["Failed", "Failed"]
    assert all(e["message"] == failed["message"] for e in status["trials"])
    events = {e.reason: e.message for e in lab.events("refused", "PodRejected")}
    assert "is invalid" in events["PodRejected"]
    assert not lab.pods("refused")
    # finished, it stays so: no more attempts, no more writes of a different status
    time.sleep(3)
    assert lab.get("refused")["status"] == status


@pytest.mark.parametrize(
    ("models", "workload"),
    [(ASYNCIO, None),  # the trial Pods cannot start
     ([{"model": "locust"}], {"type": "http", "tasks": 5, "rtt": "10ms"})],  # nor the target
)  # fmt: skip
def test_an_image_that_cannot_be_pulled_fails_the_experiment(
    lab: Lab, models: list[dict[str, Any]], workload: dict[str, Any] | None
) -> None:
    # A tag of the runner's own repository (allowed by any image policy) that no registry
    # serves here: the kubelet's pull fails. The harness's operator gives it 6 s.
    image = "cxlab.dev/runner:does-not-exist"
    lab.apply("unpulled", experiment_spec(models, workload, image=image, repetitions=2))
    experiment = lab.wait_finished("unpulled", timeout=90)
    status = experiment["status"]
    assert status["phase"] == "Failed", status
    failed = failed_condition(experiment)
    assert failed["status"] == "True" and failed["reason"] == "ImagePullFailed", failed
    assert "ErrImagePull" in failed["message"] or "ImagePullBackOff" in failed["message"]
    assert f"check spec.image ({image})" in failed["message"]
    assert [e["phase"] for e in status["trials"]] == ["Failed", "Failed"]
    assert "ImagePullFailed" in {e.reason for e in lab.events("unpulled", "ImagePullFailed")}
    lab.wait("unpulled", lambda _: not lab.pods("unpulled"), timeout=30)
