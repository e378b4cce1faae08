"""Full trial entries and the whole summary in ConfigMaps, compact ones in status
(cxlab.experiments.results_store): a thousand trials stay far under etcd's limit on one
object, even as a thousand distinct points."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

from helpers.golden import result
from helpers.specs import document

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.summary import Summary
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.record import Live, build_status, trial_entry
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.results_store import (
    CHUNK_TRIALS,
    chunk_of,
    compact,
    compact_summary,
    config_map,
    entries_of,
    summary_config_map,
    with_full_results,
)
from cxlab.experiments.spec import MAX_TRIALS
from cxlab.experiments.status import ExperimentStatus, TrialEntry

MOMENT = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
ETCD_LIMIT = 1_572_864  # bytes: etcd's default --max-request-bytes, the most one object holds
CONFIG_MAP_LIMIT = 1_048_576


def recorded(entry: TrialEntry) -> TrialEntry:
    """As the operator records it: its attempt and node, not scraped."""
    return entry.model_copy(update={"attempts": 1, "node": "node-1", "metrics_scraped": False})


def documents(entries: list[TrialEntry]) -> list[dict[str, Any]]:
    return [e.document() for e in entries]


def thousand_trials(**change: Any) -> tuple[Any, list[Any], list[TrialEntry]]:
    workers = list(range(1, 26))
    body = document(models=[{"model": "asyncio", "workers": workers, **change}],
                    workload={"type": "sleep", "tasks": 64, "rtts": ["1ms", "2ms", "5ms", "10ms"]},
                    repetitions=10)  # fmt: skip
    spec = parse_experiment(body).spec
    trials = plan_trials(spec)
    entries = []
    for trial in trials:
        entries.append(recorded(trial_entry(TrialOutcome(trial, result(trial)))))
    return spec, trials, entries


def distinct_points() -> tuple[Any, list[Any], list[TrialEntry]]:
    """A thousand trials, each its own point (5 models x 25 worker counts x 8 RTTs, one
    repetition), each with its own figures: the largest summary 1,000 trials can have."""
    models = ["asyncio", "threads", "gevent", "processes", "goroutines"]
    rtts = ["1ms", "2ms", "5ms", "10ms", "20ms", "50ms", "100ms", "200ms"]
    body = document(models=[{"model": m, "workers": list(range(1, 26))} for m in models],
                    workload={"type": "sleep", "tasks": 64, "rtts": rtts})  # fmt: skip
    spec = parse_experiment(body).spec
    trials = plan_trials(spec)
    draw = random.Random(14)
    entries = []
    for trial in trials:
        figures = result(trial)
        for key in ("wallSeconds", "cpuUserSeconds", "peakRssBytes", "throughputPerSecond"):
            figures[key] = round(figures[key] * draw.uniform(0.5, 2), 6)
        entries.append(recorded(trial_entry(TrialOutcome(trial, figures))))
    return spec, trials, entries


def full_status(spec: Any, trials: list[Any], entries: list[TrialEntry]) -> ExperimentStatus:
    return build_status(spec=spec, trials=trials, entries=entries, live=Live(), old=None,
                        started_spec="{}", generation=1, now=MOMENT)  # fmt: skip


def status_of(spec: Any, trials: list[Any], entries: list[TrialEntry]) -> ExperimentStatus:
    """The status as the operator writes it: compact entries and summary."""
    status = full_status(spec, trials, entries)
    status.trials = [compact(e, "exp", i) for i, e in enumerate(status.entries)]
    assert status.summary is not None
    status.summary = compact_summary(status.summary, "exp")
    return ExperimentStatus.read(status.document())  # what the apiserver keeps


def test_a_thousand_trials_keep_the_status_far_under_etcds_limit() -> None:
    spec, trials, entries = thousand_trials()
    assert len(trials) == MAX_TRIALS == 1000
    size = len(json.dumps(status_of(spec, trials, entries).document()))
    inline = len(json.dumps(documents(entries)))
    print(f"\nstatus at {len(trials)} trials: {size / 1024:.0f} KiB compact "
          f"(the entries alone inline: {inline / 1024:.0f} KiB)")  # fmt: skip
    assert size < ETCD_LIMIT / 2, size
    # inline, the entries alone would be near the limit, with the golden Result's short
    # timelines (a runner's has up to 64 RSS samples)
    assert inline > 2.5 * size


def test_each_chunk_holds_its_hundred_trials_far_under_a_config_maps_limit() -> None:
    _, _, entries = thousand_trials()
    chunks: dict[int, list[TrialEntry]] = {}
    for position, entry in enumerate(entries):
        chunks.setdefault(chunk_of(position), []).append(entry)
    assert sorted(chunks) == list(range(10)) and len(chunks[0]) == CHUNK_TRIALS
    manifests = [config_map("exp", "lab", "u-1", k, mine) for k, mine in chunks.items()]
    biggest = max(len(json.dumps(m)) for m in manifests)
    print(f"\nlargest chunk of {CHUNK_TRIALS} trials: {biggest / 1024:.0f} KiB")
    assert biggest < CONFIG_MAP_LIMIT / 4
    assert manifests[3]["metadata"]["name"] == "exp-results-3"
    assert manifests[3]["metadata"]["ownerReferences"][0]["uid"] == "u-1"  # goes with it


def test_the_full_entries_come_back_whole_in_place_of_the_compact_ones() -> None:
    spec, trials, typed = thousand_trials()
    entries = documents(typed)
    compacted = status_of(spec, trials, typed)
    status = compacted.document()
    small = status["trials"][150]
    assert "result" not in small and small["resultsIn"] == "exp-results-1"
    assert small["latencyP99Seconds"] == entries[150]["result"]["latencySeconds"]["p99"]
    chunks = [config_map("exp", "lab", "u-1", 1, typed[100:200])]
    restored = with_full_results(compacted, chunks).document()["trials"]
    assert restored[150] == entries[150]
    assert restored[50] == status["trials"][50]  # its chunk was not read: left compact


def test_a_failed_trial_without_a_result_stays_whole_in_status() -> None:
    _, trials, _ = thousand_trials()
    failed = trial_entry(TrialOutcome(trials[0], None, "runner exited 1: boom"))
    assert compact(failed, "exp", 0) == failed  # nothing to move out, nothing to point at


def test_a_thousand_distinct_points_keep_the_status_far_under_etcds_limit() -> None:
    spec, trials, entries = distinct_points()
    whole = full_status(spec, trials, entries).document()
    assert len(trials) == len(whole["summary"]["points"]) == MAX_TRIALS
    size = len(json.dumps(status_of(spec, trials, entries).document()))
    summary = summary_config_map("exp", "lab", "u-1", Summary.read(whole["summary"]))
    stored = len(json.dumps(summary))
    inline = len(json.dumps(whole["summary"]))
    print(f"\n{len(trials)} distinct points: status {size / 1024:.0f} KiB, the whole summary "
          f"{inline / 1024:.0f} KiB inline, its ConfigMap {stored / 1024:.0f} KiB")  # fmt: skip
    assert size < ETCD_LIMIT / 2, size
    assert stored < CONFIG_MAP_LIMIT / 2, stored
    assert inline > ETCD_LIMIT / 2  # inline, the summary alone would be past the goal


def test_the_whole_summary_comes_back_in_place_of_the_compact_one() -> None:
    spec, trials, typed = distinct_points()
    entries = documents(typed)
    whole = full_status(spec, trials, typed).document()["summary"]
    compacted = status_of(spec, trials, typed)
    small = compacted.document()["summary"]
    assert small["summaryIn"] == "exp-summary" and small["pointCount"] == 1000
    assert "points" not in small and "knees" not in small
    first, short = whole["recommendations"][0], small["recommendations"][0]
    assert short == {k: v for k, v in first.items() if k != "tiedWith"} | (
        {"tiedCount": len(first["tiedWith"])} if first["tiedWith"] else {}
    )
    maps = [config_map("exp", "lab", "u-1", 0, typed[:100]),
            summary_config_map("exp", "lab", "u-1", Summary.read(whole))]  # fmt: skip
    restored = with_full_results(compacted, maps).document()
    assert restored["summary"] == whole
    assert restored["trials"][5] == entries[5]  # the summary is no trial entry
    assert len(entries_of(maps)) == 100
    # not found: as stored
    assert with_full_results(compacted, maps[:1]).document()["summary"] == small
