"""The parts the rules' examples are written with (cxlab.rules: each rule's valid and invalid
spec, as the fields they set over EXAMPLE, the smallest spec that runs)."""

from __future__ import annotations

from typing import Any

# The smallest spec that runs; every example sets some of its fields and keeps the rest.
EXAMPLE: dict[str, Any] = {
    "workload": {"type": "sleep", "tasks": 10, "rtt": "10ms"},
    "models": [{"model": "threads", "workers": [2]}],
}
CAPACITY: dict[str, Any] = {"target": {"ratePerSecond": 100, "latency": {"max": "1s"}}}
SECRET: dict[str, Any] = {"secretKeyRef": {"name": "api-token", "key": "token"}}
ARRIVAL: dict[str, Any] = {"ratePerSecond": 10, "duration": "1s"}


def workload(**fields: Any) -> dict[str, Any]:
    """A counted workload without rtt: each example says which timing fields it has."""
    return {"type": "sleep", "tasks": 10, **fields}


def arriving(**arrival: Any) -> dict[str, Any]:
    """A workload of tasks arriving at a rate (no tasks: they are an output)."""
    return {"type": "sleep", "rtt": "10ms", "arrival": {**ARRIVAL, **arrival}}


def looping(**fields: Any) -> dict[str, Any]:
    """A closed loop for a time."""
    return {"type": "sleep", "rtt": "10ms", "duration": "2s", **fields}


def targeted(**target: Any) -> dict[str, Any]:
    """An http workload calling a Service of the experiment's namespace (service=None: none,
    for a url)."""
    fields = {"service": {"name": "api", "port": 80}, **target}
    return {
        "type": "http",
        "tasks": 10,
        "target": {k: v for k, v in fields.items() if v is not None},
    }


def served(**service: Any) -> dict[str, Any]:
    """A service subject (the Deployment api, behind the Service api) and the http workload
    that calls it (deployment=None: a command's, listening on 127.0.0.1:8000)."""
    subject = {k: v for k, v in {"deployment": "api", **service}.items() if v is not None}
    target = (
        {"service": {"name": "api", "port": 80}}
        if "deployment" in subject
        else {"url": "http://127.0.0.1:8000/"}
    )
    return {"service": subject, "workload": {"type": "http", "tasks": 10, "target": target}}
