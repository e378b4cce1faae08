"""Trial and delay-target Pods as manifests (pure: unit-tested without a cluster).

A trial Pod is Guaranteed QoS with whole CPUs (pinned on static-CPU-manager nodes), meets the
restricted Pod Security Standard, is owned by its experiment, and returns the runner's Result
through its termination message.
"""

from __future__ import annotations

import math
from typing import Any

from cxlab.config import OperatorConfig
from cxlab.experiments.plan import (
    HOST_COMMAND,
    LOCUST_MASTER_PORT,
    Trial,
    locust_master,
    runner_command,
)
from cxlab.experiments.spec import API_VERSION, DEFAULT_RESPONSE_BYTES, KIND, ExperimentSpec
from cxlab.experiments.target import CA_FILE, CA_MOUNT, TargetSpec, header_environment
from cxlab_contract import HOST_TOKEN_ENV
from cxlab_contract.durations import format_duration, parse_duration

LABEL_EXPERIMENT = "cxlab.dev/experiment"
LABEL_TRIAL = "cxlab.dev/trial"
LABEL_ATTEMPT = "cxlab.dev/attempt"
LABEL_POD = "cxlab.dev/pod"  # the index among a trial's Pods (Prometheus' pod_index)
# The Service a trial calls (workload.target.service): what a NetworkPolicy beside it selects.
LABEL_TARGET_SERVICE = "cxlab.dev/target-service"
LABEL_TARGET_NAMESPACE = "cxlab.dev/target-namespace"
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
ANNOTATION_KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
LABEL_COMPONENT = "app.kubernetes.io/component"
COMPONENT_TRIAL = "trial"
COMPONENT_HOST = "trial-host"  # isolation: process: a Pod that runs trials as processes
COMPONENT_TARGET = "delay-target"
COMPONENT_COPY = "service-copy"  # a spec.service variant's copy (cxlab.experiments.service_copy)
LABEL_VARIANT = "cxlab.dev/service-variant"  # its variant's index (1, 2, ...)
RUNNER_UID = 65532  # the runner image's non-root user
TERMINATION_LOG = "/dev/termination-log"

Manifest = dict[str, Any]


def trial_pod_name(experiment: str, trial: Trial, attempt: int, pod: int = 0) -> str:
    # Short and unique per attempt (and Pod): the trial's full name is in a label.
    name = f"{experiment}-t{trial.index:03d}-a{attempt}"
    return name if trial.pods == 1 else f"{name}-p{pod}"


def host_pod_name(experiment: str, index: int) -> str:
    return f"{experiment}-host{index}"


def hosted_result_path(pod_name: str) -> str:
    """Where a hosted trial's runner writes its Result: the host's /tmp (its emptyDir)."""
    return f"/tmp/{pod_name}.result"


def target_pod_name(experiment: str) -> str:
    return f"{experiment}-target"


def labels(experiment: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "cxlab",
        "app.kubernetes.io/instance": experiment,
        LABEL_COMPONENT: component,
        "app.kubernetes.io/part-of": "cxlab",
        "app.kubernetes.io/managed-by": "cxlab-operator",
        LABEL_EXPERIMENT: experiment,
    }


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _restricted_container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _restricted_pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUNNER_UID,
        "runAsGroup": RUNNER_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _exclusive_affinity(affinity: dict[str, Any] | None, host: bool = False) -> dict[str, Any]:
    """No two trial Pods (of any experiment, so of one trial neither) on one node, added to
    the user's affinity. A trial host also keeps off other hosts' nodes (a required
    anti-affinity holds both ways: no trial Pod comes to its node either)."""
    merged = dict(affinity or {})
    anti = dict(merged.get("podAntiAffinity", {}))
    terms = list(anti.get("requiredDuringSchedulingIgnoredDuringExecution", []))
    selector: dict[str, Any] = {"matchLabels": {LABEL_COMPONENT: COMPONENT_TRIAL}}
    if host:
        selector = {
            "matchExpressions": [
                {"key": LABEL_COMPONENT, "operator": "In",
                 "values": [COMPONENT_TRIAL, COMPONENT_HOST]}
            ]
        }  # fmt: skip
    terms.append({"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"})
    anti["requiredDuringSchedulingIgnoredDuringExecution"] = terms
    merged["podAntiAffinity"] = anti
    return merged


# A runner waits this much longer at the start barrier than the operator does: the operator
# is the one to fail the trial, naming the late Pod; the runner's own timeout is for when no
# operator is left to release or fail it.
RUNNER_BARRIER_MARGIN_SECONDS = 15.0


def runner_barrier_timeout(operator_timeout: str) -> str:
    return format_duration(parse_duration(operator_timeout) + RUNNER_BARRIER_MARGIN_SECONDS)


def build_trial_pod(
    *,
    experiment: str,
    namespace: str,
    uid: str,
    spec: ExperimentSpec,
    trial: Trial,
    attempt: int,
    config: OperatorConfig,
    target_url: str | None = None,
    pod: int = 0,
    locust_address: str | None = None,
    hosted: bool = False,
    unprobed: bool = False,
) -> Manifest:
    """Pod `pod` of the trial. `hosted`: the manifest a trial host runs as a process
    (isolation: process): its Result in the host's /tmp, no probes (the host says when its
    tasks have ended). Its readiness probe is the runner's /done: Ready once its
    tasks have ended, when the operator reads its final /metrics (the runner waits for that
    read, at most config.final_read). `unprobed`: no readiness probe, the operator
    long-polls /done itself (cxlab.controller.done_watch); the kubelet tears down a Pod
    without one in half the time. A trial of several Pods waits at the start barrier:
    its startup probe is the runner's /ready (the container counts as started there), and
    the operator releases them together. A distributed Locust trial's master listens on
    LOCUST_MASTER_PORT for its workers, which reach it at `locust_address`, and is the only
    one of them with a barrier to probe."""
    master = locust_master(trial)
    name = trial_pod_name(experiment, trial, attempt, pod)
    result_path = hosted_result_path(name) if hosted else TERMINATION_LOG
    command = runner_command(
        spec,
        trial,
        experiment=experiment,
        metrics_port=config.metrics_port,
        result_path=result_path,
        linger=config.linger,
        final_read=config.final_read,
        target_url=target_url,
        pod=pod,
        barrier_timeout=runner_barrier_timeout(config.barrier_timeout),
        locust_address=f"0.0.0.0:{LOCUST_MASTER_PORT}" if pod == master else locust_address,
    )
    runner = _runner_container(spec, config, command)
    volumes = [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    if hosted:
        runner["terminationMessagePath"] = result_path
    elif spec.workload.target is not None:  # a host has the target's env and CA of its own
        _call_target(spec.workload.target, runner, volumes)
    if pod == master:
        runner["ports"].append({"name": "locust", "containerPort": LOCUST_MASTER_PORT})
    barrier = trial.pods > 1 and (master is None or pod == master)
    _probe(runner, config, barrier=barrier, done=not (hosted or unprobed))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _trial_metadata(experiment, namespace, uid, spec, trial, attempt, pod, config),
        "spec": _trial_pod_spec(spec, runner, volumes),
    }


def _probe(runner: Manifest, config: OperatorConfig, *, barrier: bool, done: bool) -> None:
    """The runner's probes: at a start barrier (`barrier`), its startup probe is /ready;
    with a final read (and `done`: the kubelet probes it), its readiness probe is /done."""
    if barrier:
        # Past the runner's own barrier timeout its runner has exited 3: the kubelet's
        # restart for a failed startup probe never comes first.
        barrier_seconds = parse_duration(runner_barrier_timeout(config.barrier_timeout))
        runner["startupProbe"] = {
            "httpGet": {"path": "/ready", "port": config.metrics_port},
            "periodSeconds": 1,
            "failureThreshold": math.ceil(barrier_seconds) + 1,
        }
    if parse_duration(config.final_read) > 0 and done:
        runner["readinessProbe"] = {
            "httpGet": {"path": "/done", "port": config.metrics_port},
            "periodSeconds": 1,
        }


def build_host_pod(
    *,
    experiment: str,
    namespace: str,
    uid: str,
    spec: ExperimentSpec,
    config: OperatorConfig,
    index: int,
    token: str,
) -> Manifest:
    """A trial host (isolation: process): a trial Pod's resources, placement and security,
    whose container is the runner image's trial host (cxlab_runner.trial_host). It runs the
    trials the operator posts to it one at a time, each a fresh process on its cores, and
    lives as long as the experiment has trials to run. Ready once its fork server is warm.
    `token`: what it asks of every request but /healthz (whoever can reach its port but not
    read its Pod cannot start or stop its trials)."""
    command = [*HOST_COMMAND, "--port", str(config.host_port)]
    runner = _runner_container(spec, config, command)
    runner["name"] = "host"
    runner["ports"].append({"name": "host", "containerPort": config.host_port})
    runner["readinessProbe"] = {
        "httpGet": {"path": "/healthz", "port": config.host_port},
        "periodSeconds": 1,
    }
    volumes = [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    if spec.workload.target is not None:  # its trials inherit the env and the CA mount
        _call_target(spec.workload.target, runner, volumes)
    # (the host takes it out of its environment before it starts a trial)
    runner.setdefault("env", []).append({"name": HOST_TOKEN_ENV, "value": token})
    pod_spec = _trial_pod_spec(spec, runner, volumes, host=True)
    metadata = {
        "name": host_pod_name(experiment, index),
        "namespace": namespace,
        "labels": labels(experiment, COMPONENT_HOST),
        # Its trials' runners serve /metrics on the Pod's metrics port, one at a time.
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(config.metrics_port),
        },
        "ownerReferences": [owner_reference(experiment, uid)],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def _call_target(target: TargetSpec, runner: Manifest, volumes: list[Manifest]) -> None:
    """What the runner needs to call the user's service: each secret header's value in its
    environment (the kubelet reads the Secret; the operator never does, and the runner's
    arguments name only the variable), and the CA bundle mounted where --tls-ca points."""
    env = [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}
        for name, ref in header_environment(target).items()
    ]
    if env:
        runner["env"] = env
    ca = target.tls.ca if target.tls is not None else None
    if ca is not None:
        items = [{"key": (ca.config_map_key_ref or ca.secret_key_ref).key, "path": CA_FILE}]  # type: ignore[union-attr]
        if ca.config_map_key_ref is not None:
            source = {"configMap": {"name": ca.config_map_key_ref.name, "items": items}}
        else:
            source = {"secret": {"secretName": ca.secret_key_ref.name, "items": items}}  # type: ignore[union-attr]
        volumes.append({"name": "target-ca", **source})
        runner["volumeMounts"].append(
            {"name": "target-ca", "mountPath": CA_MOUNT, "readOnly": True}
        )


def _runner_container(spec: ExperimentSpec, config: OperatorConfig, command: list[str]) -> Manifest:
    """Guaranteed QoS (requests = limits), restricted, its Result in the termination message."""
    resources = {"cpu": str(spec.resources.cpu), "memory": spec.resources.memory}
    return {
        "name": "runner",
        "image": spec.image or config.runner_image,
        "imagePullPolicy": config.image_pull_policy,
        "command": command,
        "ports": [{"name": "metrics", "containerPort": config.metrics_port}],
        "resources": {"requests": resources, "limits": resources},
        "securityContext": _restricted_container_security(),
        # The Result; if the runner dies before writing it, the tail of its log.
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }


def _trial_pod_spec(
    spec: ExperimentSpec, runner: Manifest, volumes: list[Manifest], host: bool = False
) -> Manifest:
    """One run of the runner, stopped by the kubelet past trialTimeout, placed as asked. A
    trial host (`host`) has no deadline of its own: it stops each trial past trialTimeout
    itself (a restart would lose what it holds: it is never restarted)."""
    placement = spec.placement
    affinity = placement.affinity
    if spec.exclusive:
        affinity = _exclusive_affinity(placement.affinity, host=host)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # The kubelet stops a trial that outlives its timeout (phase Failed, DeadlineExceeded).
        "activeDeadlineSeconds": max(1, round(parse_duration(spec.trial_timeout))),
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _restricted_pod_security(),
        "containers": [runner],
        "volumes": volumes,
    }
    if host:
        del pod_spec["activeDeadlineSeconds"]
    if placement.node_selector:
        pod_spec["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        pod_spec["tolerations"] = list(placement.tolerations)
    if affinity:
        pod_spec["affinity"] = affinity
    return pod_spec


def _trial_metadata(
    experiment: str, namespace: str, uid: str, spec: ExperimentSpec, trial: Trial, attempt: int,
    pod: int, config: OperatorConfig,
) -> Manifest:  # fmt: skip
    """Its name (attempt and Pod in it), the labels the operator's index and Kueue read,
    and the annotations Prometheus discovers it by; owned by its experiment."""
    pod_labels = labels(experiment, COMPONENT_TRIAL) | {
        LABEL_TRIAL: trial.name,
        LABEL_ATTEMPT: str(attempt),
        LABEL_POD: str(pod),
        "cxlab.dev/model": trial.model,
    }
    service = spec.workload.target.service if spec.workload.target is not None else None
    if service is not None:
        pod_labels[LABEL_TARGET_SERVICE] = service.name
        pod_labels[LABEL_TARGET_NAMESPACE] = service.namespace or namespace
    annotations = {
        # For Prometheus setups that discover Pods by annotation.
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(config.metrics_port),
    }
    if spec.queue_name:  # Kueue's plain-Pod integration gates the Pod until it admits it
        pod_labels[LABEL_KUEUE_QUEUE] = spec.queue_name
        if trial.pods > 1 and locust_master(trial) is None:
            # A Kueue Pod group: all of a trial's Pods admitted together, or none (apart,
            # some would wait at the barrier for others Kueue holds back). Not a Locust
            # trial's: its workers are created once its master runs.
            pod_labels[LABEL_KUEUE_POD_GROUP] = trial_pod_name(experiment, trial, attempt, 0)
            annotations[ANNOTATION_KUEUE_GROUP_COUNT] = str(trial.pods)
    return {
        "name": trial_pod_name(experiment, trial, attempt, pod),
        "namespace": namespace,
        "labels": pod_labels,
        "annotations": annotations,
        "ownerReferences": [owner_reference(experiment, uid)],
    }


def build_target_pod(
    *, experiment: str, namespace: str, uid: str, spec: ExperimentSpec, config: OperatorConfig
) -> Manifest:
    """The HTTP delay target of an http experiment: BestEffort, so it takes no CPU from the
    trials' exclusive cores (it runs in the node's shared pool)."""
    response_bytes = spec.workload.response_bytes
    if response_bytes is None:
        response_bytes = DEFAULT_RESPONSE_BYTES
    placement = spec.placement
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Always",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _restricted_pod_security(),
        "containers": [
            {
                "name": "target",
                "image": spec.image or config.runner_image,
                "imagePullPolicy": config.image_pull_policy,
                "command": [
                    "cxlab-delay",
                    f"--listen=:{config.target_port}",
                    f"--response-bytes={response_bytes}",
                ],
                "ports": [{"name": "http", "containerPort": config.target_port}],
                "readinessProbe": {
                    "httpGet": {"path": "/healthz", "port": config.target_port},
                    "periodSeconds": 1,
                },
                "securityContext": _restricted_container_security(),
            }
        ],
    }
    if placement.node_selector:
        pod_spec["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        pod_spec["tolerations"] = list(placement.tolerations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": target_pod_name(experiment),
            "namespace": namespace,
            "labels": labels(experiment, COMPONENT_TARGET),
            "ownerReferences": [owner_reference(experiment, uid)],
        },
        "spec": pod_spec,
    }
