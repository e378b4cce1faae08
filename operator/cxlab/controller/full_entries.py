"""What the gather step of an experiment pass reads only when a decision needs it: the
recorded trials' full entries, whose Results a cluster keeps in ConfigMaps beside the
experiment (cxlab.experiments.results_store: one list), and the Nodes a verification of the
capacity plan must fit on at once. Needed once every trial has ended (the summary, and what
follows the sweep: Decision.needs_full), or to plan again the trials that follow when no pass
of this process handed them on (a restart), or with abortOnFail while trials end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cxlab.controller.admission import NodeReader
from cxlab.controller.kube import Kube
from cxlab.experiments.followups import Fits
from cxlab.experiments.nodes import Capacity, NodeView, Request, fits_now
from cxlab.experiments.plan import Trial
from cxlab.experiments.queue import copy_request_of
from cxlab.experiments.results_store import entries_of, results_selector
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ServiceCopyRequest, TrialEntry


@dataclass(frozen=True)
class Full:
    """The recorded entries, full (by name, in status order), and why the Nodes cannot hold
    a verification's Pods (None: the spec verifies nothing, so the Nodes were not read)."""

    entries: dict[str, TrialEntry]
    fits: Fits | None


class FullReader:
    def __init__(self, kube: Kube, nodes: NodeReader) -> None:
        self.kube = kube
        self.nodes = nodes

    def read(
        self, namespace: str, name: str, spec: ExperimentSpec, recorded: Sequence[TrialEntry],
        copy: ServiceCopyRequest | None = None,
    ) -> Full:  # fmt: skip
        """A compact entry replaced by its full entry from the experiment's ConfigMaps (one
        list, none when no entry is kept there). An entry with its Result inline (written by
        an operator before the ConfigMaps) is its own full entry."""
        entries = list(recorded)
        if any(e.results_in for e in entries):
            stored = entries_of(self.kube.list_config_maps(namespace, results_selector(name)))
            entries = [stored.get(e.name, e) if e.results_in else e for e in entries]
        verifying = spec.capacity is not None and spec.capacity.verifying is not None
        fits = fits_on(spec, self.nodes(), copy) if verifying else None
        return Full({e.name: e for e in entries}, fits)


def fits_on(
    spec: ExperimentSpec, nodes: list[NodeView], copy: ServiceCopyRequest | None = None
) -> Fits:
    """Why these Nodes, even empty, cannot hold a verification's Pods at once: against a
    service subject, its generator Pods beside its copy's replicas (each as the largest
    variant's, status.serviceCopy)."""
    request = Request.of(spec)
    replica = copy_request_of(copy.document()) if copy is not None else None

    def fits(trial: Trial) -> str | None:
        if replica is not None and trial.service_replicas:
            needs = [request] * trial.pods + [replica] * trial.service_replicas
            if Capacity(nodes).fits_all(needs):
                return None
            assert copy is not None
            return (
                f"the plan's {trial.service_replicas} replicas of {copy.cpu:g} CPU and "
                f"{copy.memory_bytes / 2**20:.0f} MiB, beside {trial.pods} generator Pod(s) of "
                f"{spec.resources.cpu} CPU, do not fit this cluster's nodes at once, even "
                f"empty: too big to verify here"
            )
        if fits_now(request, nodes, [], trial.pods):
            return None
        return (
            f"the plan's {trial.pods} Pods of {spec.resources.cpu} CPU and "
            f"{spec.resources.memory} do not fit this cluster's nodes at once, even empty: "
            f"too big to verify here"
        )

    return fits
