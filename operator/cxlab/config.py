"""Operator settings, from environment variables (one typed place, read once)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cxlab_contract.durations import parse_duration


@dataclass(frozen=True)
class OperatorConfig:
    runner_image: str = "cxlab.dev/runner:dev"
    image_pull_policy: str = "IfNotPresent"
    metrics_port: int = 9100
    target_port: int = 8080
    # A trial host's own port (isolation: process): trials are started and watched there.
    host_port: int = 9101
    # The runner keeps serving metrics this long after its tasks, so that a Prometheus scraping
    # the runners sees their final values. Off by default: the operator reads the final values
    # from the Result, and a lingering runner holds its trial's cores and delays the next
    # trial by as long (the Helm chart sets it when its PodMonitor scrapes the runners).
    linger: str = "0s"
    # After its tasks a runner waits this long at most for the operator's one read of its
    # final /metrics (a trial Pod turns Ready when its tasks end, and the operator reads it
    # then): however short the trial, its final metrics are read. Bounded for an operator
    # that is down or cannot reach the Pod; "0s": no final read, nor readiness probe.
    final_read: str = "10s"
    # Pods started per trial before a lost trial (evicted, deleted) counts as failed.
    max_attempts: int = 3
    # How long a trial may be unschedulable while nothing of its experiment runs.
    unschedulable_grace_seconds: float = 15.0
    # How long after its Pod was created a trial's container may wait on an image the
    # kubelet could not pull (ErrImagePull, ImagePullBackOff) or a container it could not
    # create (CreateContainer[Config]Error) before the trial fails; InvalidImageName and
    # ErrImageNeverPull fail at once.
    image_pull_grace_seconds: float = 90.0
    # How long a trial of several Pods waits, from its first Pod's creation, for all of them
    # to be ready at the start barrier before it fails (a Pod unschedulable, deleted, or
    # whose image does not come); its runners wait as long for the release.
    barrier_timeout: str = "120s"
    # An experiment is reconciled when one of its Pods or its spec changes, when a deadline it
    # waits on falls due, and at least this often (a safety net: nothing relies on it).
    reconcile_interval_seconds: float = 30.0
    # Running trials' task counts are read (GET /metrics) and written to status.progress at
    # most this often, and only once a trial has run this long: a status patch each time.
    progress_interval_seconds: float = 10.0
    # After a pass wrote an experiment's status, its next pass waits this long, so that the
    # trials ending meanwhile are recorded together: one status write, one results ConfigMap
    # patch, one watch event of the experiment for several trials (its status is tens of KiB:
    # each write costs the operator, the apiserver and every watcher its parse). A trial that
    # ends after a quiet spell is recorded at once. 0: every pass at once.
    status_interval_seconds: float = 0.5
    # Reconcile passes that may run at once (threads); each experiment has one at a time. A
    # pass mostly waits on the apiserver (a status write, a Pod created and deleted, a results
    # ConfigMap): with few threads, busy experiments wait seconds for a finished trial to be
    # recorded (docs/benchmarks.md, the operator at scale).
    workers: int = 16
    # The operator's own /metrics (0 = not served).
    operator_metrics_port: int = 8081
    scrape_timeout_seconds: float = 1.0
    # A Prometheus that scrapes cAdvisor: finished trials get their container's CPU
    # throttling and peak memory working set from it (None = not asked).
    prometheus_url: str | None = None
    prometheus_timeout_seconds: float = 2.0

    @classmethod
    def from_environment(cls, env: Mapping[str, str] = os.environ) -> OperatorConfig:
        defaults = cls()
        return cls(
            runner_image=env.get("CXLAB_RUNNER_IMAGE", defaults.runner_image),
            image_pull_policy=env.get("CXLAB_IMAGE_PULL_POLICY", defaults.image_pull_policy),
            linger=env.get("CXLAB_RUNNER_LINGER", defaults.linger),
            final_read=env.get("CXLAB_RUNNER_FINAL_READ", defaults.final_read),
            host_port=_int(env, "CXLAB_HOST_PORT", defaults.host_port),
            max_attempts=_int(env, "CXLAB_MAX_ATTEMPTS", defaults.max_attempts),
            unschedulable_grace_seconds=_seconds(env, "CXLAB_UNSCHEDULABLE_GRACE", "15s"),
            image_pull_grace_seconds=_seconds(env, "CXLAB_IMAGE_PULL_GRACE", "90s"),
            barrier_timeout=env.get("CXLAB_BARRIER_TIMEOUT", defaults.barrier_timeout),
            reconcile_interval_seconds=_seconds(env, "CXLAB_RECONCILE_INTERVAL", "30s"),
            progress_interval_seconds=_seconds(env, "CXLAB_PROGRESS_INTERVAL", "10s"),
            status_interval_seconds=_seconds(env, "CXLAB_STATUS_INTERVAL", "500ms"),
            workers=_int(env, "CXLAB_WORKERS", defaults.workers),
            operator_metrics_port=_int(
                env, "CXLAB_OPERATOR_METRICS_PORT", defaults.operator_metrics_port
            ),
            prometheus_url=env.get("CXLAB_PROMETHEUS_URL") or None,
        )


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    """A whole number from the environment; a value that is none says which variable."""
    text = env.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a whole number") from None


def _seconds(env: Mapping[str, str], name: str, default: str) -> float:
    """A Go-style duration from the environment, in seconds; a bad one says which variable."""
    text = env.get(name, default)
    try:
        return parse_duration(text)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
