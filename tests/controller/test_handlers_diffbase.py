"""The operator's diff base for kopf is kopf's own, built without deep-copying the status it
drops (cxlab.controller.handlers.SpecDiffBase): the same essence for the same object."""

from __future__ import annotations

import copy

import kopf
from helpers.refusals import experiment

from cxlab.controller.handlers import SpecDiffBase


def test_the_essence_is_kopfs_own_for_an_experiment_and_a_pod() -> None:
    body = experiment()
    body["metadata"] |= {
        "annotations": {"cxlab.dev/last-handled-configuration": "{}", "team": "perf",
                        "kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "labels": {"app": "lab"}, "resourceVersion": "9", "finalizers": ["cxlab.dev/finalizer"],
    }  # fmt: skip
    body["status"] = {"phase": "Running", "trials": [{"name": f"t{i}"} for i in range(50)]}
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "runner"}]}, "status": {"phase": "Running"},
    }  # fmt: skip
    kopfs = kopf.AnnotationsDiffBaseStorage(prefix="cxlab.dev", key="last-handled-configuration")
    ours = SpecDiffBase(prefix="cxlab.dev", key="last-handled-configuration")
    for original in (body, pod):
        before = copy.deepcopy(original)
        essence = ours.build(body=kopf.Body(original), extra_fields=set())
        assert essence == kopfs.build(body=kopf.Body(original), extra_fields=set())
        assert "status" not in essence and original == before  # nothing of it changed
        fields = ["status.phase"]  # as kopf passes it when a handler asks for a status field
        assert ours.build(body=kopf.Body(original), extra_fields=fields) == kopfs.build(
            body=kopf.Body(original), extra_fields=fields
        )
