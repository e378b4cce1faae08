"""The ConcurrencyExperiment CRD, generated: the spec schema from the pydantic models in
spec.py, the status schema from status.py, the Result schema from the contract package
(cxlab_contract), and CEL rules for what spans fields.
`make crd` writes manifests/crds/; a test fails when the file and this code disagree."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

import cxlab_contract
from cxlab.experiments.fields import NAME_MAX_LENGTH, NAME_PATTERN
from cxlab.experiments.spec import (
    API_VERSION,
    KIND,
    MAX_MODELS,
    MAX_PROCESS_WORKERS,
    MAX_THREAD_WORKERS,
    MAX_TRIALS,
    OBJECTIVE_METRICS,
    ExperimentSpec,
)
from cxlab.experiments.status import ExperimentStatus
from cxlab.schedules.spec import SCHEDULE_KIND, SCHEDULE_NAME_MAX_LENGTH, ScheduleSpec
from cxlab.schedules.status import ScheduleStatus

GROUP, VERSION = API_VERSION.split("/")
PLURAL = "concurrencyexperiments"
SCHEDULE_PLURAL = "experimentschedules"
CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
CRD_PATH = CRDS / f"{PLURAL}.{GROUP}.yaml"
SCHEDULE_CRD_PATH = CRDS / f"{SCHEDULE_PLURAL}.{GROUP}.yaml"

Schema = dict[str, Any]


def _rule(rule: str, message: str) -> dict[str, str]:
    return {"rule": rule, "message": message}


def _trial_count_rule() -> str:
    """CEL has no sum(): the per-model terms are unrolled over the (bounded) model list."""
    per_model = " + ".join(
        f"(size(self.models) > {i} ? size(self.models[{i}].workers) * "
        f"(has(self.models[{i}].gomaxprocs) ? size(self.models[{i}].gomaxprocs) : 1) * "
        f"(has(self.models[{i}].pods) ? size(self.models[{i}].pods) : 1) : 0)"
        for i in range(MAX_MODELS)
    )
    rtts = "(has(self.workload.rtts) ? size(self.workload.rtts) : 1)"
    rates = (
        "(has(self.workload.arrival) && has(self.workload.arrival.ratesPerSecond) ? "
        "size(self.workload.arrival.ratesPerSecond) : 1)"
    )
    return f"({per_model}) * {rtts} * {rates} * self.repetitions <= {MAX_TRIALS}"


# A count of tasks where the workload has one (0 for duration runs, whose tasks are an output).
_TASKS = "(has(self.workload.tasks) ? self.workload.tasks : 0)"


# CEL rules per schema path; each says what to change, like the pydantic validators.
RULES: dict[str, list[dict[str, str]]] = {
    "spec": [
        _rule(
            "!has(self.search) || !has(self.search.rate) || has(self.capacity)",
            "search.rate probes against capacity.target.latency: set capacity.target",
        ),
        _rule(
            "!has(self.search) || !has(self.search.rate) || "
            "!self.models.exists(m, m.model == 'locust')",
            "search.rate: Locust's users are closed loops and cannot run at a rate; leave "
            "locust out of an experiment that searches",
        ),
        _rule(
            "!self.models.exists(m, m.model == 'locust') || self.workload.type == 'http'",
            "model locust drives HTTP users and needs workload type http",
        ),
        _rule(
            "self.models.all(m, self.models.exists_one(n, n.model == m.model))",
            "each model may be listed once: put all its worker counts in one entry",
        ),
        _rule(
            f"self.models.all(m, m.model != 'processes' || m.workers.all(w, "
            f"(w == 0 ? {_TASKS} : w) <= {MAX_PROCESS_WORKERS}))",
            f"processes may start at most {MAX_PROCESS_WORKERS} worker processes "
            f"(0 workers means one per task)",
        ),
        _rule(
            f"self.models.all(m, m.model != 'threads' || m.workers.all(w, "
            f"(w == 0 ? {_TASKS} : w) <= {MAX_THREAD_WORKERS}))",
            f"threads may start at most {MAX_THREAD_WORKERS} threads in one process "
            f"(0 workers means one per task)",
        ),
        _rule(
            _trial_count_rule(),
            f"the matrix (models x workers x gomaxprocs x pods x rtts x rates x repetitions) may "
            f"hold at most {MAX_TRIALS} trials: split the experiment",
        ),
        _rule(
            "!has(self.isolation) || self.isolation != 'process' || "
            "self.models.all(m, !has(m.pods) || m.pods.all(p, p == 1))",
            "isolation: process runs each trial as one process in a host Pod: a trial of "
            "several Pods (models[].pods above 1) needs isolation: pod",
        ),
        _rule(
            "!has(self.isolation) || self.isolation != 'process' || !has(self.queueName)",
            "isolation: process keeps host Pods for the whole experiment, which Kueue admits "
            "one trial Pod at a time: leave queueName out, or use isolation: pod",
        ),
        _rule(
            "!has(self.workload.tasks) || "
            "self.models.all(m, !has(m.pods) || m.pods.all(p, p <= self.workload.tasks))",
            "a trial of N Pods needs at least N tasks (one each): raise workload.tasks or "
            "lower models[].pods",
        ),
        _rule(
            "!has(self.workload.arrival) || !self.models.exists(m, m.model == 'locust')",
            "workload.arrival: locust's users are closed loops (each waits for its answer "
            "before its next request), so they cannot keep an arrival rate: drop locust from "
            "models, or use tasks or duration",
        ),
        _rule(
            "!has(self.workload.duration) || self.models.all(m, m.model != 'locust' || "
            "!has(m.pods) || m.pods.all(p, p == 1))",
            "workload.duration: a distributed Locust trial (pods above 1) ends on its master's "
            "aggregated task count: run locust for a duration in one Pod, or use tasks",
        ),
        _rule(
            "!has(self.workload.duration) || self.models.all(m, m.model == 'sequential' || "
            "!has(m.workers) || !m.workers.exists(w, w == 0))",
            "workload.duration: a closed loop for a time needs its workers; workers 0 (one per "
            "task) has no count of tasks to go by",
        ),
        _rule(
            "!has(self.workload.arrival) || self.models.all(m, m.model != 'processes' || "
            "!has(m.workers) || !m.workers.exists(w, w == 0))",
            "workload.arrival: processes with workers 0 would fork one process per arrival: "
            "give processes' workers",
        ),
        _rule(
            "!has(self.resources) || !has(self.resources.cpu) || "
            "double(int(self.resources.cpu)) == double(self.resources.cpu) || "
            "self.pinning == 'preferred'",
            "a fraction of a CPU (resources.cpu) cannot be pinned to a core: set pinning: "
            "preferred (or whole CPUs)",
        ),
        _rule(
            "!has(self.capacity) || !has(self.resources) || !has(self.resources.cpu) || "
            "double(int(self.resources.cpu)) == double(self.resources.cpu)",
            "capacity: a capacity plan counts whole cores per Pod, and resources.cpu is a "
            "fraction of a CPU: set whole CPUs, or leave capacity out",
        ),
        _rule(
            "!has(self.objectives) || self.objectives.all(o, !has(o.models) || "
            "o.models.all(m, self.models.exists(x, x.model == m)))",
            "objectives[].models must name models of spec.models",
        ),
        _rule(
            "!has(self.objectives) || self.objectives.all(o, !has(o.workers) || "
            "o.workers.all(w, self.models.exists(x, (!has(o.models) || x.model in o.models) && "
            "(has(x.workers) ? w in x.workers : w == 0))))",
            "objectives[].workers must name worker counts of the models in the objective's scope",
        ),
        _rule(
            "!has(self.objectives) || has(self.workload.arrival) || "
            "self.objectives.all(o, !has(o.dropped))",
            "objectives[].dropped: only arrivals are dropped (workload.arrival)",
        ),
        _rule(
            "!has(self.objectives) || has(self.workload.tasks) || "
            "self.objectives.all(o, !has(o.efficiency))",
            "objectives[].efficiency: a run for a time has no floor, so no efficiency: use "
            "workload.tasks, or another metric",
        ),
        _rule(
            "!has(self.objectives) || self.objectives.all(o, !has(o.startSkew)) || "
            "self.models.exists(x, has(x.pods) && x.pods.exists(p, p > 1))",
            "objectives[].startSkew: every trial runs one Pod, which has no start skew: give a "
            "model pods above 1",
        ),
    ],
    "spec.objectives": [
        _rule(
            "self.all(o, !has(o.name) || self.exists_one(p, has(p.name) && p.name == o.name))",
            "an objective name is listed twice",
        ),
    ],
    "spec.objectives[]": [
        _rule(
            " + ".join(f"(has(self.{m}) ? 1 : 0)" for m in OBJECTIVE_METRICS) + " == 1",
            "an objective needs exactly one metric: one of latency, failureRatio, throughput, "
            "efficiency, cpuPerTask, peakRss, startSkew, dropped",
        ),
        _rule(
            "self.scope != 'recommended' || !(has(self.models) || has(self.workers))",
            "scope recommended judges the recommended points themselves: leave models and "
            "workers out, or use scope every",
        ),
        _rule(
            "!self.abortOnFail || self.scope != 'recommended'",
            "abortOnFail: the recommended point is known only at the end; use scope every",
        ),
        _rule(
            "!self.abortOnFail || !(has(self.throughput) || has(self.efficiency))",
            "abortOnFail: throughput and efficiency do not only worsen with load, so a breach at "
            "one point says nothing of the next: leave abortOnFail out",
        ),
    ],
    "spec.objectives[].models": [
        _rule("self.all(m, self.exists_one(v, v == m))", "a model is listed twice"),
    ],
    "spec.objectives[].workers": [
        _rule("self.all(w, self.exists_one(v, v == w))", "a worker count is listed twice"),
    ],
    "spec.workload": [
        _rule(
            "(has(self.tasks) ? 1 : 0) + (has(self.duration) ? 1 : 0) + "
            "(has(self.arrival) ? 1 : 0) == 1",
            "workload needs exactly one of tasks (a closed burst), duration (a closed loop for "
            "a time) or arrival (tasks arriving at a rate)",
        ),
        _rule(
            "!has(self.warmup) || has(self.duration) || has(self.arrival)",
            "warmup applies to duration runs: workload.duration or arrival",
        ),
        _rule(
            "!has(self.warmup) || !has(self.duration) || "
            "duration(self.warmup) < duration(self.duration)",
            "warmup must be shorter than the run",
        ),
        _rule(
            "!(self.type == 'sleep' || (self.type == 'http' && !has(self.target))) || "
            "(has(self.rtt) != has(self.rtts))",
            "workloads sleep and http need exactly one of rtt or rtts",
        ),
        _rule(
            "!has(self.target) || self.type == 'http'", "target applies to the http workload only"
        ),
        _rule(
            "!has(self.target) || !(has(self.rtt) || has(self.rtts))",
            "target: your service's latency is measured, not simulated: leave rtt and rtts out",
        ),
        _rule(
            "!has(self.target) || !has(self.responseBytes)",
            "target: responseBytes is the delay target's: leave it out",
        ),
        _rule(
            "self.type in ['sleep', 'http'] || !(has(self.rtt) || has(self.rtts))",
            "rtt/rtts apply to sleep and http only",
        ),
        _rule(
            "(self.type == 'cpu') == has(self.iterations)",
            "iterations is required for cpu and applies to cpu only",
        ),
        _rule(
            "(self.type == 'hold') == has(self.hold)",
            "hold is required for the hold workload and applies to it only",
        ),
        _rule(
            "self.type == 'http' || !(has(self.connection) || has(self.responseBytes))",
            "connection and responseBytes apply to the http workload only",
        ),
    ],
    "spec.workload.target": [
        _rule(
            "has(self.service) != has(self.url)",
            "workload.target needs exactly one of service or url",
        ),
        _rule(
            "!has(self.tls) || (has(self.url) ? self.url.startsWith('https://') : "
            "self.service.scheme == 'https')",
            "tls applies to https targets: use an https url or service scheme",
        ),
        _rule(
            "!has(self.headers) || self.headers.all(h, self.headers.exists_one(g, "
            "g.name.lowerAscii() == h.name.lowerAscii()))",
            "a header is listed twice (names are case-insensitive)",
        ),
        _rule(
            "!has(self.headers) || self.headers.all(h, !has(h.valueFrom) || !has(h.valueFrom.env))",
            "headers[].valueFrom.env names a variable of cxlab run's own: on a cluster use "
            "valueFrom.secretKeyRef",
        ),
    ],
    "spec.workload.target.headers[]": [
        _rule(
            "has(self.value) != has(self.valueFrom)",
            "a header needs exactly one of value or valueFrom",
        ),
    ],
    "spec.workload.target.headers[].valueFrom": [
        _rule(
            "has(self.secretKeyRef) != has(self.env)",
            "valueFrom needs exactly one of secretKeyRef or env",
        ),
    ],
    "spec.workload.target.tls": [
        _rule(
            "!has(self.ca) || !has(self.insecureSkipVerify) || !self.insecureSkipVerify",
            "tls: give a ca, or insecureSkipVerify: true, not both",
        ),
    ],
    "spec.workload.target.tls.ca": [
        _rule(
            "has(self.configMapKeyRef) != has(self.secretKeyRef)",
            "tls.ca needs exactly one of configMapKeyRef or secretKeyRef",
        ),
    ],
    "spec.workload.arrival": [
        _rule(
            "has(self.stages) != has(self.duration)",
            "arrival needs a duration (how long tasks arrive) or stages (which last their "
            "sum), not both",
        ),
        _rule(
            "!has(self.stages) || !has(self.ratesPerSecond)",
            "arrival: stages set the rate over time; ratesPerSecond cannot sweep it",
        ),
        _rule(
            "has(self.stages) || has(self.ratePerSecond) != has(self.ratesPerSecond)",
            "arrival needs exactly one of ratePerSecond or ratesPerSecond",
        ),
    ],
    "spec.workload.arrival.ratesPerSecond": [
        _rule("self.all(r, self.exists_one(v, v == r))", "a rate is listed twice"),
    ],
    "spec.models[]": [
        _rule(
            "!has(self.gomaxprocs) || self.model == 'goroutines'",
            "gomaxprocs applies to goroutines only, not to the Python models",
        ),
        _rule(
            "!has(self.pool) || self.model == 'threads' || "
            "(self.model == 'processes' && self.pool == 'prestarted')",
            "pool applies to threads (onDemand or prestarted) and processes (prestarted only)",
        ),
        _rule(
            "self.model != 'sequential' || self.workers == [0] || self.workers == [1]",
            "sequential runs one task at a time: leave workers out",
        ),
    ],
    "spec.models[].workers": [
        _rule("self.all(w, self.exists_one(v, v == w))", "a worker count is listed twice"),
    ],
    "spec.models[].gomaxprocs": [
        _rule("self.all(g, self.exists_one(v, v == g))", "a gomaxprocs value is listed twice"),
    ],
    "spec.models[].pods": [
        _rule("self.all(p, self.exists_one(v, v == p))", "a Pod count is listed twice"),
    ],
}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def structural(schema: Schema, definitions: Schema) -> Schema:
    """A pydantic/JSON Schema fragment as a Kubernetes structural schema: references
    inlined, optional (anyOf null) unwrapped, no additionalProperties: false (the apiserver
    prunes or, with kubectl's strict validation, rejects unknown fields), OpenAPI v3 forms
    of exclusive bounds and nullability."""
    if "$ref" in schema:
        target = definitions[schema["$ref"].rsplit("/", 1)[1]]
        return structural(
            {**target, **{k: v for k, v in schema.items() if k != "$ref"}}, definitions
        )
    if schema.get("x-kubernetes-int-or-string"):
        return schema  # its anyOf (an integer or a string) is what the apiserver expects
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        merged = {**{k: v for k, v in schema.items() if k != "anyOf"}, **options[0]}
        return structural(merged, definitions)
    out: Schema = {}
    for key, value in schema.items():
        if key in ("title", "$defs", "$schema", "$id"):
            continue
        if key == "default":
            if value is not None:
                out[key] = _without_nulls(value)  # a null default is no default
            continue
        if key == "description":
            out[key] = " ".join(value.split())  # docstrings are wrapped; kubectl explain rewraps
            continue
        if key == "additionalProperties":
            if value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out[key] = structural(value, definitions)
            continue
        if key == "propertyNames":
            continue  # with patternProperties below: structural schemas cannot bound keys
        if key == "patternProperties":
            # A map with constrained keys: the values' schema stays, the keys get a CEL rule.
            [(pattern, values)] = value.items()
            longest = schema.get("propertyNames", {}).get("maxLength")
            out["additionalProperties"] = structural(values, definitions)
            out.setdefault("x-kubernetes-validations", []).append(
                _rule(
                    f"self.all(k, size(k) <= {longest} && k.matches(r'{pattern}'))",
                    f"every key must be a label key: [DNS-subdomain prefix/]name, the name at "
                    f"most 63 letters, digits, '-', '_' or '.' (at most {longest} in all)",
                )
            )
            continue
        if key == "exclusiveMinimum":
            out["minimum"], out["exclusiveMinimum"] = value, True
        elif key == "exclusiveMaximum":
            out["maximum"], out["exclusiveMaximum"] = value, True
        elif key == "const":
            out["enum"] = [value]
        elif key == "type" and isinstance(value, list):
            out["type"] = next(t for t in value if t != "null")
            out["nullable"] = True
        elif key == "properties":
            out[key] = {name: structural(sub, definitions) for name, sub in value.items()}
        elif key == "items":
            out[key] = structural(value, definitions)
        else:
            out[key] = copy.deepcopy(value)
    if out.get("nullable") and "enum" in out:
        # The apiserver checks a null against the enum, null listed or not, and refuses it:
        # such a field (only in the runner's Result) keeps its enum in the Result's schema.
        del out["enum"]
    if "enum" in out and "type" not in out:  # structural schemas type every field
        kinds = {type(v) for v in out["enum"]}
        out["type"] = "string" if kinds == {str} else "integer" if kinds == {int} else "number"
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _at(schema: Schema, path: str) -> Schema:
    node = schema
    for part in path.split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


def spec_schema() -> Schema:
    source = ExperimentSpec.model_json_schema(by_alias=True)
    schema = structural(source, source.get("$defs", {}))
    root: Schema = {"properties": {"spec": schema}}
    for path, rules in RULES.items():
        _at(root, path).setdefault("x-kubernetes-validations", []).extend(rules)
    return schema


# The schedule's own rules; its template gets every rule of an experiment's spec (RULES).
SCHEDULE_RULES: dict[str, list[dict[str, str]]] = {
    "spec": [
        _rule(
            "!has(self.experimentTemplate.spec.ttlSecondsAfterFinished)",
            "experimentTemplate.spec.ttlSecondsAfterFinished: runs are deleted by the history "
            "limits, after their history entry is written; leave it out",
        ),
    ],
}


def schedule_spec_schema() -> Schema:
    source = ScheduleSpec.model_json_schema(by_alias=True)
    schema = structural(source, source.get("$defs", {}))
    root: Schema = {"properties": {"spec": schema}}
    template = "spec.experimentTemplate."
    rules = {**{template + path: r for path, r in RULES.items()}, **SCHEDULE_RULES}
    for path, found in rules.items():
        _at(root, path).setdefault("x-kubernetes-validations", []).extend(found)
    return schema


def schedule_status_schema() -> Schema:
    source = ScheduleStatus.model_json_schema(by_alias=True)
    return structural(source, source.get("$defs", {}))


def result_schema() -> Schema:
    source = cxlab_contract.result_schema()
    schema = structural(source, source.get("$defs", {}))
    schema["description"] = source["description"]
    return schema


def status_schema() -> Schema:
    """Generated from the typed status (cxlab.experiments.status.ExperimentStatus); the
    runner's Result inside each trial entry from its own JSON Schema."""
    source = ExperimentStatus.model_json_schema(by_alias=True)
    schema = structural(source, source.get("$defs", {}))
    schema["properties"]["trials"]["items"]["properties"]["result"] = result_schema()
    return schema


def _name_rules(longest: int, why: str) -> list[Schema]:
    return [
        {
            **_rule(
                f"size(self.metadata.name) <= {longest}",
                f"metadata.name may have at most {longest} characters: {why}",
            ),
            # Without it the apiserver names no field ("<nil>").
            "fieldPath": ".metadata.name",
        },
        {
            # Names of custom resources may hold dots; a trial Pod's labels and its
            # hostname may not.
            **_rule(
                f"self.metadata.name.matches('{NAME_PATTERN}')",
                "metadata.name must be a DNS label: lower-case letters, digits and '-', "
                "starting and ending with a letter or digit",
            ),
            "fieldPath": ".metadata.name",
        },
    ]


def _definition(
    *,
    kind: str,
    plural: str,
    short: str,
    columns: list[Schema],
    description: str,
    spec: Schema,
    status: Schema,
    name_rules: list[Schema],
) -> Schema:
    """A namespaced CRD of the cxlab.dev group, one served and stored version, with a status
    subresource: what both kinds share."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": ["cxlab"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                # Declared only so the name rules can point at metadata.name
                                # (fieldPath must exist in the schema).
                                "metadata": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}},
                                },
                                "spec": spec,
                                "status": status,
                            },
                            "x-kubernetes-validations": name_rules,
                        }
                    },
                }
            ],
        },
    }


def _column(name: str, kind: str, path: str, priority: int = 0) -> Schema:
    column: Schema = {"name": name, "type": kind, "jsonPath": path}
    return column | {"priority": priority} if priority else column


AGE = _column("Age", "date", ".metadata.creationTimestamp")


def schedule_resource_definition() -> Schema:
    return _definition(
        kind=SCHEDULE_KIND,
        plural=SCHEDULE_PLURAL,
        short="cxs",
        columns=[
            _column("Schedule", "string", ".spec.schedule"),
            _column("Suspend", "boolean", ".spec.suspend"),
            _column("Last Schedule", "date", ".status.lastScheduleTime"),
            _column("Regressed", "boolean", ".status.regressed"),
            _column("Plan", "string", ".status.capacityPlan.display"),
            AGE,
        ],
        description="A ConcurrencyExperiment re-run on a schedule: its runs' history, "
        "regressions across them, a capacity plan.",
        spec=schedule_spec_schema(),
        status=schedule_status_schema(),
        name_rules=_name_rules(
            SCHEDULE_NAME_MAX_LENGTH,
            "a run is named <schedule>-<unix seconds of its slot>, and trial Pods after the run",
        ),
    )


def custom_resource_definition() -> Schema:
    return _definition(
        kind=KIND,
        plural=PLURAL,
        short="cx",
        columns=[
            _column("Phase", "string", ".status.phase"),
            _column("Progress", "string", ".status.progress.display"),
            _column("Best", "string", ".status.best"),
            # True, False or Unknown (inconclusive) once finished: the verdict pipelines gate on
            _column(
                "Objectives", "string", '.status.conditions[?(@.type=="ObjectivesMet")].status'
            ),
            # kubectl get -o wide: set only with spec.capacity
            _column("Plan", "string", ".status.capacityPlan.display", priority=1),
            AGE,
        ],
        description="A concurrency experiment: models x workers x RTTs, measured on pinned cores.",
        spec=spec_schema(),
        status=status_schema(),
        name_rules=_name_rules(NAME_MAX_LENGTH, "trial Pods are named after it"),
    )


# YAML 1.1 booleans that PyYAML writes bare but Go's YAML readers (kubectl, Helm) read as
# true/false: `required: [n]` became `[false]` and the apiserver refused the whole CRD.
YAML11_BOOLEANS = frozenset(
    v for word in ("y", "n", "yes", "no", "on", "off", "true", "false")
    for v in (word, word.upper(), word.capitalize())
)  # fmt: skip


class _Dumper(yaml.SafeDumper):
    def represent_str(self, data: str) -> yaml.ScalarNode:
        if data in YAML11_BOOLEANS:
            return self.represent_scalar("tag:yaml.org,2002:str", data, style="'")
        return super().represent_str(data)


_Dumper.add_representer(str, _Dumper.represent_str)


def render(definition: Schema | None = None) -> str:
    """A CRD as its file holds it (the experiment's by default)."""
    header = (
        "# Generated by `make crd` from operator/cxlab/crd.py and the typed specs: do not edit.\n"
    )
    return header + yaml.dump(
        definition or custom_resource_definition(),
        Dumper=_Dumper,
        sort_keys=False,
        width=100,
        allow_unicode=True,
    )


# Every CRD file and what generates it.
GENERATED = {CRD_PATH: custom_resource_definition, SCHEDULE_CRD_PATH: schedule_resource_definition}

if __name__ == "__main__":
    CRDS.mkdir(parents=True, exist_ok=True)
    for path, definition in GENERATED.items():
        path.write_text(render(definition()))
        print(path)
