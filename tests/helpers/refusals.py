"""Experiments whose Pods the cluster refuses, and their specs."""

from __future__ import annotations

from typing import Any


def experiment(**change: Any) -> dict[str, Any]:
    body = document(**change)
    body["metadata"] |= {"namespace": "lab", "uid": "u-1", "generation": 1}
    return body


def document(**spec: Any) -> dict[str, Any]:
    base = {
        "workload": {"type": "sleep", "tasks": 5, "rtt": "10ms"},
        "models": [{"model": "threads", "workers": [1, 2, 4]}],
    }
    return {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "bad"},
        "spec": base | spec,
    }
