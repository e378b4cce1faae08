"""Trial and delay-target Pods as manifests (pure: unit-tested without a cluster).

A trial Pod is Guaranteed QoS with whole CPUs (pinned on static-CPU-manager nodes), meets the
restricted Pod Security Standard, is owned by its experiment, and returns the runner's Result
through its termination message.
"""

from __future__ import annotations

from typing import Any

from cxlab.controller.config import OperatorConfig
from cxlab.crd import GROUP, VERSION
from cxlab.plan import Trial, runner_command
from cxlab.spec import DEFAULT_RESPONSE_BYTES, KIND, ExperimentSpec
from cxlab_runner.durations import parse_duration

LABEL_EXPERIMENT = "cxlab.dev/experiment"
LABEL_TRIAL = "cxlab.dev/trial"
LABEL_ATTEMPT = "cxlab.dev/attempt"
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_COMPONENT = "app.kubernetes.io/component"
COMPONENT_TRIAL = "trial"
COMPONENT_TARGET = "delay-target"
RUNNER_UID = 65532  # the runner image's non-root user
TERMINATION_LOG = "/dev/termination-log"

Manifest = dict[str, Any]


def trial_pod_name(experiment: str, trial: Trial, attempt: int) -> str:
    # Short and unique per attempt: the trial's full name is in a label.
    return f"{experiment}-t{trial.index:03d}-a{attempt}"


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
        "apiVersion": f"{GROUP}/{VERSION}",
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


def _exclusive_affinity(affinity: dict[str, Any] | None) -> dict[str, Any]:
    """No two trial Pods (of any experiment) on one node, added to the user's affinity."""
    merged = dict(affinity or {})
    anti = dict(merged.get("podAntiAffinity", {}))
    terms = list(anti.get("requiredDuringSchedulingIgnoredDuringExecution", []))
    terms.append(
        {
            "labelSelector": {"matchLabels": {LABEL_COMPONENT: COMPONENT_TRIAL}},
            "topologyKey": "kubernetes.io/hostname",
        }
    )
    anti["requiredDuringSchedulingIgnoredDuringExecution"] = terms
    merged["podAntiAffinity"] = anti
    return merged


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
) -> Manifest:
    command = runner_command(
        spec,
        trial,
        experiment=experiment,
        metrics_port=config.metrics_port,
        result_path=TERMINATION_LOG,
        linger=config.linger,
        target_url=target_url,
    )
    resources = {"cpu": str(spec.resources.cpu), "memory": spec.resources.memory}
    placement = spec.placement
    affinity = _exclusive_affinity(placement.affinity) if spec.exclusive else placement.affinity
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # The kubelet stops a trial that outlives its timeout (phase Failed, DeadlineExceeded).
        "activeDeadlineSeconds": max(1, round(parse_duration(spec.trial_timeout))),
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _restricted_pod_security(),
        "containers": [
            {
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
        ],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
    }
    if placement.node_selector:
        pod_spec["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        pod_spec["tolerations"] = list(placement.tolerations)
    if affinity:
        pod_spec["affinity"] = affinity
    pod_labels = labels(experiment, COMPONENT_TRIAL) | {
        LABEL_TRIAL: trial.name,
        LABEL_ATTEMPT: str(attempt),
        "cxlab.dev/model": trial.model,
    }
    if spec.queue_name:  # Kueue's plain-Pod integration gates the Pod until it admits it
        pod_labels[LABEL_KUEUE_QUEUE] = spec.queue_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": trial_pod_name(experiment, trial, attempt),
            "namespace": namespace,
            "labels": pod_labels,
            "annotations": {
                # For Prometheus setups that discover Pods by annotation.
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(config.metrics_port),
            },
            "ownerReferences": [owner_reference(experiment, uid)],
        },
        "spec": pod_spec,
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
