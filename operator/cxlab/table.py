"""The experiment's answer as plain-text tables for a terminal."""

from __future__ import annotations

from typing import Any

from cxlab.summary import spread_cells, workers_label
from cxlab_runner.durations import format_duration


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += [
        "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    return "\n".join(out)


def rtt_cell(rtt_seconds: float | None) -> str:
    """An RTT in a column headed "rtt": the duration, or a dash for cpu and hold."""
    return "—" if rtt_seconds is None else format_duration(rtt_seconds)


def _mib(value: float) -> str:
    return f"{value / 2**20:.1f}"


def points_table(summary: dict[str, Any]) -> str:
    rows = []
    for p in summary["points"]:
        if not p["repetitions"]:
            label = [p["variant"], str(p["workers"]), rtt_cell(p["rttSeconds"]), "0"]
            rows.append([*label, "failed", *[""] * 5, str(p["failedTrials"])])
            continue
        wall, cv = spread_cells(p["wallSeconds"], p["repetitions"], lambda v: f"{v:.3f}")
        efficiency = "" if p["efficiency"] is None else f"{p['efficiency']:.2f}"
        rows.append(
            [
                p["variant"],
                str(p["effectiveWorkers"])
                if p["model"] == "sequential" or p["workers"]
                else "per task",
                rtt_cell(p["rttSeconds"]),
                str(p["repetitions"]),
                wall,
                cv,
                f"{p['cpuPercent']['mean']:.0f}",
                _mib(p["peakRssBytes"]["mean"]),
                efficiency,
                f"{p['contextSwitches']['mean']:.0f}",
                str(p["failedTrials"] + p["tasksFailed"]),
            ]
        )
    headers = [
        "model",
        "workers",
        "rtt",
        "reps",
        "wall s",
        "cv",
        "cpu %",
        "peak MiB",
        "eff",
        "ctx sw",
        "failed",
    ]
    return render_table(headers, rows)


def knees_table(summary: dict[str, Any]) -> str:
    rows = [
        [
            k["variant"],
            rtt_cell(k["rttSeconds"]),
            workers_label(k["model"], k["workers"]),
            f"{k['wallSeconds']:.3f}",
            f"{k['bestWallSeconds']:.3f}",
            f"{k['cpuPercent']:.0f}",
            _mib(k["peakRssBytes"]),
        ]
        for k in summary["knees"]
    ]
    return render_table(["model", "rtt", "knee", "wall s", "best s", "cpu %", "peak MiB"], rows)


def render_summary(document: dict[str, Any]) -> str:
    status = document["status"]
    progress = status["progress"]
    head = (
        f"{document['metadata']['name']}: {status['phase']} — {progress['trialsDone']}/"
        f"{progress['trialsTotal']} trials, {progress['trialsFailed']} failed"
    )
    if status.get("queue"):  # waiting for capacity on a cluster
        head += f"; queued: {status['queue'].get('message', '')}"
    elif status.get("queuedSeconds"):
        head += f"; waited {status['queuedSeconds']:.1f} s in the queue"
    summary = status.get("summary")
    if summary is None:
        return head
    parts = [head, "", points_table(summary), ""]
    if summary["knees"]:
        tolerance = f"{summary['tolerance']:.0%}"
        parts += [
            f"Knees (fewest workers within {tolerance} of each model's best):",
            knees_table(summary),
            "",
        ]
    parts += ["Recommendation:"] + [f"  {r['text']}" for r in summary["recommendations"]]
    failed = [t for t in status["trials"] if t["phase"] == "Failed"]
    if failed:
        parts += ["", "Failed trials:"] + [f"  {t['name']}: {t.get('message', '')}" for t in failed]
    return "\n".join(parts)
