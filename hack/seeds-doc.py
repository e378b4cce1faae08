#!/usr/bin/env python3
"""The seeds' tables, side by side: runs each seed's example (manifests/examples/) on this
machine and writes manifests/examples/seeds.md, where every figure a seed published
(hack/seeds-published.yaml) stands beside cxlab's figure for the same point and its floor.
`make seeds-doc`; `make seeds-doc FROM_RESULTS=1` re-renders from out/<name>/result.json
without running anything.

The reading and rendering are pure (tests/hack/test_seeds_doc.py); running the examples, reading
the results folder and describing the machine are the I/O at the bottom.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import posixpath
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "hack" / "seeds-published.yaml"
DOCUMENT = ROOT / "manifests" / "examples" / "seeds.md"
RESULTS = ROOT / "out"
SCHEMA = "cxlab.dev/seeds-published/v1"

Result = dict[str, Any]
NONE = "—"  # not published, not in this runner's Result, or not a time
TIMES, EN_DASH = "\N{MULTIPLICATION SIGN}", "\N{EN DASH}"


# ---------------------------------------------------------------- cxlab's figures, by field


@dataclass(frozen=True)
class Missing:
    """A Result without the figure, and what its cell says instead: never a 0."""

    text: str


Reading = float | Missing


def _field(*path: str) -> Callable[[Result], Reading]:
    """A Result field (nested by path): absent or null → "—" (a runner that predates it, or a
    model it does not apply to)."""

    def read(result: Result) -> Reading:
        value: Any = result
        for key in path:
            if not isinstance(value, dict) or value.get(key) is None:
                return Missing(NONE)
            value = value[key]
        return float(value)

    return read


def _syscalls(name: str | None) -> Callable[[Result], Reading]:
    """syscalls.total (name None) or one call's count. Null: not asked for; {unavailable}: asked
    for but not allowed here. A call missing from counts that were taken was not made (the
    runner keeps futex whenever it was): that is a real 0."""

    def read(result: Result) -> Reading:
        if "syscalls" not in result:
            return Missing(NONE)
        traced = result["syscalls"]
        if traced is None:
            return Missing("not traced")
        if "unavailable" in traced:
            return Missing(f"unavailable ({traced['unavailable']})")
        if name is None:
            return float(traced["total"])
        return float(traced.get("counts", {}).get(name, 0))

    return read


@dataclass(frozen=True)
class Metric:
    header: str
    kind: str  # seconds, bytes, count, percent, fraction
    read: Callable[[Result], Reading]


METRICS: dict[str, Metric] = {
    "wallSeconds": Metric("wall", "seconds", _field("wallSeconds")),
    "floorSeconds": Metric("floor", "seconds", _field("floorSeconds")),
    "efficiency": Metric("efficiency", "fraction", _field("efficiency")),
    "cpuUserSeconds": Metric("user CPU", "seconds", _field("cpuUserSeconds")),
    "cpuSystemSeconds": Metric("system CPU", "seconds", _field("cpuSystemSeconds")),
    "cpuPercent": Metric("CPU", "percent", _field("cpuPercent")),
    "peakRssBytes": Metric("peak RSS", "bytes", _field("peakRssBytes")),
    "peakVmBytes": Metric("VmPeak", "bytes", _field("peakVmBytes")),
    "workersStarted": Metric("started", "count", _field("workersStarted")),
    "voluntaryContextSwitches": Metric(
        "voluntary switches, process", "count", _field("voluntaryContextSwitches")
    ),
    "involuntaryContextSwitches": Metric(
        "involuntary switches, process", "count", _field("involuntaryContextSwitches")
    ),
    "taskContextSwitches.voluntary": Metric(
        "voluntary switches, task threads", "count", _field("taskContextSwitches", "voluntary")
    ),
    "taskContextSwitches.involuntary": Metric(
        "involuntary switches, task threads",
        "count",
        _field("taskContextSwitches", "involuntary"),
    ),
    "syscalls.total": Metric("system calls", "count", _syscalls(None)),
    "syscalls.futex": Metric("futex calls", "count", _syscalls("futex")),
}


# ---------------------------------------------------------------- numbers as cells


def _significant(value: float, digits: int = 3) -> str:
    """At most `digits` significant digits, never in exponent form: 0.645, 2.55, 25.4, 1,234."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


_BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))


def _scale(kind: str, typical: float) -> tuple[float, str]:
    """Divisor and unit for numbers of this kind around `typical`."""
    if kind == "bytes":
        return next(((d, f" {u}") for d, u in _BYTE_UNITS if abs(typical) >= d), (1, " B"))
    return {"seconds": (1.0, " s"), "percent": (1.0, " %")}.get(kind, (1.0, ""))


def _number(kind: str, value: float, divisor: float) -> str:
    if kind == "count":
        return f"{round(value):,}"
    if kind == "fraction":
        return f"{value:.2f}"
    if kind == "percent":
        return f"{value:.0f}"
    return _significant(value / divisor)


def show(kind: str, value: float) -> str:
    divisor, unit = _scale(kind, value)
    return _number(kind, value, divisor) + unit


@dataclass(frozen=True)
class Figure:
    """cxlab's figure for one point: the median over the repetitions that counted, their
    range, how many; or why there is none."""

    median: float | None = None
    low: float = 0.0
    high: float = 0.0
    n: int = 0
    of: int = 0  # repetitions that counted, some of which may lack the field
    missing: str = NONE

    def cell(self, kind: str) -> str:
        if self.median is None:
            return self.missing
        divisor, unit = _scale(kind, self.median)
        middle = _number(kind, self.median, divisor) + unit
        count = f"n={self.n}" if self.n == self.of else f"n={self.n} of {self.of}"
        if self.n == 1:
            return f"{middle} ({count})"
        low, high = _number(kind, self.low, divisor), _number(kind, self.high, divisor)
        return f"{middle} ({low}{EN_DASH}{high}, {count})"


def aggregate(readings: list[Reading]) -> Figure:
    values = [r for r in readings if isinstance(r, float)]
    if not values:
        reasons = list(dict.fromkeys(r.text for r in readings if isinstance(r, Missing)))
        return Figure(missing="; ".join(reasons) or NONE)
    return Figure(statistics.median(values), min(values), max(values), len(values), len(readings))


# ---------------------------------------------------------------- points: planned and measured


@dataclass(frozen=True)
class Point:
    """One point of an example's matrix, by the fields a published row can match on."""

    experiment: str
    workload: str
    tasks: int
    model: str
    workers: int  # as in the spec: 0 = one per task
    gomaxprocs: int | None  # 0 = Go's default
    rtt: float | None
    hold: float | None
    iterations: int | None

    def matches(self, match: dict[str, Any]) -> bool:
        for key, wanted in match.items():
            have = getattr(self, key)
            if isinstance(wanted, float) or isinstance(have, float):
                if have is None or wanted is None or abs(float(have) - float(wanted)) > 1e-9:
                    return False
            elif have != wanted:
                return False
        return True


MATCH_KEYS = {"experiment", "workload", "tasks", "model", "workers", "gomaxprocs", "rtt"}
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(duration: str) -> float:
    """A Go duration as the spec writes it ("200ms", "1m30s") in seconds."""
    return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(duration))


def _point(
    experiment: str,
    workload: dict[str, Any],
    model: str,
    workers: int,
    gomaxprocs: int | None,
    rtt: float | None,
) -> Point:
    hold = seconds(workload["hold"]) if "hold" in workload else None
    return Point(
        experiment, workload["type"], workload["tasks"], model, workers, gomaxprocs,
        None if rtt is None else round(rtt, 9), None if hold is None else round(hold, 9),
        workload.get("iterations"),
    )  # fmt: skip


def planned_points(experiment: dict[str, Any]) -> list[Point]:
    """The points an experiment document (as in the example file) would run."""
    name, spec = experiment["metadata"]["name"], experiment["spec"]
    workload = spec["workload"]
    rtts: list[float | None] = [seconds(r) for r in workload.get("rtts", [])]
    if "rtt" in workload:
        rtts = [seconds(workload["rtt"])]
    points = []
    for entry in spec["models"]:
        default_gomaxprocs = [0] if entry["model"] == "goroutines" else [None]
        for gomaxprocs in entry.get("gomaxprocs", default_gomaxprocs):
            for workers in entry.get("workers", [0]):
                for rtt in rtts or [None]:
                    points.append(_point(name, workload, entry["model"], workers, gomaxprocs, rtt))
    return points


TRACED_SUFFIX = "-syscalls"


def traced_copy(experiment: dict[str, Any]) -> dict[str, Any]:
    """The experiment again with spec.syscalls (strace -c -f), under a name of its own: the
    seed's syscall counts come from it, its times from the untraced run (strace slows it)."""
    copy: dict[str, Any] = json.loads(json.dumps(experiment))
    copy["metadata"]["name"] += TRACED_SUFFIX
    copy["spec"]["syscalls"] = True
    return copy


def seed_experiments(seed: dict[str, Any], example: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The experiments a seed's tables read: its example's, and their traced copies."""
    traced = [traced_copy(e) for e in example] if seed.get("trace_syscalls") else []
    return [*example, *traced]


@dataclass
class Measured:
    """A point's trials in a results document."""

    results: list[Result] = field(default_factory=list)  # the Results that count
    failed: int = 0
    unpinned: int = 0  # measured off their cores and left out (pinning: required)


def measured_points(document: dict[str, Any]) -> dict[Point, Measured]:
    """A result.json's trials by point: the Results that count as the summary counts them
    (succeeded; pinned, unless the spec says pinning: preferred)."""
    name, spec = document["metadata"]["name"], document["spec"]
    preferred = spec.get("pinning") == "preferred"
    points: dict[Point, Measured] = {}
    for entry in document.get("status", {}).get("trials", []):
        point = _point(
            name, spec["workload"], entry["model"], entry["workers"], entry.get("gomaxprocs"),
            entry.get("rttSeconds"),
        )  # fmt: skip
        measured = points.setdefault(point, Measured())
        if entry["phase"] != "Succeeded" or not entry.get("result"):
            measured.failed += 1
        elif entry.get("pinned") is False and not preferred:
            measured.unpinned += 1
        else:
            measured.results.append(entry["result"])
    return points


# ---------------------------------------------------------------- the published figures


class PublishedError(ValueError):
    """hack/seeds-published.yaml does not say what the generator needs."""


def check_published(published: dict[str, Any]) -> None:
    """Every row well formed: its figures have text; its match names known fields; a ratio
    names two rows of its table; every column's figure and fields exist."""
    if published.get("schema") != SCHEMA:
        raise PublishedError(f"schema is not {SCHEMA}")
    for seed in published["seeds"]:
        # Tables may share rows (a YAML alias): a row's figures are the seed's tables' columns.
        figures = {c["figure"] for table in seed["tables"] for c in table["columns"]}
        for table in seed["tables"]:
            where = f"{seed['seed']}: {table['title']}"
            for column in table["columns"]:
                for name in column["here"]:
                    if name not in METRICS:
                        raise PublishedError(f"{where}: no Result field {name!r}")
            labels = [row["label"] for row in table["rows"]]
            for row in table["rows"]:
                if "ratio" in row:
                    if len(row["ratio"]) != 2 or not set(row["ratio"]) <= set(labels):
                        raise PublishedError(f"{where}: {row['label']}: ratio of unknown rows")
                    continue
                unknown = set(row["match"]) - MATCH_KEYS
                if unknown:
                    raise PublishedError(f"{where}: {row['label']}: cannot match on {unknown}")
                for name, figure in (row.get("published") or {}).items():
                    value = figure.get("value")
                    if (
                        name not in figures
                        or not figure.get("text")
                        or not (value is None or isinstance(value, int | float))
                    ):
                        raise PublishedError(f"{where}: {row['label']}: figure {name!r}")


def seed_floor(conditions: dict[str, Any]) -> float | None:
    """The floor of the seed's own run, ceil(tasks / workers) times the RTT (or hold)."""
    delay = conditions.get("rtt", conditions.get("hold"))
    if delay is None or "tasks" not in conditions:
        return None
    tasks = conditions["tasks"]
    workers = conditions.get("workers") or tasks
    return float(math.ceil(tasks / workers) * delay)


def differences(conditions: dict[str, Any], point: Point) -> list[str]:
    """Where the example's point is not at the seed's scale."""
    found = []
    if "tasks" in conditions and conditions["tasks"] != point.tasks:
        found.append(f"the seed ran {conditions['tasks']:,} tasks, the example {point.tasks:,}")
    if "hold" in conditions and point.hold is not None and conditions["hold"] != point.hold:
        found.append(
            f"the seed held each task {conditions['hold']:g} s, the example {point.hold:g} s"
        )
    if "iterations" in conditions and conditions["iterations"] != point.iterations:
        found.append(f"the seed counted {conditions['iterations']:,} per task")
    return found


# ---------------------------------------------------------------- rendering


@dataclass
class Row:
    """A published row with cxlab's point found for it."""

    spec: dict[str, Any]
    point: Point | None = None
    measured: Measured | None = None
    absent: str = "not in the example"  # the cell when there is no Result: or "not run"

    def figure(self, metric: str) -> Figure:
        if self.measured is None or not self.measured.results:
            return Figure(missing=self.absent)
        return aggregate([METRICS[metric].read(r) for r in self.measured.results])

    def published(self, name: str) -> dict[str, Any] | None:
        figure: dict[str, Any] | None = (self.spec.get("published") or {}).get(name)
        return figure


def find_rows(
    table: dict[str, Any],
    planned: list[Point],
    measured: dict[Point, Measured],
) -> dict[str, Row]:
    rows = {}
    for spec in table["rows"]:
        row = Row(spec)
        if "match" in spec:
            found = [p for p in planned if p.matches(spec["match"])]
            if len(found) > 1:
                raise PublishedError(f"{spec['label']}: matches {len(found)} points of the example")
            if found:
                row.point = found[0]
                row.measured = measured.get(found[0])
                if row.measured is None:
                    row.absent = "not run"
                elif not row.measured.results:
                    row.absent = "failed" if row.measured.failed else "not pinned"
        rows[spec["label"]] = row
    return rows


def _seed_cell(figure: dict[str, Any] | None) -> str:
    """The seed's figure exactly as printed; a sentence from its prose in quotes."""
    if figure is None:
        return NONE
    text = str(figure["text"])
    if figure.get("value") is None and not any(c.isdigit() for c in text):
        return f"“{text}”"
    return text


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return NONE
    if b == 0:
        return f"{NONE} (÷ 0)"
    return f"{_significant(a / b)}{TIMES}"


def _cells_for(
    row: Row, columns: list[dict[str, Any]], seeded: set[str], rows: dict[str, Row]
) -> list[str]:
    """One row's cells after its label, in the order of the table's header."""
    cells: list[str] = []
    for column in columns:
        name = column["figure"]
        if "ratio" in row.spec:
            top, bottom = (rows[label] for label in row.spec["ratio"])
            if name in seeded:
                values = [(r.published(name) or {}).get("value") for r in (top, bottom)]
                seed = _ratio(*values)
                cells.append(seed if seed.startswith(NONE) else f"{seed} †")
            for metric in column["here"]:
                a, b = top.figure(metric), bottom.figure(metric)
                unknown = next((f.missing for f in (a, b) if f.median is None), None)
                cells.append(_ratio(a.median, b.median) if unknown is None else unknown)
            if column.get("floor"):
                cells.append(NONE)
            continue
        if name in seeded:
            published = row.published(name)
            if published is None and column.get("derive") == "efficiency":
                cells.append(_derived_efficiency(row))
            else:
                cells.append(_seed_cell(published))
        for metric in column["here"]:
            cells.append(row.figure(metric).cell(METRICS[metric].kind))
        if column.get("floor"):
            floor = row.figure("floorSeconds")
            cells.append(NONE if floor.median is None else show("seconds", floor.median))
    return cells


def _derived_efficiency(row: Row) -> str:
    wall = row.published("wall")
    floor = seed_floor(row.spec.get("seed") or {})
    if wall is None or wall.get("value") is None or floor is None:
        return NONE
    return f"{floor / wall['value']:.2f} †"


def _notes(row: Row, lifted: set[str], timing: bool) -> str:
    notes = [row.spec["note"]] if row.spec.get("note") else []
    if row.point is not None and "seed" in row.spec:
        notes += [d for d in differences(row.spec["seed"], row.point) if d not in lifted]
    measured = row.measured
    if measured is not None:
        if measured.failed:
            notes.append(f"{measured.failed} trial(s) failed")
        if measured.unpinned:
            notes.append(f"{measured.unpinned} trial(s) not pinned, left out")
        if timing and any((r.get("syscalls") or {}).get("total") for r in measured.results):
            notes.append("timed under strace (spec.syscalls): slower than untraced")
        pools = {str(r["pool"]) for r in measured.results if r.get("pool")}
        started = row.figure("workersStarted")
        workers = 0 if row.point is None else row.point.workers or row.point.tasks
        if timing and pools and started.median is not None and started.median < workers:
            notes.append(
                f"{'/'.join(sorted(pools))} pool: {round(started.median):,} of {workers:,} started"
            )
    return "; ".join(notes)


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: list[str], rows: Iterable[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_escape(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return lines


def render_table(
    table: dict[str, Any], planned: list[Point], measured: dict[Point, Measured]
) -> list[str]:
    rows = find_rows(table, planned, measured)
    columns = table["columns"]
    seeded = {
        c["figure"]
        for c in columns
        if c.get("derive") or any(r.published(c["figure"]) for r in rows.values())
    }
    headers = ["point"]
    for column in columns:
        if column["figure"] in seeded:
            headers.append(f"{column['header']}, seed")
        for metric in column["here"]:
            name = column["header"] if len(column["here"]) == 1 else METRICS[metric].header
            headers.append(f"{name}, here")
        if column.get("floor"):
            headers.append("floor")
    headers.append("note")
    # A difference of scale every matched row shares is said once, under the table.
    per_row = [
        differences(r.spec["seed"], r.point)
        for r in rows.values()
        if r.point is not None and "seed" in r.spec
    ]
    lifted = set.intersection(*(set(d) for d in per_row)) if per_row else set()
    timing = any(c.get("floor") for c in columns)
    body = [
        [row.spec["label"], *_cells_for(row, columns, seeded, rows), _notes(row, lifted, timing)]
        for row in rows.values()
    ]
    lines = [f"### {table['title']}", "", *markdown_table(headers, body)]
    below = [table["note"]] if table.get("note") else []
    if lifted:
        below.append("In every row cxlab ran, " + "; ".join(sorted(lifted)) + ".")
    return lines + (["", *below] if below else [])


def _results_line(name: str, document: dict[str, Any] | None, results_dir: str) -> str:
    if document is None:
        return f"- `{name}`: no results (`{results_dir}/{name}/result.json` is missing)"
    status = document.get("status", {})
    trials = status.get("trials", [])
    runtimes = sorted({t["result"]["runtime"] for t in trials if t.get("result")})
    finished = status.get("completionTime", "not finished")
    return f"- `{name}`: {status.get('phase', '?')}, {len(trials)} trials, finished {finished}" + (
        f" ({', '.join(runtimes)})" if runtimes else ""
    )


LEGEND = f"""\
How to read the tables. *seed*: the figure as the article prints it (its units, its
machine, its run; a quoted sentence where it gave no number). *here*: cxlab on this machine,
the median over the example's repetitions with their range and count, `(0.59{EN_DASH}0.70, n=3)`;
`n=1` is a single run. *floor*: the physical lower bound of the wall time the Result gives,
`ceil(tasks / workers) {TIMES} RTT` (or {TIMES} hold); — where there is none (cpu). † marks a figure
derived from the seed's numbers (a ratio, or its floor ÷ its time), not printed in it.
— in a *here* column: the runner's Result has no such field, or it does not apply (a model
without task threads); *not traced*: syscall counts were not asked for; *unavailable*: asked
for, but the machine would not allow them; *not run*: the example has the point but there
are no results for it; *not in the example*: the example does not run that point (its
comments say how to). Never a 0 for a figure that was not measured."""


def render_document(
    published: dict[str, Any],
    examples: dict[str, list[dict[str, Any]]],
    documents: dict[str, dict[str, Any] | None],
    environment: dict[str, str],
    doc_dir: str = "manifests/examples",
    results_dir: str = "out",
) -> str:
    """The whole document. `examples`: each example file (its path as in the published file)
    → its experiment documents; `documents`: each experiment name → its result.json, or None;
    `environment`: generated, machine, runtimes, commit, how (shown as given)."""
    check_published(published)
    lines = [
        "# The seeds, side by side",
        "",
        "<!-- Generated by hack/seeds-doc.py (make seeds-doc) from hack/seeds-published.yaml",
        "     and the results of each example: edit those, not this file. -->",
        "",
        "cxlab began as four articles that measured concurrency by hand (DESIGN.md's seeds).",
        "Each has an example here; this page puts every figure an article published beside",
        "cxlab's figure for the same point, measured on this machine, and the floor. Where the",
        "example is smaller than the article's run, the note says so.",
        "",
        *markdown_table(["", ""], [[k, v] for k, v in environment.items()]),
        "",
        LEGEND,
        "",
        "Every figure's source (the seed's line, quoted) is in",
        f"[hack/seeds-published.yaml]({posixpath.relpath('hack/seeds-published.yaml', doc_dir)}).",
    ]
    for seed in published["seeds"]:
        example = seed["example"]
        experiments = seed_experiments(seed, examples.get(example, []))
        measured: dict[Point, Measured] = {}
        for experiment in experiments:
            document = documents.get(experiment["metadata"]["name"])
            if document is not None:
                measured |= measured_points(document)
        link = posixpath.relpath(example, doc_dir)
        lines += [
            "",
            f"## {seed['article']}",
            "",
            f"Seed `{seed['seed']}`: {seed['setting']}",
            f"Example: [`{posixpath.basename(example)}`]({link}); results:",
            "",
            *(
                _results_line(
                    e["metadata"]["name"], documents.get(e["metadata"]["name"]), results_dir
                )
                for e in experiments
            ),
        ]
        for table in seed["tables"]:
            traced = bool(table.get("traced"))
            planned = [
                p
                for e in experiments
                if e["metadata"]["name"].endswith(TRACED_SUFFIX) == traced
                for p in planned_points(e)
            ]
            lines += ["", *render_table(table, planned, measured)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- checking the quotes


def check_quotes(published: dict[str, Any], seeds_dir: Path) -> list[str]:
    """Every quote and every figure's text, character for character in its seed (whitespace
    runs aside); every number in a text equal to its value. Problems, one line each."""
    problems = []
    for seed in published["seeds"]:
        text = (seeds_dir / f"{seed['seed']}.txt").read_text()
        flat = " ".join(text.split())
        for table in seed["tables"]:
            for row in table["rows"]:
                where = f"{seed['seed']}: {row['label']}"
                for part in re.split(r" / | \[\.\.\.\] ", row.get("quote", "")):
                    if part and " ".join(part.split()) not in flat:
                        problems.append(f"{where}: quote not in the seed: {part!r}")
                for name, figure in (row.get("published") or {}).items():
                    if figure.get("paraphrase"):
                        continue
                    if " ".join(figure["text"].split()) not in flat:
                        problems.append(f"{where}: {name}: {figure['text']!r} not in the seed")
                    number = _printed_value(figure["text"])
                    value = figure.get("value")
                    if number is not None and value is not None and not _close(number, value):
                        problems.append(f"{where}: {name}: {figure['text']!r} is not {value}")
    return problems


def _printed_value(text: str) -> float | None:
    """The number a seed's figure prints, in base units: "1:40.55" → 100.55, "0m1.988s" →
    1.988, "207 ms" → 0.207, "~82GB" → 82e9; None for prose."""
    if match := re.search(r"(\d+):(\d+(?:\.\d+)?)", text):
        return int(match[1]) * 60 + float(match[2])
    if match := re.search(r"(\d+)m(\d+(?:\.\d+)?)s", text):
        return int(match[1]) * 60 + float(match[2])
    match = re.search(r"(\d+(?:\.\d+)?)\s*(ms|GB|MB)?", text)
    if match is None or "?" in text:
        return None
    scale = {"ms": 1e-3, "GB": 1e9, "MB": 1e6}.get(match[2] or "", 1.0)
    return float(match[1]) * scale


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# ---------------------------------------------------------------- I/O


def load_published(path: Path = PUBLISHED) -> dict[str, Any]:
    published: dict[str, Any] = yaml.safe_load(path.read_text())
    check_published(published)
    return published


def load_example(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def read_results(results: Path, names: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    documents: dict[str, dict[str, Any] | None] = {}
    for name in names:
        path = results / name / "result.json"
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            document = None
        documents[name] = document if isinstance(document, dict) else None
    return documents


def _cxlab(*args: str) -> list[str]:
    return [sys.executable, "-m", "cxlab.cli", *args]


def _environ() -> dict[str, str]:
    """The runners on PATH, as `make` puts them (.venv/bin first: python3 -m cxlab_runner)."""
    paths = [str(ROOT / "build" / "bin"), str(Path(sys.executable).parent)]
    return os.environ | {"PATH": os.pathsep.join([*paths, os.environ.get("PATH", "")])}


def run_example(example: str, traced: list[dict[str, Any]]) -> None:
    """`cxlab run` the example into out/<name>/ (a failed trial is a result too: exit 1), then
    its traced copies, if any, into out/<name>-syscalls/."""
    print(f"seeds-doc: cxlab run {example}", flush=True)
    done = subprocess.run(_cxlab("run", example), cwd=ROOT, env=_environ())
    if done.returncode not in (0, 1):
        raise SystemExit(f"seeds-doc: cxlab run {example} exited {done.returncode}")
    if not traced:
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="seeds-doc-") as copy:
        yaml.safe_dump_all(traced, copy, sort_keys=False)
        copy.flush()
        print(f"seeds-doc: cxlab run {example} with spec.syscalls (strace)", flush=True)
        done = subprocess.run(_cxlab("run", copy.name), cwd=ROOT, env=_environ())
    if done.returncode not in (0, 1):
        print(f"seeds-doc: {example} with spec.syscalls did not run (exit {done.returncode})")


def _output(*command: str) -> str:
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=_environ())
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def describe_environment(documents: dict[str, dict[str, Any] | None], how: str) -> dict[str, str]:
    cpu_model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0))
    machine = f"{os.cpu_count()} CPUs ({usable} usable)" + (f", {cpu_model}" if cpu_model else "")
    runtimes = sorted(
        {
            trial["result"]["runtime"]
            for document in documents.values()
            if document
            for trial in document.get("status", {}).get("trials", [])
            if trial.get("result")
        }
    )
    commit = _output("git", "rev-parse", "--short=12", "HEAD") or "unknown"
    if _output("git", "status", "--porcelain", "--untracked-files=no"):
        commit += " with uncommitted changes"
    go = _output("go", "env", "GOVERSION")
    return {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{machine}; {platform.system()} {platform.release()}",
        "runtimes": ", ".join(runtimes) or "no results",
        "toolchain": f"Python {platform.python_version()}" + (f", {go}" if go else ""),
        "commit": commit,
        "how": how,
        "regenerate": "`make seeds-doc` runs every example (a few minutes on 2 cores); "
        "`make seeds-doc FROM_RESULTS=1` re-renders from out/",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--from-results", action="store_true", help="run nothing: read out/<name>/result.json"
    )
    parser.add_argument(
        "--only", action="append", metavar="SEED", help="run only this seed's example (repeatable)"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder (out/)")
    parser.add_argument("--doc", type=Path, default=DOCUMENT, help="the document to write")
    parser.add_argument(
        "--check-quotes", type=Path, metavar="SEEDS_DIR",
        help="only check every quote and figure against the seeds' texts (DIR/<seed>.txt)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    published = load_published()
    if args.check_quotes:
        problems = check_quotes(published, args.check_quotes)
        print("\n".join(problems) or "every quote and figure is in its seed")
        return 1 if problems else 0
    slugs = [seed["seed"] for seed in published["seeds"]]
    for slug in args.only or []:
        if slug not in slugs:
            parser.error(f"--only {slug}: not one of {', '.join(slugs)}")
    if args.results != RESULTS and not args.from_results:
        parser.error("--results reads another folder: give --from-results too")
    examples = {
        seed["example"]: load_example(ROOT / seed["example"]) for seed in published["seeds"]
    }
    ran = []
    if not args.from_results:
        for seed in published["seeds"]:
            if args.only is None or seed["seed"] in args.only:
                example = examples[seed["example"]]
                traced = seed_experiments(seed, example)[len(example) :]
                run_example(seed["example"], traced)
                ran.append(seed["seed"])
    names = [
        e["metadata"]["name"]
        for seed in published["seeds"]
        for e in seed_experiments(seed, examples[seed["example"]])
    ]
    documents = read_results(args.results, names)
    how = f"ran {', '.join(ran)}; " if ran else ""
    results_dir = os.path.relpath(args.results.resolve(), ROOT)
    how += f"read {results_dir}/<name>/result.json"
    environment = describe_environment(documents, how)
    doc_dir = os.path.relpath(args.doc.resolve().parent, ROOT)
    args.doc.write_text(
        render_document(published, examples, documents, environment, doc_dir, results_dir)
    )
    print(f"seeds-doc: wrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
