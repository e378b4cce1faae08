"""A finished run (a ConcurrencyExperiment document, from the cluster or a local result.json)
as one compact history entry: per point the median of each compared metric and, with
repetitions, every repetition's value (what the regression test needs). Pure; the operator
keeps the entries in the schedule's status, `cxlab history` reads them from a folder."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from cxlab.experiments.plan import plan_trials
from cxlab.experiments.spec import parse_experiment
from cxlab.experiments.status import outcomes_of
from cxlab.experiments.summary import Result, group_points
from cxlab.shape import Shape, optional
from cxlab_contract.durations import format_duration

# Where a run's slot is written on the run itself (the operator sets it when creating it).
SCHEDULED_TIME_ANNOTATION = "cxlab.dev/scheduled-time"
# status.history in all: whatever the template's matrix (up to 1,000 trials), the schedule stays
# far below etcd's 1.5 MiB; a larger matrix keeps fewer entries than historyLimit.
MAX_HISTORY_BYTES = 512 * 1024
# Significant digits kept per value: far finer than any run-to-run noise, and it keeps an
# entry of a 20-point run near 3 KiB (docs/schedules.md).
DIGITS = 5


def _cpu_per_task(result: Result) -> float:
    cpu = float(result["cpuUserSeconds"] + result["cpuSystemSeconds"])
    return cpu / max(int(result["tasks"]), 1)


# The compared metrics, each read from one Result.
METRICS: dict[str, Callable[[Result], float]] = {
    "wallSeconds": lambda r: float(r["wallSeconds"]),
    "throughputPerSecond": lambda r: float(r["throughputPerSecond"]),
    "cpuSecondsPerTask": _cpu_per_task,
    "latencyP99Seconds": lambda r: float(r["latencySeconds"]["p99"]),
    "peakRssBytes": lambda r: float(r["peakRssBytes"]),
}


class HistoryPoint(Shape):
    """One point of a run: medians over its repetitions."""

    point: str
    """The point's key, the same in every run of one template: variant, workers, RTT."""
    model: str
    n: int
    """Repetitions that counted (pinned, no failed trial)."""
    wall_seconds: float = optional()
    throughput_per_second: float = optional()
    cpu_seconds_per_task: float = optional()
    latency_p99_seconds: float = optional()
    peak_rss_bytes: float = optional()
    samples: dict[str, list[float]] = optional()
    """Every repetition's value per metric (only when n > 1): the regression test's input."""


class PlanBrief(Shape):
    """The run's capacity plan in short: Pods needed over time."""

    display: str
    pods: int = optional()
    cores: int = optional()
    variant: str = optional()


class HistoryEntry(Shape):
    """One run of a schedule, compact."""

    run: str
    """The run's (experiment's) name."""
    scheduled_time: datetime = optional()
    finished_time: datetime = optional()
    phase: str
    """Succeeded or Failed (a run whose trials all ended; some may have failed)."""
    message: str = optional()
    points: list[HistoryPoint] = optional()
    plan: PlanBrief = optional()
    regressed: bool = optional()
    """Found regressed against its baseline: kept out of later baselines until acknowledged."""


def _round(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def point_key(variant: str, workers: int, rtt_seconds: float | None, rtt_axis: bool) -> str:
    """e.g. "asyncio w=1000", or "asyncio w=1000 rtt=100ms" when the matrix has several RTTs.
    With one RTT it is left out, so a template edited to another RTT (a backend that got
    slower) compares with the runs before the edit, which is what a regression is."""
    key = f"{variant} w={workers or 'per-task'}"
    if rtt_axis and rtt_seconds is not None:
        key += f" rtt={format_duration(rtt_seconds)}"
    return key


def _points(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    experiment = parse_experiment(dict(document))
    status = document.get("status") or {}
    outcomes = outcomes_of(plan_trials(experiment.spec), status.get("trials") or [])
    rtt_axis = len(experiment.spec.workload.rtt_seconds()) > 1
    points = []
    for group in group_points(outcomes, experiment.spec.pinning):
        trial, results = group.trial, group.results
        point: dict[str, Any] = {
            "point": point_key(trial.variant, trial.workers, trial.rtt_seconds, rtt_axis),
            "model": trial.model,
            "n": len(results),
        }
        if results:
            values = {name: [read(r) for r in results] for name, read in METRICS.items()}
            point |= {name: _round(statistics.median(v)) for name, v in values.items()}
            if len(results) > 1:
                point["samples"] = {name: [_round(x) for x in v] for name, v in values.items()}
        points.append(point)
    return points


def entry_of(document: Mapping[str, Any], scheduled_time: str | None = None) -> dict[str, Any]:
    """The history entry of a finished run; its slot from the run's annotation unless given."""
    metadata, status = document["metadata"], document.get("status") or {}
    annotations = metadata.get("annotations") or {}
    entry: dict[str, Any] = {"run": metadata["name"], "phase": status.get("phase", "Failed")}
    scheduled = scheduled_time or annotations.get(SCHEDULED_TIME_ANNOTATION)
    if scheduled or status.get("startTime"):
        entry["scheduledTime"] = scheduled or status["startTime"]
    if status.get("completionTime"):
        entry["finishedTime"] = status["completionTime"]
    failed = next(
        (
            c
            for c in status.get("conditions") or []
            if c["type"] == "Failed" and c["status"] == "True"
        ),
        None,
    )
    if failed and failed.get("message"):
        entry["message"] = failed["message"][:300]
    if status.get("trials"):
        entry["points"] = _points(document)
    plan = status.get("capacityPlan")
    if plan:
        entry["plan"] = {
            k: plan[k] for k in ("display", "pods", "cores") if plan.get(k) is not None
        } | ({"variant": plan["choice"]} if plan.get("choice") else {})
    return HistoryEntry.model_validate(entry).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )


def newest_succeeded(history: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The newest entry of a succeeded run: what is compared, planned from and shown."""
    return next((e for e in reversed(history) if e["phase"] == "Succeeded"), None)


def appended(
    history: Sequence[Mapping[str, Any]], entry: Mapping[str, Any], limit: int
) -> list[dict[str, Any]]:
    """The history with the entry in its place (by scheduled time, then name): at most
    `limit` entries and MAX_HISTORY_BYTES, the oldest going first. An entry for a run already
    there replaces it, so recording a run twice (a restart between two writes) keeps one.
    Only the newest succeeded entry keeps its repetitions' samples: the regression test reads
    them for the run it judges, and the baseline by the runs' medians."""
    kept = [dict(e) for e in history if e["run"] != entry["run"]] + [dict(entry)]
    kept.sort(key=lambda e: (e.get("scheduledTime") or "", e["run"]))
    newest = (newest_succeeded(kept) or {}).get("run")
    kept = [e if e["run"] == newest else _without_samples(e) for e in kept][-limit:]
    while len(kept) > 1 and len(json.dumps(kept, separators=(",", ":"))) > MAX_HISTORY_BYTES:
        kept.pop(0)
    return kept


def _without_samples(entry: dict[str, Any]) -> dict[str, Any]:
    if not entry.get("points"):
        return entry
    points = [{k: v for k, v in p.items() if k != "samples"} for p in entry["points"]]
    return entry | {"points": points}
