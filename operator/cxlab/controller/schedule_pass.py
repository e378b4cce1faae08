"""One pass over one ExperimentSchedule: read (its runs from the index, finished runs' full
status once), decide (cxlab.schedules.decide, pure), write the status guarded by the object's
resourceVersion, then act: stop replaced runs, create the slot's run, delete runs beyond the
limits. In that order, so a crash or a second operator at any point starts no run twice and
deletes no run before its history entry is written."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.conditions import condition_of, set_condition
from cxlab.controller.kube import Kube
from cxlab.controller.metrics import OperatorMetrics
from cxlab.crd import GROUP
from cxlab.experiments.fields import SpecError
from cxlab.experiments.spec import API_VERSION, KIND
from cxlab.experiments.status import ExperimentStatus
from cxlab.schedules.decide import RunView, add_count, decide
from cxlab.schedules.history import SCHEDULED_TIME_ANNOTATION, HistoryEntry, history_entry
from cxlab.schedules.spec import SCHEDULE_KIND, parse_experiment_schedule
from cxlab.schedules.status import ScheduleStatus
from cxlab.times import parse_time, timestamp

# The label every run carries: the schedule's name (the index and `kubectl get cx -l` use it).
LABEL_SCHEDULE = f"{GROUP}/schedule"
EventSink = Callable[[str, str, str], None]
log = logging.getLogger(__name__)


def view_run(body: Mapping[str, Any]) -> RunView:
    metadata = body["metadata"]
    slot = (metadata.get("annotations") or {}).get(SCHEDULED_TIME_ANNOTATION)
    return RunView(
        name=metadata["name"],
        phase=(body.get("status") or {}).get("phase"),
        scheduled=parse_time(slot) if slot else None,
        deleting=bool(metadata.get("deletionTimestamp")),
    )


def run_spec(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template's spec as the user wrote it; a capacity plan is verified unless the
    template says verify: {enabled: false} (a schedule exists to plan capacity), and the run
    calibrates unless it says calibration: false (a schedule compares runs over time)."""
    spec = copy.deepcopy(dict(template))
    if spec.get("calibration") is None:
        spec["calibration"] = True
    capacity = spec.get("capacity")
    if isinstance(capacity, dict) and capacity.get("verify") is None:
        capacity["verify"] = {}
    return spec


def run_manifest(schedule: Mapping[str, Any], name: str, slot: str) -> dict[str, Any]:
    """The run: the template's spec (run_spec), owned by the schedule (deleting the schedule
    deletes its runs), labelled and annotated with its slot."""
    metadata = schedule["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": {LABEL_SCHEDULE: metadata["name"]},
            "annotations": {SCHEDULED_TIME_ANNOTATION: slot},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": SCHEDULE_KIND,
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": run_spec(schedule["spec"]["experimentTemplate"]["spec"]),
    }


class ScheduleReconciler:
    def __init__(self, kube: Kube, metrics: OperatorMetrics, clock: Callable[[], datetime]) -> None:
        self.kube = kube
        self.metrics = metrics
        self.clock = clock

    def reconcile(self, body: Mapping[str, Any], runs: Iterable[RunView], event: EventSink) -> None:
        metadata, old = body["metadata"], ScheduleStatus.read(body.get("status") or {})
        namespace, name = metadata["namespace"], metadata["name"]
        now, generation = self.clock(), int(metadata.get("generation", 1))
        try:
            schedule = parse_experiment_schedule(dict(body))
        except SpecError as error:
            self._reject(body, old, error, event, generation, now)
            return
        finished = _FinishedRuns(self.kube, namespace)
        decided = decide(schedule, old, list(runs), finished.entry, finished.plan,
                         generation=generation, now=now)  # fmt: skip
        version: str | None = metadata["resourceVersion"]
        if decided.status != old:
            version = self._write(body, version, decided.status)
            if version is None:
                return  # another writer got there first: the next pass decides again
        for doomed in decided.stop:
            self.kube.delete_experiment(namespace, doomed)
        status = decided.status
        if decided.create:
            assert status.last_schedule_time is not None  # the slot it starts
            slot = timestamp(status.last_schedule_time)
            refused = self.kube.create_experiment(run_manifest(body, decided.create, slot))
            status = self._after_create(body, version, status, decided.create, refused, now, event)
        for doomed in decided.delete:
            self.kube.delete_experiment(namespace, doomed)
        for kind, reason, message in decided.events:
            event(kind, reason, message)
        self.metrics.observe_schedule(namespace, name, status)

    def _after_create(
        self,
        body: Mapping[str, Any],
        version: str | None,
        status: ScheduleStatus,
        run: str,
        refused: str | None,
        now: datetime,
        event: EventSink,
    ) -> ScheduleStatus:
        """A run the apiserver refused (an admission policy, a quota) is a slot missed, with
        the RunRefused condition and event saying why; the next run it takes clears it."""
        was = condition_of(status.conditions, "RunRefused")
        if refused is None and not (was and was.true):
            return status
        generation = int(body["metadata"].get("generation", 1))
        if refused is None:
            conditions = set_condition(
                status.conditions, "RunRefused", False, "RunCreated", f"run {run} created",
                generation=generation, now=now,
            )  # fmt: skip
            changed = status.model_copy(update={"conditions": conditions})
        else:
            message = f"run {run} was refused by the apiserver: {refused}"[:1000]
            conditions = set_condition(status.conditions, "RunRefused", True, "RunRefused",
                                       message, generation=generation, now=now)  # fmt: skip
            changed = status.model_copy(update={
                "conditions": conditions,
                "started_runs": (status.started_runs or 1) - 1,
                "active": [a for a in status.active or [] if a != run],
            })  # fmt: skip
            add_count(changed, "missed_runs")
            event("Warning", "RunRefused", message)
        # Lost to a 409, the condition is written when the next slot's run is created or not.
        return changed if self._write(body, version, changed) else status

    def _reject(
        self,
        body: Mapping[str, Any],
        old: ScheduleStatus,
        error: SpecError,
        event: EventSink,
        generation: int,
        now: datetime,
    ) -> None:
        """A spec the schema could not refuse (an unknown time zone): no run starts, and the
        Ready condition names the field (cxlab_schedule_refused{reason="InvalidSpec"})."""
        metadata, message = body["metadata"], "; ".join(error.problems)
        key = (metadata["namespace"], metadata["name"])
        was = condition_of(old.conditions, "Ready")
        if was and was.reason == "InvalidSpec" and was.message == message:
            self.metrics.observe_schedule(*key, old)
            return
        conditions = set_condition(
            old.conditions, "Ready", False, "InvalidSpec", message[:1000],
            generation=generation, now=now,
        )  # fmt: skip
        status = old.model_copy(
            update={"observed_generation": generation, "conditions": conditions}
        )
        if self._write(body, metadata["resourceVersion"], status):
            self.metrics.observe_schedule(*key, status)
            event("Warning", "InvalidSpec", message[:1000])

    def _write(
        self, body: Mapping[str, Any], version: str | None, status: ScheduleStatus
    ) -> str | None:
        """The status written, refused if the object changed since `version` was read: two
        operators, or a restarted one and a stale event, never both record a slot. The
        object's new resourceVersion, or None when refused."""
        metadata = body["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        written = self.kube.replace_schedule_status(namespace, name, version, status)
        if written is None:
            log.info("%s/%s changed since read; next pass", namespace, name)
        return written


class _FinishedRuns:
    """A pass's reads of its finished runs: each read once, with its Results (the history's
    points are the trials' figures)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.read: dict[str, ExperimentStatus | None] = {}
        self.documents: dict[str, dict[str, Any] | None] = {}

    def _document(self, name: str) -> dict[str, Any] | None:
        if name not in self.documents:
            self.documents[name] = self.kube.get_experiment(self.namespace, name, full=True)
        return self.documents[name]

    def entry(self, name: str) -> HistoryEntry | None:
        found = self._document(name)
        return history_entry(found) if found else None

    def plan(self, name: str) -> CapacityPlan | None:
        found = self._document(name)
        return ExperimentStatus.read(found.get("status")).capacity_plan if found else None
