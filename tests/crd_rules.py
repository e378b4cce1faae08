"""Every CEL rule of the CRD (x-kubernetes-validations), each with one valid and one invalid
manifest and the field that both the apiserver and `cxlab plan` must name for the invalid one.

tests/test_crd_rules.py fails when the CRD has a rule without a case here (or a case names a
rule the CRD no longer has) and runs every case through `cxlab plan`;
tests/cluster/test_crd_rules_on_apiserver.py applies every case with
`kubectl apply --dry-run=server`.

A case's valid manifest is the nearest one the rule accepts (a boundary where there is one),
and its invalid manifest breaks that rule and no other: both tests expect exactly one error.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cxlab.experiments.spec import API_VERSION, KIND

BASE_SPEC: dict[str, Any] = {
    "workload": {"type": "sleep", "tasks": 10, "rtt": "10ms"},
    "models": [{"model": "threads", "workers": [2]}],
}
NAME = "rule-check"
CAPACITY = {"target": {"ratePerSecond": 100, "latency": {"max": "1s"}}}


def manifest(name: str = NAME, **spec: Any) -> dict[str, Any]:
    """The base manifest with some top-level spec fields replaced."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {**copy.deepcopy(BASE_SPEC), **copy.deepcopy(spec)},
    }


def workload(**fields: Any) -> dict[str, Any]:
    """A workload without rtt: each case says which timing fields it has."""
    return {"type": "sleep", "tasks": 10, **fields}


ARRIVAL = {"ratePerSecond": 10, "duration": "1s"}


def arriving(**arrival: Any) -> dict[str, Any]:
    """A workload of tasks arriving at a rate (no tasks: they are an output)."""
    return {"type": "sleep", "rtt": "10ms", "arrival": {**ARRIVAL, **arrival}}


def looping(**fields: Any) -> dict[str, Any]:
    """A closed loop for a time."""
    return {"type": "sleep", "rtt": "10ms", "duration": "2s", **fields}


@dataclass(frozen=True)
class Case:
    path: str
    """Where the rule sits in the CRD's schema: spec.models[] for every model entry, "" for
    the root of the resource."""
    message: str
    """The rule's message, exactly as in the CRD: the apiserver's rejection must carry it."""
    valid: dict[str, Any]
    invalid: dict[str, Any]
    field: str
    """The field both name for the invalid manifest, as Kubernetes writes it:
    spec.models[1].workers."""
    cluster_only: bool = False
    """A rule of the cluster's alone: `cxlab plan` (and cxlab run) accept the invalid manifest
    (valueFrom.env names a variable of cxlab run's own)."""

    @property
    def rule(self) -> tuple[str, str]:
        return (self.path, self.message)

    @property
    def id(self) -> str:
        words = re.sub(r"[^a-zA-Z0-9]+", "-", self.message).strip("-")
        return f"{self.path or 'root'}:{words[:36].rstrip('-')}"


SEVEN_MODELS_MAX_TRIALS = {
    # 20 per RTT (1 + 10 + 2 + 2 + 2 + 2 + 1) x 5 RTTs x 10 repetitions: every term of the
    # unrolled CEL sum is used, up to the 7th model.
    "workload": {"type": "http", "tasks": 10, "rtts": ["1ms", "2ms", "3ms", "4ms", "5ms"]},
    "models": [
        {"model": "sequential"},
        {"model": "threads", "workers": list(range(1, 11))},
        {"model": "processes", "workers": [1, 2]},
        {"model": "gevent", "workers": [1, 2]},
        {"model": "asyncio", "workers": [1, 2]},
        {"model": "goroutines", "gomaxprocs": [1, 2]},
        {"model": "locust", "workers": [1]},
    ],
    "repetitions": 10,
}
ONE_TRIAL_MORE = {  # 21 x 5 x 10 = 1050, the one more per RTT through the pods term
    **SEVEN_MODELS_MAX_TRIALS,
    "models": [
        *SEVEN_MODELS_MAX_TRIALS["models"][:6],
        {"model": "locust", "workers": [1], "pods": [1, 2]},
    ],
}


def targeted(**target: Any) -> dict[str, Any]:
    """An http workload calling a Service of the experiment's namespace (service=None: none,
    for a url)."""
    fields = {"service": {"name": "api", "port": 80}, **target}
    return {
        "type": "http",
        "tasks": 10,
        "target": {k: v for k, v in fields.items() if v is not None},
    }


SECRET = {"secretKeyRef": {"name": "api-token", "key": "token"}}

CASES = [
    Case(
        "",
        "metadata.name may have at most 40 characters: trial Pods are named after it",
        valid=manifest("n" * 40),
        invalid=manifest("n" * 41),
        field="metadata.name",
    ),
    Case(
        "",
        "metadata.name must be a DNS label: lower-case letters, digits and '-', starting and "
        "ending with a letter or digit",
        valid=manifest("rtt-sweep-2"),
        invalid=manifest("rtt.sweep"),
        field="metadata.name",
    ),
    Case(
        "spec",
        "search.rate probes against capacity.target.latency: set capacity.target",
        valid=manifest(capacity=CAPACITY, search={"rate": {}}),
        invalid=manifest(search={"rate": {}}),
        field="spec",
    ),
    Case(
        "spec",
        "search.rate: Locust's users are closed loops and cannot run at a rate; leave locust "
        "out of an experiment that searches",
        valid=manifest(capacity=CAPACITY, search={"rate": {}}),
        invalid=manifest(
            workload=workload(type="http", rtt="10ms"),
            models=[{"model": "locust"}],
            capacity=CAPACITY,
            search={"rate": {}},
        ),
        field="spec",
    ),
    Case(
        "spec",
        "model locust drives HTTP users and needs workload type http",
        valid=manifest(workload=workload(type="http", rtt="10ms"), models=[{"model": "locust"}]),
        invalid=manifest(models=[{"model": "locust"}]),
        field="spec",
    ),
    Case(
        "spec",
        "each model may be listed once: put all its worker counts in one entry",
        valid=manifest(models=[{"model": "threads", "workers": [2, 4]}, {"model": "asyncio"}]),
        invalid=manifest(
            models=[{"model": "threads", "workers": [2]}, {"model": "threads", "workers": [4]}]
        ),
        field="spec",
    ),
    Case(
        "spec",
        "processes may start at most 512 worker processes (0 workers means one per task)",
        valid=manifest(
            workload=workload(tasks=512, rtt="10ms"),
            models=[{"model": "processes", "workers": [512, 0]}],
        ),
        invalid=manifest(  # 0 workers: one process per task
            workload=workload(tasks=513, rtt="10ms"),
            models=[{"model": "processes", "workers": [2, 0]}],
        ),
        field="spec",
    ),
    Case(
        "spec",
        "threads may start at most 30000 threads in one process (0 workers means one per task)",
        valid=manifest(
            workload=workload(tasks=30000, rtt="10ms"),
            models=[{"model": "threads", "workers": [30000, 0]}],
        ),
        invalid=manifest(  # 0 workers: one thread per task
            workload=workload(tasks=30001, rtt="10ms"),
            models=[{"model": "threads", "workers": [2, 0]}],
        ),
        field="spec",
    ),
    Case(
        "spec",
        "the matrix (models x workers x gomaxprocs x pods x rtts x rates x repetitions) may "
        "hold at most 1000 trials: split the experiment",
        valid=manifest(**SEVEN_MODELS_MAX_TRIALS),
        invalid=manifest(**ONE_TRIAL_MORE),
        field="spec",
    ),
    Case(
        "spec",
        "isolation: process runs each trial as one process in a host Pod: a trial of several "
        "Pods (models[].pods above 1) needs isolation: pod",
        valid=manifest(isolation="process", models=[{"model": "asyncio", "pods": [1]}]),
        invalid=manifest(isolation="process", models=[{"model": "asyncio", "pods": [1, 2]}]),
        field="spec",
    ),
    Case(
        "spec",
        "isolation: process keeps host Pods for the whole experiment, which Kueue admits one "
        "trial Pod at a time: leave queueName out, or use isolation: pod",
        valid=manifest(isolation="pod", queueName="lab"),
        invalid=manifest(isolation="process", queueName="lab"),
        field="spec",
    ),
    Case(
        "spec",
        "a trial of N Pods needs at least N tasks (one each): raise workload.tasks or lower "
        "models[].pods",
        valid=manifest(
            workload=workload(tasks=3, rtt="10ms"), models=[{"model": "asyncio", "pods": [3]}]
        ),
        invalid=manifest(
            workload=workload(tasks=3, rtt="10ms"), models=[{"model": "asyncio", "pods": [4]}]
        ),
        field="spec",
    ),
    Case(
        "spec",
        "a fraction of a CPU (resources.cpu) cannot be pinned to a core: set pinning: preferred "
        "(or whole CPUs)",
        valid=manifest(resources={"cpu": 0.5}, pinning="preferred"),
        invalid=manifest(resources={"cpu": 0.5}),
        field="spec",
    ),
    Case(
        "spec",
        "capacity: a capacity plan counts whole cores per Pod, and resources.cpu is a fraction "
        "of a CPU: set whole CPUs, or leave capacity out",
        valid=manifest(resources={"cpu": 2}, capacity=CAPACITY),
        invalid=manifest(resources={"cpu": 0.5}, pinning="preferred", capacity=CAPACITY),
        field="spec",
    ),
    Case(
        "spec.workload",
        "workloads sleep and http need exactly one of rtt or rtts",
        valid=manifest(workload=workload(rtts=["10ms", "20ms"])),
        invalid=manifest(workload=workload(rtt="10ms", rtts=["20ms"])),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "rtt/rtts apply to sleep and http only",
        valid=manifest(workload=workload(type="cpu", iterations=1000)),
        invalid=manifest(workload=workload(type="cpu", iterations=1000, rtt="10ms")),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "iterations is required for cpu and applies to cpu only",
        valid=manifest(workload=workload(type="cpu", iterations=1000)),
        invalid=manifest(workload=workload(type="cpu")),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "hold is required for the hold workload and applies to it only",
        valid=manifest(workload=workload(type="hold", hold="1s")),
        invalid=manifest(workload=workload(rtt="10ms", hold="1s")),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "connection and responseBytes apply to the http workload only",
        valid=manifest(
            workload=workload(type="http", rtt="10ms", connection="reuse", responseBytes=128)
        ),
        invalid=manifest(workload=workload(rtt="10ms", responseBytes=128)),
        field="spec.workload",
    ),
    Case(
        "spec.workload.rtt",
        "must be a duration between 0s and 1h",
        valid=manifest(workload=workload(rtt="1h")),
        invalid=manifest(workload=workload(rtt="1h0.001s")),
        field="spec.workload.rtt",
    ),
    Case(
        "spec.workload.rtts[]",
        "must be a duration between 0s and 1h",
        valid=manifest(workload=workload(rtts=["0s", "60m"])),
        invalid=manifest(workload=workload(rtts=["1ms", "61m"])),
        field="spec.workload.rtts[1]",
    ),
    Case(
        "spec.workload.hold",
        "must be a duration between 0s and 1h",
        valid=manifest(workload=workload(type="hold", hold="59m59s")),
        invalid=manifest(workload=workload(type="hold", hold="2h")),
        field="spec.workload.hold",
    ),
    Case(
        "spec.capacity.target.latency.max",
        "must be a duration between 1ms and 1h",
        valid=manifest(capacity={"target": {"ratePerSecond": 1, "latency": {"max": "1ms"}}}),
        invalid=manifest(capacity={"target": {"ratePerSecond": 1, "latency": {"max": "0.9ms"}}}),
        field="spec.capacity.target.latency.max",
    ),
    Case(
        "spec.capacity.target.rtt",
        "must be a duration between 0s and 1h",
        valid=manifest(
            workload=workload(rtt="1h"),
            capacity={"target": {"ratePerSecond": 1, "latency": {"max": "1h"}, "rtt": "60m"}},
        ),
        invalid=manifest(
            workload=workload(rtt="1h"),
            capacity={"target": {"ratePerSecond": 1, "latency": {"max": "1h"}, "rtt": "2h"}},
        ),
        field="spec.capacity.target.rtt",
    ),
    Case(
        "spec.resources.memory",
        "must be between 64Mi and 1Ti",
        valid=manifest(resources={"memory": "64Mi"}),
        invalid=manifest(resources={"memory": "63Mi"}),
        field="spec.resources.memory",
    ),
    Case(
        "spec.placement.nodeSelector",
        "every key must be a label key: [DNS-subdomain prefix/]name, the name at most 63 "
        "letters, digits, '-', '_' or '.' (at most 317 in all)",
        valid=manifest(placement={"nodeSelector": {"example.com/pool": "bench", "a" * 63: ""}}),
        invalid=manifest(placement={"nodeSelector": {"pool name": "bench"}}),
        field="spec.placement.nodeSelector",
    ),
    Case(
        "spec.queueTimeout",
        "must be a duration between 1s and 168h",
        valid=manifest(queueTimeout="168h"),
        invalid=manifest(queueTimeout="169h"),
        field="spec.queueTimeout",
    ),
    Case(
        "spec.trialTimeout",
        "must be a duration between 1s and 24h",
        valid=manifest(trialTimeout="24h"),
        invalid=manifest(trialTimeout="0s"),
        field="spec.trialTimeout",
    ),
    Case(
        "spec.models[]",
        "gomaxprocs applies to goroutines only, not to the Python models",
        valid=manifest(models=[{"model": "asyncio"}, {"model": "goroutines", "gomaxprocs": [1]}]),
        invalid=manifest(models=[{"model": "asyncio"}, {"model": "threads", "gomaxprocs": [1]}]),
        field="spec.models[1]",
    ),
    Case(
        "spec.models[]",
        "pool applies to threads (onDemand or prestarted) and processes (prestarted only)",
        valid=manifest(
            models=[
                {"model": "threads", "pool": "prestarted"},
                {"model": "processes", "pool": "prestarted"},
            ]
        ),
        invalid=manifest(models=[{"model": "threads"}, {"model": "processes", "pool": "onDemand"}]),
        field="spec.models[1]",
    ),
    Case(
        "spec.models[]",
        "sequential runs one task at a time: leave workers out",
        valid=manifest(models=[{"model": "sequential", "workers": [1]}]),
        invalid=manifest(models=[{"model": "sequential", "workers": [2]}]),
        field="spec.models[0]",
    ),
    Case(
        "spec.models[].workers",
        "a worker count is listed twice",
        valid=manifest(models=[{"model": "asyncio"}, {"model": "threads", "workers": [2, 4]}]),
        invalid=manifest(models=[{"model": "asyncio"}, {"model": "threads", "workers": [2, 2]}]),
        field="spec.models[1].workers",
    ),
    Case(
        "spec.models[].gomaxprocs",
        "a gomaxprocs value is listed twice",
        valid=manifest(models=[{"model": "goroutines", "gomaxprocs": [1, 0]}]),
        invalid=manifest(models=[{"model": "goroutines", "gomaxprocs": [1, 1]}]),
        field="spec.models[0].gomaxprocs",
    ),
    Case(
        "spec.models[].pods",
        "a Pod count is listed twice",
        valid=manifest(models=[{"model": "threads", "workers": [2], "pods": [1, 2]}]),
        invalid=manifest(models=[{"model": "threads", "workers": [2], "pods": [2, 2]}]),
        field="spec.models[0].pods",
    ),
    Case(
        "spec",
        "workload.arrival: locust's users are closed loops (each waits for its answer before "
        "its next request), so they cannot keep an arrival rate: drop locust from models, or "
        "use tasks or duration",
        valid=manifest(workload={**arriving(), "type": "http"}, models=[{"model": "asyncio"}]),
        invalid=manifest(workload={**arriving(), "type": "http"}, models=[{"model": "locust"}]),
        field="spec",
    ),
    Case(
        "spec",
        "workload.duration: a distributed Locust trial (pods above 1) ends on its master's "
        "aggregated task count: run locust for a duration in one Pod, or use tasks",
        valid=manifest(workload=looping(type="http"), models=[{"model": "locust", "workers": [2]}]),
        invalid=manifest(
            workload=looping(type="http"),
            models=[{"model": "locust", "workers": [2], "pods": [1, 2]}],
        ),
        field="spec",
    ),
    Case(
        "spec",
        "workload.duration: a closed loop for a time needs its workers; workers 0 (one per task) "
        "has no count of tasks to go by",
        valid=manifest(workload=looping(), models=[{"model": "sequential"}]),
        invalid=manifest(workload=looping(), models=[{"model": "asyncio", "workers": [4, 0]}]),
        field="spec",
    ),
    Case(
        "spec",
        "workload.arrival: processes with workers 0 would fork one process per arrival: give "
        "processes' workers",
        valid=manifest(workload=arriving(), models=[{"model": "processes", "workers": [4]}]),
        invalid=manifest(workload=arriving(), models=[{"model": "processes", "workers": [0]}]),
        field="spec",
    ),
    Case(
        "spec.workload",
        "workload needs exactly one of tasks (a closed burst), duration (a closed loop for a "
        "time) or arrival (tasks arriving at a rate)",
        valid=manifest(workload=looping()),
        invalid=manifest(workload=looping(tasks=10)),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "warmup applies to duration runs: workload.duration or arrival",
        valid=manifest(workload=looping(warmup="1s")),
        invalid=manifest(workload=workload(rtt="10ms", warmup="1s")),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "warmup must be shorter than the run",
        valid=manifest(workload=looping(warmup="1999ms")),
        invalid=manifest(workload=looping(warmup="2s")),
        field="spec.workload",
    ),
    Case(
        "spec.workload.arrival",
        "arrival needs a duration (how long tasks arrive) or stages (which last their sum), "
        "not both",
        valid=manifest(workload=arriving(duration="1s")),
        invalid=manifest(workload=arriving(stages=[{"duration": "1s", "target": 10}])),
        field="spec.workload.arrival",
    ),
    Case(
        "spec.workload.arrival",
        "arrival: stages set the rate over time; ratesPerSecond cannot sweep it",
        valid=manifest(
            workload={**arriving(), "arrival": {"stages": [{"duration": "2s", "target": 10}]}}
        ),
        invalid=manifest(
            workload={
                **arriving(),
                "arrival": {"ratesPerSecond": [5], "stages": [{"duration": "2s", "target": 10}]},
            }
        ),
        field="spec.workload.arrival",
    ),
    Case(
        "spec.workload.arrival",
        "arrival needs exactly one of ratePerSecond or ratesPerSecond",
        valid=manifest(
            workload={**arriving(), "arrival": {"ratesPerSecond": [5, 10], "duration": "1s"}}
        ),
        invalid=manifest(workload=arriving(ratesPerSecond=[5, 10])),
        field="spec.workload.arrival",
    ),
    Case(
        "spec.workload.arrival.ratesPerSecond",
        "a rate is listed twice",
        valid=manifest(
            workload={**arriving(), "arrival": {"ratesPerSecond": [5, 10], "duration": "1s"}}
        ),
        invalid=manifest(
            workload={**arriving(), "arrival": {"ratesPerSecond": [10, 10], "duration": "1s"}}
        ),
        field="spec.workload.arrival.ratesPerSecond",
    ),
    Case(
        "spec.workload.arrival.duration",
        "must be a duration between 1s and 24h",
        valid=manifest(workload=arriving(duration="24h", ratePerSecond=100)),
        invalid=manifest(workload=arriving(duration="999ms", ratePerSecond=100)),
        field="spec.workload.arrival.duration",
    ),
    Case(
        "spec.capacity.verify.duration",
        "must be a duration between 1s and 24h",
        valid=manifest(capacity={"target": CAPACITY["target"], "verify": {"duration": "24h"}}),
        invalid=manifest(capacity={"target": CAPACITY["target"], "verify": {"duration": "0s"}}),
        field="spec.capacity.verify.duration",
    ),
    Case(
        "spec.search.rate.duration",
        "must be a duration between 1s and 24h",
        valid=manifest(
            capacity={"target": CAPACITY["target"]}, search={"rate": {"duration": "1s"}}
        ),
        invalid=manifest(
            capacity={"target": CAPACITY["target"]}, search={"rate": {"duration": "25h"}}
        ),
        field="spec.search.rate.duration",
    ),
    Case(
        "spec.workload.arrival.maxLag",
        "must be a duration between 1ms and 1m",
        valid=manifest(workload=arriving(maxLag="1ms")),
        invalid=manifest(workload=arriving(maxLag="61s")),
        field="spec.workload.arrival.maxLag",
    ),
    Case(
        "spec.workload.arrival.stages[].duration",
        "must be a duration between 0s and 24h",
        valid=manifest(
            workload={
                **arriving(),
                "arrival": {
                    "stages": [{"duration": "0s", "target": 10}, {"duration": "2s", "target": 10}]
                },
            }
        ),
        invalid=manifest(
            workload={
                **arriving(),
                "arrival": {
                    "stages": [{"duration": "25h", "target": 10}, {"duration": "2s", "target": 10}]
                },
            }
        ),
        field="spec.workload.arrival.stages[0].duration",
    ),
    Case(
        "spec.workload.duration",
        "must be a duration between 1s and 24h",
        valid=manifest(workload=looping(duration="1s")),
        invalid=manifest(workload=looping(duration="24h1s")),
        field="spec.workload.duration",
    ),
    Case(
        "spec.workload.warmup",
        "must be a duration between 0s and 24h",
        valid=manifest(workload=looping(duration="24h", warmup="0s")),
        invalid=manifest(  # stages: no CEL compares the warm-up with their sum, only this
            workload={
                **arriving(),
                "warmup": "24h1s",
                "arrival": {"stages": [{"duration": "24h", "target": 10}]},
            }
        ),
        field="spec.workload.warmup",
    ),
    # spec.workload.target: the user's own service
    Case(
        "spec.workload",
        "target applies to the http workload only",
        valid=manifest(workload=targeted()),
        invalid=manifest(workload={**targeted(), "type": "cpu", "iterations": 10}),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "target: your service's latency is measured, not simulated: leave rtt and rtts out",
        valid=manifest(workload=targeted()),
        invalid=manifest(workload={**targeted(), "rtt": "10ms"}),
        field="spec.workload",
    ),
    Case(
        "spec.workload",
        "target: responseBytes is the delay target's: leave it out",
        valid=manifest(workload=targeted()),
        invalid=manifest(workload={**targeted(), "responseBytes": 10}),
        field="spec.workload",
    ),
    Case(
        "spec.workload.target",
        "workload.target needs exactly one of service or url",
        valid=manifest(workload=targeted()),
        invalid=manifest(workload=targeted(url="http://api.example:8080/")),
        field="spec.workload.target",
    ),
    Case(
        "spec.workload.target",
        "tls applies to https targets: use an https url or service scheme",
        valid=manifest(
            workload=targeted(
                service={"name": "api", "port": 443, "scheme": "https"},
                tls={"insecureSkipVerify": True},
            )
        ),
        invalid=manifest(workload=targeted(tls={"insecureSkipVerify": True})),
        field="spec.workload.target",
    ),
    Case(
        "spec.workload.target",
        "a header is listed twice (names are case-insensitive)",
        valid=manifest(workload=targeted(headers=[{"name": "X-A", "value": "1"}])),
        invalid=manifest(
            workload=targeted(
                headers=[{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "2"}]
            )
        ),
        field="spec.workload.target",
    ),
    Case(
        "spec.workload.target",
        "headers[].valueFrom.env names a variable of cxlab run's own: on a cluster use "
        "valueFrom.secretKeyRef",
        valid=manifest(workload=targeted(headers=[{"name": "X-A", "valueFrom": SECRET}])),
        invalid=manifest(
            workload=targeted(headers=[{"name": "X-A", "valueFrom": {"env": "API_TOKEN"}}])
        ),
        field="spec.workload.target",
        cluster_only=True,
    ),
    Case(
        "spec.workload.target.url",
        "url's port must be 1-65535",
        valid=manifest(workload={**targeted(), "target": {"url": "http://api.example:65535/"}}),
        invalid=manifest(workload={**targeted(), "target": {"url": "http://api.example:65536/"}}),
        field="spec.workload.target.url",
    ),
    Case(
        "spec.workload.target.headers[]",
        "a header needs exactly one of value or valueFrom",
        valid=manifest(workload=targeted(headers=[{"name": "X-A", "valueFrom": SECRET}])),
        invalid=manifest(
            workload=targeted(headers=[{"name": "X-A", "value": "1", "valueFrom": SECRET}])
        ),
        field="spec.workload.target.headers[0]",
    ),
    Case(
        "spec.workload.target.headers[].name",
        "is set by the runner itself or changes how the request is framed: leave it out",
        valid=manifest(workload=targeted(headers=[{"name": "X-Host", "value": "a"}])),
        invalid=manifest(workload=targeted(headers=[{"name": "Host", "value": "a"}])),
        field="spec.workload.target.headers[0].name",
    ),
    Case(
        "spec.workload.target.headers[].valueFrom",
        "valueFrom needs exactly one of secretKeyRef or env",
        valid=manifest(workload=targeted(headers=[{"name": "X-A", "valueFrom": SECRET}])),
        invalid=manifest(workload=targeted(headers=[{"name": "X-A", "valueFrom": {}}])),
        field="spec.workload.target.headers[0].valueFrom",
    ),
    Case(
        "spec.workload.target.tls",
        "tls: give a ca, or insecureSkipVerify: true, not both",
        valid=manifest(
            workload=targeted(
                url="https://api.example/",
                service=None,
                tls={
                    "ca": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}},
                    "insecureSkipVerify": False,
                },
            )
        ),
        invalid=manifest(
            workload=targeted(
                url="https://api.example/",
                service=None,
                tls={
                    "ca": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}},
                    "insecureSkipVerify": True,
                },
            )
        ),
        field="spec.workload.target.tls",
    ),
    Case(
        "spec.workload.target.tls.ca",
        "tls.ca needs exactly one of configMapKeyRef or secretKeyRef",
        valid=manifest(
            workload=targeted(
                url="https://api.example/",
                service=None,
                tls={"ca": {"secretKeyRef": {"name": "ca", "key": "ca.crt"}}},
            )
        ),
        invalid=manifest(
            workload=targeted(
                url="https://api.example/",
                service=None,
                tls={
                    "ca": {
                        "secretKeyRef": {"name": "ca", "key": "ca.crt"},
                        "configMapKeyRef": {"name": "ca", "key": "ca.crt"},
                    }
                },
            )
        ),
        field="spec.workload.target.tls.ca",
    ),
    Case(
        "spec.workload.target.timeout",
        "must be a duration between 1ms and 10m",
        valid=manifest(workload=targeted(timeout="10m")),
        invalid=manifest(workload=targeted(timeout="10m1ms")),
        field="spec.workload.target.timeout",
    ),
    # spec.objectives: what each names must exist, and each has one metric
    Case(
        "spec",
        "objectives[].models must name models of spec.models",
        valid=manifest(objectives=[{"latency": {"max": "1s"}, "models": ["threads"]}]),
        invalid=manifest(objectives=[{"latency": {"max": "1s"}, "models": ["asyncio"]}]),
        field="spec",
    ),
    Case(
        "spec",
        "objectives[].workers must name worker counts of the models in the objective's scope",
        valid=manifest(objectives=[{"latency": {"max": "1s"}, "workers": [2]}]),
        invalid=manifest(objectives=[{"latency": {"max": "1s"}, "workers": [3]}]),
        field="spec",
    ),
    Case(
        "spec",
        "objectives[].dropped: only arrivals are dropped (workload.arrival)",
        valid=manifest(workload=arriving(), objectives=[{"dropped": {"max": 0}}]),
        invalid=manifest(objectives=[{"dropped": {"max": 0}}]),
        field="spec",
    ),
    Case(
        "spec",
        "objectives[].efficiency: a run for a time has no floor, so no efficiency: use "
        "workload.tasks, or another metric",
        valid=manifest(objectives=[{"efficiency": {"min": 0.5}}]),
        invalid=manifest(workload=looping(), objectives=[{"efficiency": {"min": 0.5}}]),
        field="spec",
    ),
    Case(
        "spec",
        "objectives[].startSkew: every trial runs one Pod, which has no start skew: give a "
        "model pods above 1",
        valid=manifest(
            models=[{"model": "threads", "workers": [2], "pods": [2]}],
            objectives=[{"startSkew": {"max": "10ms"}}],
        ),
        invalid=manifest(objectives=[{"startSkew": {"max": "10ms"}}]),
        field="spec",
    ),
    Case(
        "spec.objectives",
        "an objective name is listed twice",
        valid=manifest(
            objectives=[
                {"name": "a", "latency": {"max": "1s"}},
                {"name": "b", "latency": {"max": "2s"}},
            ]
        ),
        invalid=manifest(
            objectives=[
                {"name": "a", "latency": {"max": "1s"}},
                {"name": "a", "latency": {"max": "2s"}},
            ]
        ),
        field="spec.objectives",
    ),
    Case(
        "spec.objectives[]",
        "an objective needs exactly one metric: one of latency, failureRatio, throughput, "
        "efficiency, cpuPerTask, peakRss, startSkew, dropped",
        valid=manifest(objectives=[{"latency": {"max": "1s"}}]),
        invalid=manifest(objectives=[{"latency": {"max": "1s"}, "peakRss": {"max": "1Gi"}}]),
        field="spec.objectives[0]",
    ),
    Case(
        "spec.objectives[]",
        "scope recommended judges the recommended points themselves: leave models and workers "
        "out, or use scope every",
        valid=manifest(objectives=[{"latency": {"max": "1s"}, "scope": "recommended"}]),
        invalid=manifest(
            objectives=[{"latency": {"max": "1s"}, "scope": "recommended", "workers": [2]}]
        ),
        field="spec.objectives[0]",
    ),
    Case(
        "spec.objectives[]",
        "abortOnFail: the recommended point is known only at the end; use scope every",
        valid=manifest(objectives=[{"latency": {"max": "1s"}, "abortOnFail": True}]),
        invalid=manifest(
            objectives=[{"latency": {"max": "1s"}, "scope": "recommended", "abortOnFail": True}]
        ),
        field="spec.objectives[0]",
    ),
    Case(
        "spec.objectives[]",
        "abortOnFail: throughput and efficiency do not only worsen with load, so a breach at one "
        "point says nothing of the next: leave abortOnFail out",
        valid=manifest(objectives=[{"throughput": {"min": 10}}]),
        invalid=manifest(objectives=[{"throughput": {"min": 10}, "abortOnFail": True}]),
        field="spec.objectives[0]",
    ),
    Case(
        "spec.objectives[].models",
        "a model is listed twice",
        valid=manifest(objectives=[{"latency": {"max": "1s"}, "models": ["threads"]}]),
        invalid=manifest(objectives=[{"latency": {"max": "1s"}, "models": ["threads", "threads"]}]),
        field="spec.objectives[0].models",
    ),
    Case(
        "spec.objectives[].workers",
        "a worker count is listed twice",
        valid=manifest(objectives=[{"latency": {"max": "1s"}, "workers": [2]}]),
        invalid=manifest(objectives=[{"latency": {"max": "1s"}, "workers": [2, 2]}]),
        field="spec.objectives[0].workers",
    ),
    Case(
        "spec.objectives[].latency.max",
        "must be a duration between 1ms and 1h",
        valid=manifest(objectives=[{"latency": {"max": "1ms"}}]),
        invalid=manifest(objectives=[{"latency": {"max": "999us"}}]),
        field="spec.objectives[0].latency.max",
    ),
    Case(
        "spec.objectives[].cpuPerTask.max",
        "must be a duration between 1us and 1h",
        valid=manifest(objectives=[{"cpuPerTask": {"max": "1h"}}]),
        invalid=manifest(objectives=[{"cpuPerTask": {"max": "1h1s"}}]),
        field="spec.objectives[0].cpuPerTask.max",
    ),
    Case(
        "spec.objectives[].startSkew.max",
        "must be a duration between 1us and 1h",
        valid=manifest(
            models=[{"model": "threads", "workers": [2], "pods": [2]}],
            objectives=[{"startSkew": {"max": "1us"}}],
        ),
        invalid=manifest(
            models=[{"model": "threads", "workers": [2], "pods": [2]}],
            objectives=[{"startSkew": {"max": "999ns"}}],
        ),
        field="spec.objectives[0].startSkew.max",
    ),
    Case(
        "spec.objectives[].peakRss.max",
        "must be between 1Mi and 1Ti",
        valid=manifest(objectives=[{"peakRss": {"max": "1Mi"}}]),
        invalid=manifest(objectives=[{"peakRss": {"max": "1000Ki"}}]),
        field="spec.objectives[0].peakRss.max",
    ),
]


def declared_rules(crd_path: Path) -> Iterator[tuple[str, str]]:
    """(schema path, message) of every x-kubernetes-validations rule of every version."""

    def walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
        for rule in schema.get("x-kubernetes-validations", []):
            yield (path, rule["message"])
        for name, sub in schema.get("properties", {}).items():
            yield from walk(sub, f"{path}.{name}" if path else name)
        if "items" in schema:
            yield from walk(schema["items"], f"{path}[]")
        if isinstance(schema.get("additionalProperties"), dict):
            yield from walk(schema["additionalProperties"], f"{path}{{}}")

    crd = yaml.safe_load(crd_path.read_text())
    for version in crd["spec"]["versions"]:
        yield from walk(version["schema"]["openAPIV3Schema"], "")


def field_path(text: str) -> str:
    """A field as Kubernetes writes it (spec.models[1].workers), from any of the spellings the
    two sides could use: pydantic's dotted location (spec.models.1.workers), a rule's
    fieldPath (.metadata.name). `cxlab plan` and the apiserver both write the Kubernetes form
    today; this keeps the comparison honest if either drifts."""
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", text.strip()).removeprefix(".")


def plan_problems(stderr: str) -> list[tuple[str, str]]:
    """(field, message) per line of `cxlab plan`'s complaints: "cxlab: FILE: FIELD: message"."""
    found = re.findall(r"^cxlab: [^:]+: ([^\s:]+): (.*)$", stderr, flags=re.MULTILINE)
    return [(field_path(field), message) for field, message in found]


# kubectl prints one error as `... is invalid: FIELD: Invalid value: "TYPE": MESSAGE`; several
# as `... is invalid: [FIELD: ..., FIELD: ...]`, which this does not match, on purpose.
_APISERVER_ERROR = re.compile(r'is invalid: ([^\s\[:][^\s:]*): Invalid value: "[^"]*": (.*)$')


def apiserver_problem(stderr: str) -> tuple[str, str] | None:
    """(field, message) of the apiserver's one complaint in kubectl's output, else None."""
    match = _APISERVER_ERROR.search(stderr.strip())
    return (field_path(match.group(1)), match.group(2).strip()) if match else None
