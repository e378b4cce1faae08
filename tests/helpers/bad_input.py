"""The bad-input corpus: invalid ConcurrencyExperiment files by category, generated from the
CRD's own schema where a category can be (every bounded number from both sides, every field
with a value of the wrong type, every duration written wrong), handwritten where it cannot
(references, placement, YAML pathologies, what only this machine can know).

tests/cli/test_plan_bad_input.py runs every case through `cxlab plan` (exit 2, the field named,
nothing printed but the complaint); tests/cluster/test_bad_input_on_apiserver.py applies every case
that a cluster can judge with `kubectl apply --dry-run=server` (refused, the field named).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from cxlab.experiments.fields import IMAGE_MAX_LENGTH, MAX_CPU, MAX_LIST_ITEMS, NAME_MAX_LENGTH
from cxlab.experiments.spec import MAX_TRIALS
from cxlab_contract.durations import DURATION_PATTERN, format_duration, parse_duration
from helpers.rule_cases import concrete as crd_concrete
from helpers.rule_cases import in_context, manifest
from helpers.schema import own, spec_fields


@dataclass(frozen=True)
class BadInput:
    category: str
    name: str
    text: str | bytes
    """The file as written: YAML text, or bytes for what is not text at all."""
    field: str | None
    """The field both sides must name; None for a file that is wrong as a whole."""
    says: str = ""
    """What the CLI's complaint must contain (for a whole-file problem, its one line)."""
    cluster: bool = True
    """Also judged by the apiserver (False: a file problem kubectl has its own words for, or
    what only the local machine knows)."""
    cluster_field: str | None = None
    """The field the apiserver names, where cxlab names one below it (unset: field)."""
    lines: int | None = None
    """How many lines the CLI's complaint has, where that is the point (one, not two)."""

    @property
    def id(self) -> str:
        return f"{self.category}:{self.name}"


def as_yaml(document: Any) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=1000)


def with_value(path: str, value: Any) -> dict[str, Any]:
    """The nearest valid manifest in which the field applies (made from the rules' own valid
    examples, tests/helpers/rule_cases.py) with the field at path set to value; `[]` in the path
    means the last item, and objects or lists missing on the way are made."""
    found = in_context(path, value, valid=False)
    if found is not None:
        return found
    document = manifest()
    parts = re.findall(r"[^.\[\]]+|\[\]", path)
    node: Any = document
    for part, after in zip(parts, [*parts[1:], None], strict=True):
        key: Any = 0 if part == "[]" else part
        if after is None:
            if isinstance(node, list) and not node:
                node.append(value)
            else:
                node[key] = value
            break
        if isinstance(node, list):
            if not node:
                node.append([] if after == "[]" else {})
        elif key not in node or not isinstance(node[key], (dict, list)):
            node[key] = [] if after == "[]" else {}
        node = node[key]
    return document


def concrete(path: str, value: Any = None) -> str:
    """The field with_value sets, as the document has it."""
    return crd_concrete(path, with_value(path, value)) or path.replace("[]", "[0]")


def leaves() -> Iterator[tuple[str, dict[str, Any]]]:
    """cxlab's own fields a user writes a value into (maps and embedded Kubernetes schemas
    have their own cases)."""
    for path, node in spec_fields():
        if own(path) and "{}" not in path and node.get("type") not in ("object", None):
            yield path, node


def bounds() -> Iterator[BadInput]:
    """Every number one step outside each bound, and integers past int64."""
    for path, node in leaves():
        kind = node.get("type")
        if kind not in ("integer", "number"):
            continue
        step = 1 if kind == "integer" else 0.5
        low = node["minimum"] if node.get("exclusiveMinimum") else node["minimum"] - step
        for label, value in (("below", low), ("above", node["maximum"] + step)):
            yield BadInput(
                "bounds", f"{path}-{label}", as_yaml(with_value(path, value)), concrete(path)
            )
        if kind == "integer":
            yield BadInput(
                "bounds", f"{path}-past-int64", as_yaml(with_value(path, 2**64)), concrete(path)
            )
    for path, node in leaves():
        if node.get("pattern") != DURATION_PATTERN:
            continue
        rule = node["x-kubernetes-validations"][0]["rule"]
        low, high = re.findall(r"duration\('([^']+)'\)", rule)
        past = format_duration(parse_duration(high) + 0.001)
        cases = {"above": past, "overflows-go": "9999999999999h", "too-long": "1" + "0" * 40}
        if parse_duration(low) > 0:
            cases["below"] = format_duration(parse_duration(low) - 0.001)
        for label, value in cases.items():
            yield BadInput(
                "bounds", f"{path}-{label}", as_yaml(with_value(path, value)), concrete(path)
            )


# Values of another type than the field's, none of which the apiserver converts.
WRONG_TYPES: dict[str, list[tuple[str, Any]]] = {
    "integer": [("string", "5"), ("float", 5.5), ("boolean", True)],
    "number": [("string", "0.1"), ("boolean", True)],
    "boolean": [("yes", "yes"), ("true", "true"), ("number", 1)],
    "string": [("number", 5), ("boolean", True), ("list", ["a"])],
    "array": [("string", "a"), ("mapping", {"a": 1})],
}


def types() -> Iterator[BadInput]:
    for path, node in leaves():
        for label, value in WRONG_TYPES[node["type"]]:
            yield BadInput(
                "types", f"{path}-{label}", as_yaml(with_value(path, value)), concrete(path)
            )
    for path, node in leaves():
        if node.get("pattern") == DURATION_PATTERN:
            for label, value in (("words", "fast"), ("space", "1 s"), ("unit", "1hr")):
                yield BadInput(
                    "types", f"{path}-{label}", as_yaml(with_value(path, value)), concrete(path)
                )
        if "enum" in node and node["type"] == "string":
            value = str(node["enum"][0]).upper() + "x"
            yield BadInput(
                "types", f"{path}-not-listed", as_yaml(with_value(path, value)), concrete(path)
            )
    yield BadInput(
        "types",
        "unknown-field",
        as_yaml(with_value("spec.workload.taks", 10)),
        "spec.workload.taks",
    )


def names() -> Iterator[BadInput]:
    bad = {
        "too-long": "n" * (NAME_MAX_LENGTH + 1),
        "upper-case": "Sweep",
        "underscore": "rtt_sweep",
        "leading-dash": "-sweep",
        "trailing-dash": "sweep-",
        "dot": "rtt.sweep",
        "space": "rtt sweep",
        "unicode": "swéep",
    }
    for label, value in bad.items():
        yield BadInput("names", f"metadata.name-{label}", as_yaml(manifest(value)), "metadata.name")
    selector = "spec.placement.nodeSelector"
    for label, labels in {
        "key-space": {"pool name": "a"},
        "key-too-long": {"a" * 64: "a"},
        "key-prefix-upper": {"Example.com/pool": "a"},
        "value-too-long": {"pool": "v" * 64},
        "value-space": {"pool": "a b"},
        "value-leading-dash": {"pool": "-a"},
        "too-many": {f"k{i}": "v" for i in range(MAX_LIST_ITEMS + 1)},
    }.items():
        yield BadInput("names", f"nodeSelector-{label}", as_yaml(with_value(selector, labels)),
                       selector)  # fmt: skip
    yield BadInput(
        "names", "nodeSelector-value-number", as_yaml(with_value(selector, {"pool": 5})),
        f"{selector}.pool",
    )  # fmt: skip


def references() -> Iterator[BadInput]:
    images = {
        "empty": "",
        "blank": " ",
        "space": "cxlab.dev/runner dev",
        "shell": "cxlab.dev/runner;rm -rf /",
        "substitution": "$(whoami)/runner",
        "upper-case-path": "cxlab.dev/Runner:dev",
        "scheme": "https://cxlab.dev/runner:dev",
        "two-tags": "cxlab.dev/runner:dev:1",
        "empty-tag": "cxlab.dev/runner:",
        "short-digest": "cxlab.dev/runner@sha256:abc",
        "leading-dash": "-runner",
        "newline": "cxlab.dev/runner\n:dev",
        "too-long": "r" * (IMAGE_MAX_LENGTH + 1),
    }
    for label, value in {"empty": "", "space": "my queue", "too-long": "q" * 64}.items():
        yield BadInput("references", f"queueName-{label}",
                       as_yaml(with_value("spec.queueName", value)), "spec.queueName")  # fmt: skip
    for label, value in images.items():
        yield BadInput("references", f"image-{label}", as_yaml(with_value("spec.image", value)),
                       "spec.image")  # fmt: skip


def placement() -> Iterator[BadInput]:
    tolerations = "spec.placement.tolerations"
    for label, value, field in [
        ("operator", [{"key": "a", "operator": "Like"}], f"{tolerations}[0].operator"),
        ("effect", [{"key": "a", "effect": "NoRun"}], f"{tolerations}[0].effect"),
        ("seconds-string", [{"key": "a", "tolerationSeconds": "60"}],
         f"{tolerations}[0].tolerationSeconds"),
        ("seconds-past-int64", [{"key": "a", "tolerationSeconds": 2**64}],
         f"{tolerations}[0].tolerationSeconds"),
        ("unknown-field", [{"key": "a", "operatr": "Exists"}], f"{tolerations}[0]"),
        ("not-a-list", {"key": "a"}, tolerations),
        ("item-not-a-mapping", ["a"], f"{tolerations}[0]"),
        ("too-many", [{"key": f"k{i}"} for i in range(MAX_LIST_ITEMS + 1)], tolerations),
    ]:  # fmt: skip
        yield BadInput("placement", f"tolerations-{label}",
                       as_yaml(with_value(tolerations, value)), field)  # fmt: skip
    affinity = "spec.placement.affinity"
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {}}
    term = {"key": "pool", "operator": "Like", "values": ["a"]}
    node_terms = {"nodeSelectorTerms": [{"matchExpressions": [term]}]}
    for label, value, field in [
        ("unknown-field", {"nodeAffinty": {}}, affinity),
        ("no-node-selector-terms", {"nodeAffinity": required},
         f"{affinity}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
        ("empty-node-selector-terms",
         {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                           {"nodeSelectorTerms": []}}},
         f"{affinity}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
         ".nodeSelectorTerms"),
        ("node-operator", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                            node_terms}},
         f"{affinity}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
         ".nodeSelectorTerms[0].matchExpressions[0].operator"),
        ("pod-term-no-topology-key", {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}},
         f"{affinity}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"),
        ("weight-string", {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": "high", "podAffinityTerm": {"topologyKey": "zone"}}]}},
         f"{affinity}.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
        ("not-a-mapping", ["nodeAffinity"], affinity),
    ]:  # fmt: skip
        yield BadInput("placement", f"affinity-{label}", as_yaml(with_value(affinity, value)),
                       field)  # fmt: skip


def semantics() -> Iterator[BadInput]:
    """Rules across fields (each CEL rule has its own case in tests/helpers/rule_cases.py; these are
    the values past the limits that span fields)."""
    yield BadInput(
        "semantics", "threads-one-per-task-past-the-thread-limit",
        as_yaml(manifest(workload={"type": "sleep", "tasks": 40_000, "rtt": "1ms"},
                         models=[{"model": "threads", "workers": [0]}])), "spec",
    )  # fmt: skip
    yield BadInput(
        "semantics", "matrix-past-the-trial-limit",
        as_yaml(manifest(models=[{"model": "threads", "workers": list(range(1, 33))}],
                         repetitions=MAX_TRIALS // 32 + 1)), "spec",
    )  # fmt: skip
    arrival = {"type": "sleep", "rtt": "10ms", "arrival": {"ratePerSecond": 10, "duration": "1s"}}
    yield BadInput(
        "semantics", "rates-past-the-trial-limit",
        as_yaml(manifest(workload={**arrival, "arrival": {
            "ratesPerSecond": list(range(1, 33)), "duration": "1s"}},
            models=[{"model": "asyncio", "workers": list(range(1, 33))}])), "spec",
    )  # fmt: skip
    # What only `cxlab plan` and the operator check (a status condition on a cluster): the
    # expected arrivals of each Pod, and the sum of the stages.
    yield BadInput(
        "semantics", "under-one-arrival-per-pod",
        as_yaml(manifest(workload={**arrival, "arrival": {"ratePerSecond": 3, "duration": "1s"}},
                         models=[{"model": "asyncio", "pods": [4]}])), "spec", cluster=False,
    )  # fmt: skip
    yield BadInput(
        "semantics", "arrivals-past-the-task-limit",
        as_yaml(manifest(workload={**arrival, "arrival": {
            "ratePerSecond": 1_000_000, "duration": "24h"}})), "spec", cluster=False,
    )  # fmt: skip
    yield BadInput(
        "semantics", "stages-shorter-than-a-second",
        as_yaml(manifest(workload={**arrival, "arrival": {
            "stages": [{"duration": "500ms", "target": 10}]}})), "spec.workload.arrival",
        cluster=False,
    )  # fmt: skip
    yield BadInput(
        "semantics", "warmup-as-long-as-the-stages",
        as_yaml(manifest(workload={**arrival, "warmup": "2s", "arrival": {
            "stages": [{"duration": "2s", "target": 10}]}})), "spec.workload", cluster=False,
    )  # fmt: skip
    yield BadInput(
        "semantics", "cpu-workload-with-rtt",
        as_yaml(manifest(workload={"type": "cpu", "tasks": 1, "iterations": 5, "rtt": "1ms"})),
        "spec.workload",
    )  # fmt: skip


def objectives() -> Iterator[BadInput]:
    """Objectives on metrics that do not exist, bounds of the wrong type or sign, scopes
    naming nothing."""
    latency = {"latency": {"max": "250ms"}}
    for label, objective, field in [
        ("unknown-metric", {"p99Latency": {"max": "250ms"}}, "spec.objectives[0].p99Latency"),
        ("no-metric", {"scope": "every"}, "spec.objectives[0]"),
        ("unknown-percentile", {"latency": {"percentile": "p95", "max": "1s"}},
         "spec.objectives[0].latency.percentile"),
        ("latency-as-a-number", {"latency": {"max": 250}}, "spec.objectives[0].latency.max"),
        ("latency-without-unit", {"latency": {"max": "250"}}, "spec.objectives[0].latency.max"),
        ("negative-throughput", {"throughput": {"min": -5}}, "spec.objectives[0].throughput.min"),
        ("throughput-as-a-string", {"throughput": {"min": "500/s"}},
         "spec.objectives[0].throughput.min"),
        ("throughput-as-max", {"throughput": {"max": 500}}, "spec.objectives[0].throughput.max"),
        ("failure-ratio-as-percent", {"failureRatio": {"max": 5}},
         "spec.objectives[0].failureRatio.max"),
        ("negative-failure-ratio", {"failureRatio": {"max": -0.1}},
         "spec.objectives[0].failureRatio.max"),
        ("rss-as-a-number", {"peakRss": {"max": 268435456}}, "spec.objectives[0].peakRss.max"),
        ("negative-dropped", {"dropped": {"max": -1}}, "spec.objectives[0].dropped.max"),
        ("unknown-scope", {**latency, "scope": "worst"}, "spec.objectives[0].scope"),
        ("abort-as-a-string", {**latency, "abortOnFail": "yes"},
         "spec.objectives[0].abortOnFail"),
        ("unknown-model-in-scope", {**latency, "models": ["fibers"]},
         "spec.objectives[0].models[0]"),
        ("model-not-in-the-experiment", {**latency, "models": ["asyncio"]}, "spec"),
        ("workers-not-in-the-experiment", {**latency, "workers": [999]}, "spec"),
        ("bad-name", {**latency, "name": "p99 under 250ms"}, "spec.objectives[0].name"),
    ]:  # fmt: skip
        yield BadInput("objectives", label, as_yaml(manifest(objectives=[objective])), field)
    yield BadInput("objectives", "not-a-list", as_yaml(manifest(objectives=latency)),
                   "spec.objectives")  # fmt: skip
    yield BadInput("objectives", "empty-list", as_yaml(manifest(objectives=[])), "spec.objectives")
    yield BadInput(
        "objectives", "too-many",
        as_yaml(manifest(objectives=[{"latency": {"max": f"{i + 1}ms"}} for i in range(17)])),
        "spec.objectives",
    )  # fmt: skip


def targets() -> Iterator[BadInput]:
    """A target beside a simulated RTT, two targets at once, a scheme no runner speaks,
    headers HTTP forbids or cannot carry, ports out of range, statuses that are none."""
    service = {"name": "api", "port": 80}

    def aimed(target: dict[str, Any], **workload: Any) -> str:
        return as_yaml(manifest(workload={"type": "http", "tasks": 10, "target": target,
                                          **workload}))  # fmt: skip

    yield BadInput(
        "targets", "header-twice-in-two-cases",
        aimed({"service": service, "headers": [{"name": "X-A", "value": "1"},
                                               {"name": "X-B", "value": "2"},
                                               {"name": "x-a", "value": "3"}]}),
        "spec.workload.target.headers[2].name", says="a header is listed twice",
        cluster_field="spec.workload.target.headers",
    )  # fmt: skip
    for label, text, field in [
        ("with-rtt", aimed({"service": service}, rtt="10ms"), "spec.workload"),
        ("with-rtts", aimed({"service": service}, rtts=["10ms"]), "spec.workload"),
        ("url-and-service", aimed({"service": service, "url": "http://127.0.0.1/"}),
         "spec.workload.target"),
        ("neither", aimed({"method": "GET"}), "spec.workload.target"),
        ("ftp-scheme", aimed({"url": "ftp://127.0.0.1/"}), "spec.workload.target.url"),
        ("no-scheme", aimed({"url": "127.0.0.1:8080/"}), "spec.workload.target.url"),
        ("header-host", aimed({"service": service, "headers": [{"name": "Host", "value": "x"}]}),
         "spec.workload.target.headers[0].name"),
        ("header-content-length",
         aimed({"service": service, "headers": [{"name": "content-length", "value": "5"}]}),
         "spec.workload.target.headers[0].name"),
        ("header-transfer-encoding",
         aimed({"service": service,
                "headers": [{"name": "Transfer-Encoding", "value": "chunked"}]}),
         "spec.workload.target.headers[0].name"),
        ("header-name-with-space",
         aimed({"service": service, "headers": [{"name": "X Token", "value": "x"}]}),
         "spec.workload.target.headers[0].name"),
        ("header-name-with-colon",
         aimed({"service": service, "headers": [{"name": "X-Token:", "value": "x"}]}),
         "spec.workload.target.headers[0].name"),
        ("header-value-with-newline",
         aimed({"service": service, "headers": [{"name": "X-A", "value": "a\r\nHost: b"}]}),
         "spec.workload.target.headers[0].value"),
        ("service-port-zero", aimed({"service": {**service, "port": 0}}),
         "spec.workload.target.service.port"),
        ("service-port-65536", aimed({"service": {**service, "port": 65536}}),
         "spec.workload.target.service.port"),
        ("url-port-70000", aimed({"url": "http://127.0.0.1:70000/"}),
         "spec.workload.target.url"),
        ("url-port-zero", aimed({"url": "http://127.0.0.1:0/"}), "spec.workload.target.url"),
        ("status-600", aimed({"service": service, "expectedStatuses": [600]}),
         "spec.workload.target.expectedStatuses[0]"),
        ("status-range-as-words", aimed({"service": service, "expectedStatuses": ["2xx"]}),
         "spec.workload.target.expectedStatuses[0]"),
        ("unknown-method", aimed({"service": service, "method": "FETCH"}),
         "spec.workload.target.method"),
        ("tls-on-http", aimed({"service": service, "tls": {"insecureSkipVerify": True}}),
         "spec.workload.target"),
        ("secret-without-key",
         aimed({"service": service,
                "headers": [{"name": "X-A", "valueFrom": {"secretKeyRef": {"name": "s"}}}]}),
         "spec.workload.target.headers[0].valueFrom.secretKeyRef.key"),
        ("service-name-uppercase", aimed({"service": {**service, "name": "API"}}),
         "spec.workload.target.service.name"),
        ("path-without-slash", aimed({"service": {**service, "path": "api"}}),
         "spec.workload.target.service.path"),
        ("target-on-sleep",
         as_yaml(manifest(workload={"type": "sleep", "tasks": 10, "rtt": "1ms",
                                    "target": {"service": service}})),
         "spec.workload"),
    ]:  # fmt: skip
        yield BadInput("targets", label, text, field)


def services() -> Iterator[BadInput]:
    """A service subject that cannot run: no Deployment, one outside the experiment's
    namespace, replica counts and variables Kubernetes refuses, a variant twice, a simulated
    RTT beside the service's own latency."""
    target = {"type": "http", "tasks": 10, "target": {"service": {"name": "api", "port": 80}}}

    def served(service: dict[str, Any], **workload: Any) -> str:
        return as_yaml(manifest(workload={**target, **workload}, service=service))

    for label, text, field, says in [
        ("variants-without-deployment", served({"variants": {"replicas": [1, 2]}}),
         "spec.service", "exactly one of deployment"),
        ("deployment-in-another-namespace", served({"deployment": "api", "namespace": "other"}),
         "spec.service.namespace", ""),
        ("target-in-another-namespace",
         served({"deployment": "api"},
                target={"service": {"name": "api", "namespace": "other", "port": 80}}),
         "spec", "workload.target.service"),
        ("replicas-zero", served({"deployment": "api", "variants": {"replicas": [0]}}),
         "spec.service.variants.replicas[0]", ""),
        ("replicas-over-the-bound", served({"deployment": "api", "variants": {"replicas": [65]}}),
         "spec.service.variants.replicas[0]", ""),
        ("env-name-with-a-dash",
         served({"deployment": "api", "variants": {"env": [{"name": "GUNICORN-WORKERS",
                                                            "values": ["2"]}]}}),
         "spec.service.variants.env[0].name", ""),
        ("variant-twice",
         served({"deployment": "api", "variants": {"named": [{"name": "sync-2"},
                                                             {"name": "sync-2"}]}}),
         "spec.service.variants.named", "listed twice"),
        ("beside-rtt",
         as_yaml(manifest(workload={"type": "sleep", "tasks": 10, "rtt": "10ms"},
                          service={"deployment": "api"})),
         "spec", "workload.target.service"),
    ]:  # fmt: skip
        yield BadInput("services", label, text, field, says=says)


def numbers() -> Iterator[BadInput]:
    """What YAML reads as a number but is none to use (NaN, infinities), or a word for one:
    one line each, in words, never an internal path (.float) or a bound "(got nan)"."""
    fields = {
        "spec.tolerance": "must be a finite number between 0 and 1",
        "spec.resources.cpu": "must be a finite number between 0.001 and 256",
        "spec.objectives[].failureRatio.max": "must be a finite number between 0 and 1",
        "spec.workload.arrival.ratePerSecond": "must be a finite number between 0 and 1e+06",
        "spec.capacity.target.ratePerSecond": "must be a finite number between 0 and 1e+09",
    }
    for path, says in fields.items():
        for label, value, text in [
            ("nan", math.nan, "is not a number (NaN)"),
            ("infinity", math.inf, says),
            ("minus-infinity", -math.inf, says),
            ("infinity-as-a-word", "Infinity", "must be a number between"),
        ]:
            # kubectl cannot send NaN or an infinity as JSON: it refuses them in its own words
            yield BadInput("numbers", f"{path}-{label}", as_yaml(with_value(path, value)),
                           concrete(path), says=text, lines=1,
                           cluster=isinstance(value, str))  # fmt: skip


def echoes() -> Iterator[BadInput]:
    """A value past its bound is shown as written, with the bound it breaks."""
    for label, path, value, says in [
        ("duration-in-hours", "spec.trialTimeout", "1000h", "between 1s and 24h (got 1000h)"),
        ("duration-in-parts", "spec.workload.rtt", "1h30m", "between 0s and 1h (got 1h30m)"),
        ("memory-in-pebibytes", "spec.resources.memory", "1Pi", "between 64Mi and 1Ti (got 1Pi)"),
        ("memory-in-exabytes", "spec.resources.memory", "2E", "between 64Mi and 1Ti (got 2E)"),
        ("memory-with-an-exponent", "spec.resources.memory", "1e3",
         "between 64Mi and 1Ti (got 1e3)"),
    ]:  # fmt: skip
        yield BadInput("echoes", label, as_yaml(with_value(path, value)), concrete(path),
                       says=says, lines=1)  # fmt: skip


def _documents_text(*documents: Any) -> str:
    return "---\n".join(as_yaml(d) for d in documents)


def yaml_pathologies() -> Iterator[BadInput]:
    laughs = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    valid = as_yaml(manifest())
    cases: list[tuple[str, str | bytes, str]] = [
        ("alias-bomb", "\n".join(laughs) + "\n" + valid, "expands to more than"),
        ("alias-bomb-inside-the-spec",
         valid.replace("workers:\n    - 2", "workers: &w [[1,1,1,1,1,1,1,1,1,1]]") +
         "x: &x [" + ",".join(["*w"] * 10) + "]\n" +
         "".join(f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}" if i else "*x"] * 10) + "]\n"
                 for i in range(6)),
         "expands to more than"),
        ("deep-lists", "spec: " + "[" * 5000 + "]" * 5000 + "\n", "nests deeper than"),
        ("deep-mappings", "spec:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 120)) +
         "  " * 120 + "v: 1\n", "nests deeper than"),
        ("huge", valid + "# " + "x" * (300 * 1024) + "\n", "larger than 256 KiB"),
        ("binary", bytes(range(256)) * 16, "not UTF-8"),
        ("nul-bytes", valid.replace("kind", "ki\x00nd"), "not valid YAML"),
        ("latin-1", valid.replace("rule-check", "r\xe9gle").encode("latin-1"), "not UTF-8"),
        ("empty", "", "holds no document"),
        ("only-comments", "# nothing here\n", "holds no document"),
        ("tabs", valid.replace("  tasks", "\ttasks"), "not valid YAML"),
        ("unclosed-quote", valid.replace("10ms", '"10ms'), "not valid YAML"),
        ("duplicate-key", valid.replace("    tasks: 10\n", "    tasks: 10\n    tasks: 20\n"),
         "appears twice"),
        ("top-level-list", "- " + valid.replace("\n", "\n  "), "is not a mapping"),
        ("top-level-scalar", "hello\n", "is not a mapping"),
        ("wrong-kind", valid.replace("ConcurrencyExperiment", "Experiment"),
         "is not a ConcurrencyExperiment"),
        ("wrong-api-version", valid.replace("cxlab.dev/v1alpha1", "cxlab.dev/v1"),
         "is not a ConcurrencyExperiment"),
        ("second-document-bad", _documents_text(manifest(), manifest("b", repetitions=0)),
         "document 2: spec.repetitions"),
        ("same-name-twice", _documents_text(manifest(), manifest()), "is used twice"),
    ]  # fmt: skip
    for label, text, says in cases:
        yield BadInput("yaml", label, text, None, says=says, cluster=False)


def machine() -> Iterator[BadInput]:
    """Only this machine can say: a trial bigger than it (locally a trial runs here)."""
    yield BadInput("machine", "cpu-beyond-the-machine",
                   as_yaml(manifest(resources={"cpu": MAX_CPU})), "spec.resources.cpu",
                   cluster=False)  # fmt: skip
    yield BadInput("machine", "memory-beyond-the-machine",
                   as_yaml(manifest(resources={"memory": "1Ti"})), "spec.resources.memory",
                   cluster=False)  # fmt: skip


CATEGORIES: dict[str, Callable[[], Iterator[BadInput]]] = {
    "bounds": bounds,
    "types": types,
    "names": names,
    "references": references,
    "placement": placement,
    "semantics": semantics,
    "objectives": objectives,
    "targets": targets,
    "services": services,
    "numbers": numbers,
    "echoes": echoes,
    "yaml": yaml_pathologies,
    "machine": machine,
}
CASES = [case for category in CATEGORIES.values() for case in category()]


def names_the_field(output: str, field: str) -> bool:
    """Whether output names field (spec.models[0].workers[0]) as itself, or a field below it:
    not merely a longer name that starts the same way."""
    spelled = re.escape(field)
    return re.search(rf"(?<![\w.]){spelled}(?=[:\s\"'.\[]|$)", output, re.MULTILINE) is not None
