"""Experiments in a namespace being deleted, which kopf does not serve after a restart.

kopf serves the namespaces that match the operator's --namespace patterns, but leaves out one
that is already terminating when it starts (it waits for the namespace's own finalizers and
content to go, which include the experiments): an operator restarted while a namespace was
being deleted never removes its finalizer from the experiments there, and the namespace
stays Terminating for ever. This sweep does what the operator's delete handler would: the
experiment's Pods go and its finalizer is removed. It runs only with --namespace patterns (a
cluster-wide operator is served every namespace) and only in the active replica (kopf runs
there)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from kopf._cogs.structs.references import NamespaceName, match_namespace  # not re-exported

from cxlab.controller.kube import Kube
from cxlab.experiments.pods import LABEL_EXPERIMENT

# How often the namespaces are looked at: a deleted namespace is gone this long after.
SWEEP_SECONDS = 10.0

log = logging.getLogger(__name__)


def matches(namespace: str, patterns: Sequence[str]) -> bool:
    """Whether kopf serves the namespace: its own matcher, as its observer calls it (any one
    --namespace pattern; within one, comma-separated globs, "!" excluding), so the sweep
    covers exactly the namespaces kopf would."""
    name = NamespaceName(namespace)
    return any(match_namespace(name, pattern) for pattern in patterns)


def terminating(namespaces: Sequence[dict[str, Any]], patterns: Sequence[str]) -> list[str]:
    """The namespaces of ours (matching the patterns) that are being deleted."""
    return [
        n["metadata"]["name"]
        for n in namespaces
        if n["metadata"].get("deletionTimestamp") and matches(n["metadata"]["name"], patterns)
    ]


def held(experiments: Sequence[dict[str, Any]], finalizer: str) -> list[str]:
    """The experiments being deleted that still carry the operator's finalizer."""
    return [
        e["metadata"]["name"]
        for e in experiments
        if e["metadata"].get("deletionTimestamp")
        and finalizer in (e["metadata"].get("finalizers") or [])
    ]


async def keep_sweeping(kube: Kube, patterns: Sequence[str], finalizer: str) -> None:
    """Sweep every SWEEP_SECONDS (in a thread: the client is blocking) until cancelled."""
    while True:
        try:
            await asyncio.to_thread(sweep, kube, patterns, finalizer)
        except Exception:  # the apiserver away for a moment: the next sweep
            log.exception("sweeping terminating namespaces failed")
        await asyncio.sleep(SWEEP_SECONDS)


def sweep(kube: Kube, patterns: Sequence[str], finalizer: str) -> list[tuple[str, str]]:
    """Release every held experiment of every terminating namespace of ours; what it released."""
    released = []
    for namespace in terminating(kube.list_namespaces(), patterns):
        for name in held(kube.list_experiment_metadata(namespace), finalizer):
            kube.delete_pods(namespace, f"{LABEL_EXPERIMENT}={name}")
            if kube.remove_finalizer(namespace, name, finalizer):
                log.info("%s/%s: finalizer removed: its namespace goes", namespace, name)
                released.append((namespace, name))
    return released
