"""An experiment document over a small runnable spec."""

from __future__ import annotations

from typing import Any


def document(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "workload": {"type": "sleep", "tasks": 100, "rtt": "100ms"},
        "models": [{"model": "threads", "workers": [10, 0]}],
    }
    base.update(spec)
    return {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "demo"},
        "spec": base,
    }
