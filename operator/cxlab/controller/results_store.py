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

The status stays the record of what is recorded: a full entry is written to its chunk before
the status write that records its trial, and one in a chunk but not in status is ignored.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cxlab.controller.pods import LABEL_COMPONENT, LABEL_EXPERIMENT

CHUNK_TRIALS = 100
COMPONENT_RESULTS = "results"
SUFFIX = ".json.gz"
# What stays in status of a full entry: everything but the Results, plus headline figures.
FULL_ONLY = ("result", "podResults", "prometheus")

Entry = dict[str, Any]


def results_selector(experiment: str) -> str:
    """The label selector of an experiment's chunks."""
    return f"{LABEL_EXPERIMENT}={experiment},{LABEL_COMPONENT}={COMPONENT_RESULTS}"


def chunk_name(experiment: str, chunk: int) -> str:
    return f"{experiment}-results-{chunk}"


def chunk_of(position: int) -> int:
    """The chunk of the trial at this position of the plan."""
    return position // CHUNK_TRIALS


def compact(entry: Mapping[str, Any], experiment: str, position: int) -> Entry:
    """The status entry of a full one: no Results, the figures a reader of the status wants,
    and where the full entry is."""
    small = {k: v for k, v in entry.items() if k not in FULL_ONLY}
    result = entry.get("result")
    if result:
        small["wallSeconds"] = result["wallSeconds"]
        small["throughputPerSecond"] = result["throughputPerSecond"]
        small["latencyP99Seconds"] = result["latencySeconds"]["p99"]
    if result or entry.get("podResults") or entry.get("prometheus"):
        small["resultsIn"] = chunk_name(experiment, chunk_of(position))
    return small


def encode(entry: Mapping[str, Any]) -> str:
    raw = json.dumps(entry, separators=(",", ":"), sort_keys=True).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode()


def decode(data: str) -> Entry:
    entry: Entry = json.loads(gzip.decompress(base64.b64decode(data)))
    return entry


def config_map(
    experiment: str, namespace: str, uid: str, chunk: int, entries: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The chunk's ConfigMap, owned by the experiment, with these entries: created so, or
    merge-patched onto the existing chunk (the keys add to those it has)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": chunk_name(experiment, chunk),
            "namespace": namespace,
            "labels": {LABEL_EXPERIMENT: experiment, LABEL_COMPONENT: COMPONENT_RESULTS},
            "ownerReferences": [
                {
                    "apiVersion": "cxlab.dev/v1alpha1",
                    "kind": "ConcurrencyExperiment",
                    "name": experiment,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "binaryData": {f"{e['name']}{SUFFIX}": encode(e) for e in entries},
    }


def entries_of(config_maps: Iterable[Mapping[str, Any]]) -> dict[str, Entry]:
    """Every full entry in an experiment's chunks, by trial name."""
    found: dict[str, Entry] = {}
    for item in config_maps:
        for key, data in (item.get("binaryData") or {}).items():
            if key.endswith(SUFFIX):
                entry = decode(data)
                found[entry["name"]] = entry
    return found


def with_full_entries(status: Mapping[str, Any], full: Mapping[str, Entry]) -> dict[str, Any]:
    """The status with each compact trial entry replaced by its full one where there is one
    (what `cxlab report` and `cxlab summary` read, as the local backend writes it)."""
    trials = [full.get(e["name"], e) for e in status.get("trials") or []]
    return {**status, "trials": trials}
