"""The runner contract's data files (workloads/CONTRACT.md): the Result's JSON Schema and
runner-contract.json (models, workloads, exit statuses, buckets, metrics), shared by the
runners, the spec, the operator and the CRD generator. Read as package data, so an installed
package and the images find them without the repository's layout; the Go runner's tests read
the same files by path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

RESULT_SCHEMA = "result-v1.schema.json"
# A trial host's (cxlab_runner.trial_host) token, in its environment: it answers only the
# requests that show it (Authorization: Bearer), /healthz aside. The operator sets it on the
# host Pods it makes and reads it back from their spec.
HOST_TOKEN_ENV = "CXLAB_HOST_TOKEN"


def result_schema() -> dict[str, Any]:
    """The Result's JSON Schema (version 1)."""
    document: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath(RESULT_SCHEMA).read_text(encoding="utf-8")
    )
    return document


RUNNER_CONTRACT = "runner-contract.json"


@dataclass(frozen=True)
class Limit:
    """Inclusive bounds of one numeric flag: integers, or durations as text ("1h")."""

    min: Any
    max: Any


@dataclass(frozen=True)
class RunnerContract:
    """runner-contract.json, typed: what both runners accept, expose and write."""

    flags: dict[str, str | None]  # name: default as text, None for a required flag
    python_models: tuple[str, ...]
    go_models: tuple[str, ...]
    workloads: tuple[str, ...]
    connections: tuple[str, ...]
    target_url_schemes: tuple[str, ...]  # --target-url: http (the delay target), https
    target_modes: tuple[str, ...]  # --target-mode: delay (adds ?rtt=), direct (as given)
    http_methods: tuple[str, ...]  # --method
    forbidden_headers: frozenset[str]  # --header names the runner sets itself (lower case)
    max_headers: int  # --header and --header-env together
    max_response_header_bytes: int  # an answer's head, status line to blank line, at most
    failure_kinds: tuple[str, ...]  # a failed task's kind: connect, timeout, tls, status, other
    exit_status: dict[str, int]
    result_max_bytes: int
    latency_buckets_seconds: tuple[float, ...]
    latency_histogram: dict[str, int]  # the Result's: initialSchema, minSchema, maxBuckets
    latency_significant_digits: int  # latencies and their figures: never fixed decimals
    metrics: dict[str, str]  # name: Prometheus type
    limits: dict[str, Limit]  # flag (or spec field) name: inclusive bounds
    arrival_processes: tuple[str, ...]  # --arrival: uniform, poisson
    on_busy: tuple[str, ...]  # --on-busy: queue, drop
    timeline_max_intervals: int  # a duration run's timeline holds at most this many intervals
    min_issued_share: float  # a generator issuing less of its schedule on time is saturated

    @property
    def models(self) -> tuple[str, ...]:
        return self.python_models + self.go_models


@cache
def runner_contract() -> RunnerContract:
    document = json.loads(
        resources.files(__package__).joinpath(RUNNER_CONTRACT).read_text(encoding="utf-8")
    )
    return RunnerContract(
        flags=dict(document["flags"]),
        python_models=tuple(document["models"]["python"]),
        go_models=tuple(document["models"]["go"]),
        workloads=tuple(document["workloads"]),
        connections=tuple(document["connections"]),
        target_url_schemes=tuple(document["targetUrlSchemes"]),
        target_modes=tuple(document["targetModes"]),
        http_methods=tuple(document["httpRequest"]["methods"]),
        forbidden_headers=frozenset(document["httpRequest"]["forbiddenHeaders"]),
        max_headers=int(document["httpRequest"]["maxHeaders"]),
        max_response_header_bytes=int(document["httpResponse"]["maxHeaderBytes"]),
        failure_kinds=tuple(document["failureKinds"]["kinds"]),
        exit_status=dict(document["exitStatus"]),
        result_max_bytes=int(document["resultMaxBytes"]),
        latency_buckets_seconds=tuple(float(b) for b in document["latencyBucketsSeconds"]),
        latency_histogram={
            k: int(v) for k, v in document["latencyHistogram"].items() if k != "description"
        },
        latency_significant_digits=int(document["latencyFigures"]["significantDigits"]),
        metrics=dict(document["metrics"]),
        limits={
            name: Limit(bounds["min"], bounds["max"])
            for name, bounds in document["limits"].items()
            if name != "description"
        },
        arrival_processes=tuple(document["arrivalProcesses"]),
        on_busy=tuple(document["onBusy"]),
        timeline_max_intervals=int(document["timeline"]["maxIntervals"]),
        min_issued_share=float(document["saturation"]["minIssuedShare"]),
    )
