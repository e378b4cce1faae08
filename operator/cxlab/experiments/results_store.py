"""Where a cluster experiment's full trial entries live: ConfigMaps beside it, not its status.

A trial's full entry (its Result, each Pod's Result, Prometheus' view) is 1.6 KB with one
Pod and 10 KB with eight; a thousand of them in status would pass etcd's limit on one object
(1.5 MiB) and make every status write, watch event and `kubectl get` carry them all. So the
status keeps a compact entry per trial (what it is, how it ended, its headline figures) and
the full entries go to ConfigMaps named `<experiment>-results-<k>`:

- chunk k holds the trials at positions 100k..100k+99 of the plan, so a trial's chunk never
  changes; each trial is one key of its chunk's binaryData (`<trial>.json.gz`, gzip'd JSON),
  added by a merge patch: a pass writes the entries it records without reading the chunk,
  and a pass repeated after a crash writes the same keys again;
- gzip'd, a Result is about 600 bytes, so even a chunk of multi-Pod trials at the Results
  budget (spec.MAX_RESULTS) stays under the 1 MiB a ConfigMap may hold;
- labelled with the experiment and owned by it: garbage-collected with it.

The operator keeps none of them in memory: it reads them back (one list) only when the
experiment finishes, for its summary, and `cxlab report`/`summary` read them the same way.

The summary goes the same way, for the same limit: its table has a row per point of the
matrix, up to 1,000 of them at about 1 KB each, and each recommendation lists the points
tied with it. The status keeps the tolerance and the recommendations (the answer, their ties
counted); the whole summary is one gzip'd key of the ConfigMap `<experiment>-summary`,
written before the status that points at it (`summaryIn`).

The status stays the record of what is recorded: a full entry is written to its chunk before
the status write that records its trial, and one in a chunk but not in status is ignored.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cxlab.analysis.recommend import NoRateHeld
from cxlab.analysis.summary import Summary
from cxlab.experiments.pods import LABEL_COMPONENT, LABEL_EXPERIMENT, owner_reference
from cxlab.experiments.status import ExperimentStatus, TrialEntry

CHUNK_TRIALS = 100
COMPONENT_RESULTS = "results"
SUFFIX = ".json.gz"
SUMMARY_KEY = "summary" + SUFFIX  # in <experiment>-summary; no trial is named "summary"

Manifest = dict[str, Any]  # a ConfigMap as the apiserver takes it


def results_selector(experiment: str) -> str:
    """The label selector of an experiment's chunks."""
    return f"{LABEL_EXPERIMENT}={experiment},{LABEL_COMPONENT}={COMPONENT_RESULTS}"


def chunk_name(experiment: str, chunk: int) -> str:
    return f"{experiment}-results-{chunk}"


def chunk_of(position: int) -> int:
    """The chunk of the trial at this position of the plan."""
    return position // CHUNK_TRIALS


def compact(entry: TrialEntry, experiment: str, position: int) -> TrialEntry:
    """The status entry of a full one: no Results, the figures a reader of the status wants,
    and where the full entry is."""
    if not entry.full_only:
        return entry
    update: dict[str, Any] = {"result": None, "pod_results": None, "prometheus": None}
    result = entry.result
    if result:
        update |= {
            "wall_seconds": result["wallSeconds"],
            "throughput_per_second": result["throughputPerSecond"],
            "latency_p99_seconds": result["latencySeconds"]["p99"],
        }
    update["results_in"] = chunk_name(experiment, chunk_of(position))
    return entry.model_copy(update=update)


def encode(document: Mapping[str, Any]) -> str:
    raw = json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode()


def decode(data: str) -> Any:
    return json.loads(gzip.decompress(base64.b64decode(data)))


def summary_name(experiment: str) -> str:
    return f"{experiment}-summary"


def compact_summary(summary: Summary, experiment: str) -> Summary:
    """The status's summary of a whole one: the recommendations with their ties counted, not
    listed, and where the whole summary is (points, knees, ties)."""
    recommendations = [
        r
        if isinstance(r, NoRateHeld)
        else r.model_copy(update={"tied_with": None, "tied_count": len(r.tied_with or []) or None})
        for r in summary.recommendations
    ]
    return Summary(
        tolerance=summary.tolerance,
        recommendations=recommendations,
        point_count=len(summary.points or []),
        summary_in=summary_name(experiment),
    )


def config_map(
    experiment: str, namespace: str, uid: str, chunk: int, entries: Iterable[TrialEntry]
) -> Manifest:
    """The chunk's ConfigMap, owned by the experiment, with these entries: created so, or
    merge-patched onto the existing chunk (the keys add to those it has)."""
    keys = {f"{e.name}{SUFFIX}": encode(e.document()) for e in entries}
    return _owned_config_map(chunk_name(experiment, chunk), experiment, namespace, uid, keys)


def summary_config_map(experiment: str, namespace: str, uid: str, summary: Summary) -> Manifest:
    """The ConfigMap holding the experiment's whole summary."""
    keys = {SUMMARY_KEY: encode(summary.document())}
    return _owned_config_map(summary_name(experiment), experiment, namespace, uid, keys)


def _owned_config_map(
    name: str, experiment: str, namespace: str, uid: str, binary: dict[str, str]
) -> Manifest:
    owner = owner_reference(experiment, uid) | {"blockOwnerDeletion": False}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_EXPERIMENT: experiment, LABEL_COMPONENT: COMPONENT_RESULTS},
            "ownerReferences": [owner],
        },
        "binaryData": binary,
    }


def entries_of(config_maps: Iterable[Mapping[str, Any]]) -> dict[str, TrialEntry]:
    """Every full entry in an experiment's chunks, by trial name."""
    found: dict[str, TrialEntry] = {}
    for item in config_maps:
        for key, data in (item.get("binaryData") or {}).items():
            if key.endswith(SUFFIX) and key != SUMMARY_KEY:
                entry = TrialEntry.read(decode(data))
                found[entry.name] = entry
    return found


def summary_of(config_maps: Iterable[Mapping[str, Any]]) -> Summary | None:
    """The whole summary among an experiment's ConfigMaps, if it has one."""
    for item in config_maps:
        data = (item.get("binaryData") or {}).get(SUMMARY_KEY)
        if data:
            return Summary.read(decode(data))
    return None


def with_full_results(
    status: ExperimentStatus, config_maps: Iterable[Mapping[str, Any]]
) -> ExperimentStatus:
    """The status with each compact trial entry replaced by its full one where there is one,
    and the whole summary in place of the compact one (what `cxlab report` and `cxlab
    summary` read, as the local backend writes it)."""
    config_maps = list(config_maps)
    full = entries_of(config_maps)
    restored = status.model_copy(update={"trials": [full.get(e.name, e) for e in status.entries]})
    summary = summary_of(config_maps) if status.summary and status.summary.summary_in else None
    if summary is not None:
        restored.summary = summary
    return restored
