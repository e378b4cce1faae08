"""One pass over one experiment as the passes' steps share it: what it read and has written
(Pass), and what it tells the loop that runs it (PassReport)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cxlab.controller.admission import Admission
from cxlab.controller.memory import Memory
from cxlab.experiments.decide import Observed
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import COMPONENT_TARGET
from cxlab.experiments.service_run import Copies, ServicePlan
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ExperimentStatus, ServiceCopyRequest

Body = dict[str, Any]  # the experiment as the apiserver has it
# (type Normal|Warning, reason, message) → a Kubernetes Event on the experiment
EventSink = Callable[[str, str, str], None]


@dataclass
class PassReport:
    """What one pass did, for the loop that runs them."""

    # Look again after this long even if nothing changes (None: no deadline of its own).
    recheck_seconds: float | None = None
    # The object as the pass's status write returned it (None: nothing written).
    written: Body | None = None
    # Finished and tidied: only a change (or its TTL) can call for another pass.
    idle: bool = False
    # The rest of the act step of a crowded pass (cxlab.controller.actor), to run after
    # the passes waiting and before this experiment's next pass; returns the seconds until
    # that pass is due if sooner than recheck_seconds (0: a Pod it created was refused, and
    # the next pass decides on it), else None. It writes nothing.
    later: Callable[[], float | None] | None = None
    # Whether the next pass waits the status interval: only while several trials run, whose
    # ends one write may take in together; one trial alone ends one at a time.
    space: bool = True


@dataclass
class Pass:
    """One pass's state: what it read, and what it has written so far."""

    body: Body
    status: ExperimentStatus  # as read: the old status the new one is built on
    spec: ExperimentSpec
    spec_changed: bool
    observed: Observed  # what decide decides from (with the full entries, once it needs them)
    memory: Memory
    admission: Admission
    written: Body | None = None
    # spec.service: its copies as listed, and what this pass does about them (once decided)
    copies: Copies | None = None
    service_plan: ServicePlan | None = None
    # spec.service before admission: what its copy asks of the nodes, as read in this pass
    service_copy: ServiceCopyRequest | None = None

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def version(self) -> str | None:
        version: str | None = (self.written or self.body)["metadata"].get("resourceVersion")
        return version

    @property
    def target(self) -> PodView | None:
        return next((p for p in self.observed.pods if p.component == COMPONENT_TARGET), None)

    def positions(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.observed.trials)}
