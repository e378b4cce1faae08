"""When the clock alone changes an experiment's decision (pure): the reconcile loop sleeps
until then, or until a change of a Pod or of the experiment wakes it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from cxlab.config import OperatorConfig
from cxlab.experiments.decide import Decision
from cxlab.experiments.diagnose import MAY_START
from cxlab.experiments.plan import Trial
from cxlab.experiments.pod_view import PodPhase, PodView
from cxlab.experiments.pods import COMPONENT_TARGET
from cxlab_contract.durations import parse_duration


def next_deadline(
    decision: Decision, pods: Sequence[PodView], config: OperatorConfig
) -> datetime | None:
    """The earliest moment at which the same Pods would be decided differently by the clock
    alone: an unplaced Pod's unschedulable grace, a stuck container's image pull grace, a
    trial's start barrier timeout. None when nothing waits on time. Everything else that
    changes a decision is a change of a Pod or of the experiment, which wakes a pass anyway."""
    moments: list[datetime] = []
    starting = [p for _, p in decision.running if p.phase == PodPhase.PENDING and p.created]
    starting += [p for p in pods if p.component == COMPONENT_TARGET and p.created and not p.ready]
    for pod in starting:
        assert pod.created is not None
        if pod.unschedulable:
            moments.append(pod.created + timedelta(seconds=config.unschedulable_grace_seconds))
        if (pod.waiting_reason or "") in MAY_START:
            moments.append(pod.created + timedelta(seconds=config.image_pull_grace_seconds))
    by_trial: dict[str, tuple[Trial, list[PodView]]] = {}
    for trial, pod in decision.running:
        by_trial.setdefault(trial.name, (trial, []))[1].append(pod)
    for trial, mine in by_trial.values():
        created = [p.created for p in mine if p.created]
        if trial.pods > 1 and created and not any(p.exit_code is not None for p in mine):
            moments.append(min(created) + timedelta(seconds=parse_duration(config.barrier_timeout)))
    return min(moments, default=None)
