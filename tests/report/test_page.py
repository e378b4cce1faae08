"""The HTML report: rendered from realistic documents built with the real planner and status
code, parsed back, and checked chart by chart."""

from __future__ import annotations

import copy
import itertools
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from helpers.report_dom import charts, column, coordinates, parse, plot_area, rows, series_of

from cxlab.analysis.objectives import skipped_trials
from cxlab.analysis.outcome import TrialOutcome, parse_result
from cxlab.analysis.point import Point as SummaryPoint
from cxlab.experiments.plan import Trial, floor_seconds, plan_trials
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab.local.backend import local_status
from cxlab.report import render_report
from cxlab.report.rates import rate_points_table
from cxlab.report.svg import (
    Axis,
    Point,
    Series,
    format_count,
    format_mib,
    format_seconds,
    line_chart,
    linear_ticks,
    log_ticks,
)
from cxlab_contract import histogram
from cxlab_contract.durations import parse_duration

MIB = 2**20

SLEEP_SPEC: dict[str, Any] = {
    "workload": {"type": "sleep", "tasks": 1000, "rtts": ["50ms", "200ms"]},
    "models": [
        {"model": "sequential"},
        {"model": "threads", "workers": [10, 100, 1000]},
        {"model": "gevent", "workers": [0]},
        {"model": "goroutines", "workers": [0], "gomaxprocs": [1, 0]},
    ],
    "repetitions": 3,
    "resources": {"cpu": 2, "memory": "1Gi"},
    "tolerance": 0.1,
}
SLEEP_VARIANTS = 5  # sequential, threads, gevent, goroutines (GOMAXPROCS 1 and default)

CPU_SPEC: dict[str, Any] = {
    "workload": {"type": "cpu", "tasks": 8, "iterations": 1_000_000},
    "models": [
        {"model": "sequential"},
        {"model": "threads", "workers": [1, 4]},
        {"model": "processes", "workers": [4]},
    ],
    "repetitions": 2,
}

# Per model: wall-time overhead per worker (s), RSS per worker (bytes), baseline RSS.
COSTS = {
    "sequential": (0.0, 0, 18 * MIB),
    "threads": (60e-6, 96 * 1024, 20 * MIB),
    "processes": (4e-3, 12 * MIB, 20 * MIB),
    "gevent": (12e-6, 9 * 1024, 26 * MIB),
    "asyncio": (10e-6, 4 * 1024, 22 * MIB),
    "goroutines": (1e-6, 3 * 1024, 6 * MIB),
}


NOW = datetime(2026, 11, 21, 4, 50, tzinfo=UTC)


def fake_result(spec: ExperimentSpec, trial: Trial) -> dict[str, Any]:
    """A schema-valid Result shaped like a real run: near the floor, memory per worker."""
    tasks = spec.workload.tasks
    workers = 1 if trial.model == "sequential" else (trial.workers or tasks)
    per_worker_seconds, per_worker_bytes, baseline = COSTS[trial.model]
    jitter = 1 + 0.03 * (trial.repetition - 2)  # repetitions differ: a visible stddev
    floor = floor_seconds(spec, trial)
    busy = 0.4 * tasks / min(workers, 2) if floor is None else floor
    wall = (busy + per_worker_seconds * workers) * jitter
    cpu = 0.05 + per_worker_seconds * workers * 2 + (busy if floor is None else 0.0)
    peak = baseline + per_worker_bytes * workers
    samples = 16
    timeline = [baseline + (peak - baseline) * min(1.0, 3 * i / samples) for i in range(samples)]
    result = {
        "schema": "cxlab.dev/result/v1",
        "experiment": "sweep",
        "trial": trial.name,
        "model": trial.model,
        "workload": spec.workload.type,
        "workers": workers,
        "pool": "onDemand" if trial.model == "threads" else None,
        "workersStarted": workers,
        "gomaxprocs": (trial.gomaxprocs or 8) if trial.model == "goroutines" else None,
        "tasks": tasks,
        "rttSeconds": trial.rtt_seconds,
        "iterations": spec.workload.iterations,
        "holdSeconds": parse_duration(spec.workload.hold) if spec.workload.hold else None,
        "tasksOk": tasks,
        "tasksFailed": 0,
        "wallSeconds": round(wall, 6),
        "floorSeconds": floor,
        "efficiency": None if floor is None else round(floor / wall, 4),
        "cpuUserSeconds": round(cpu * 0.8, 6),
        "cpuSystemSeconds": round(cpu * 0.2, 6),
        "cpuPercent": round(100 * cpu / wall, 2),
        "peakRssBytes": int(peak),
        "peakVmBytes": int(peak) * 8,
        "baselineRssBytes": baseline,
        "peakThreads": workers + 1 if trial.model == "threads" else 2,
        "voluntaryContextSwitches": 10 * workers,
        "involuntaryContextSwitches": workers,
        "taskContextSwitches": None
        if trial.model == "goroutines"
        else {"voluntary": 9 * workers, "involuntary": workers},
        "syscalls": None,
        "throughputPerSecond": round(tasks / wall, 3),
        "latencySeconds": {"p50": wall / 2, "p90": wall * 0.9, "p99": wall, "max": wall},
        "rssTimeline": {"intervalSeconds": wall / samples, "rssBytes": [int(b) for b in timeline]},
        "cpus": [0, 1],
        "runtime": "go1.26.8" if trial.model == "goroutines" else "CPython 3.11.9",
        "errors": [],
        "pods": 1,
        "podIndex": 0,
        "startedAtUnixSeconds": 1795000000.0,
        "barrierWaitSeconds": None,
        "startSkewSeconds": None,
        "locustWorkers": None,
        "durationSeconds": None,
        "arrival": None,
        "timeline": None,
        "warmup": None,
        "latencyHistogram": histogram.build([wall / 2, wall * 0.9, wall]),
    }
    return parse_result(json.dumps(result))  # the real schema check: the fake stays honest


def build_document(
    spec_dict: dict[str, Any], *, fail: str | None = None, done: int | None = None
) -> dict[str, Any]:
    """The local backend's document: spec plus the status of the first `done` trials, with the
    trial named `fail` failed (no Result, a message) and those abortOnFail skips skipped."""
    experiment = parse_experiment(
        {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
         "metadata": {"name": "sweep"}, "spec": spec_dict}
    )  # fmt: skip
    spec = experiment.spec
    trials = plan_trials(spec)
    outcomes: list[TrialOutcome] = []
    for t in trials[:done]:
        skipped = skipped_trials(spec, trials, outcomes).get(t.name)  # before each, as the backend
        if skipped:
            outcomes.append(TrialOutcome(t, None, skipped=skipped))
        elif t.name == fail:
            outcomes.append(TrialOutcome(t, None, "runner killed: OOMKilled <exit 137>"))
        else:
            outcomes.append(TrialOutcome(t, fake_result(spec, t)))
    return {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "sweep", "creationTimestamp": "2026-11-21T04:50:00Z"},
        "spec": spec_dict,
        "status": local_status(experiment, trials, outcomes, set(), None, NOW).document(),
    }


FAILED_TRIAL = "024-threads-w1000-rtt200ms-r2"


@pytest.fixture(scope="module")
def sleep_document() -> dict[str, Any]:
    document = build_document(SLEEP_SPEC, fail=FAILED_TRIAL)
    names = [t["name"] for t in document["status"]["trials"]]
    assert FAILED_TRIAL in names  # the plan's naming is what the fixture relies on
    return document


# --- the report of a full sweep -------------------------------------------------------------


def test_report_is_one_self_contained_page(sleep_document: dict[str, Any]) -> None:
    html = render_report(sleep_document)
    root = parse(html)
    assert html.startswith("<!DOCTYPE html>")
    assert not root.find_all("script") and not root.find_all("link") and not root.find_all("img")
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert render_report(sleep_document) == html  # deterministic


def test_four_charts_per_rtt(sleep_document: dict[str, Any]) -> None:
    found = charts(parse(render_report(sleep_document)))
    expected = [
        f"{kind} · RTT {rtt}"
        for rtt in ("50ms", "200ms")
        for kind in (
            "Wall time vs workers",
            "CPU vs workers",
            "Peak memory vs workers",
            "Memory over time",
        )
    ]
    assert list(found) == expected


def test_each_chart_has_a_series_per_variant(sleep_document: dict[str, Any]) -> None:
    found = charts(parse(render_report(sleep_document)))
    for rtt in ("50ms", "200ms"):
        wall = series_of(found[f"Wall time vs workers · RTT {rtt}"])
        assert len(wall) == SLEEP_VARIANTS + 1  # and the floor
        assert wall[-1].attrs["data-label"].startswith("floor")
        assert wall[-1].find_all("polyline")[0].attrs["stroke-dasharray"]
        assert len(series_of(found[f"CPU vs workers · RTT {rtt}"])) == SLEEP_VARIANTS
        assert len(series_of(found[f"Peak memory vs workers · RTT {rtt}"])) == SLEEP_VARIANTS
        timelines = series_of(found[f"Memory over time · RTT {rtt}"])
        # every variant's knee, then threads' most-workers point when it is not the knee
        assert SLEEP_VARIANTS <= len(timelines) <= 8
        assert all(len(s.find_all("polyline")) == 1 for s in timelines)
        # sequential takes 1000 RTTs, goroutines one: x is the share of each run
        assert "share of the trial's wall time" in found[f"Memory over time · RTT {rtt}"].all_text()


def test_threads_line_has_three_points_with_error_bars(sleep_document: dict[str, Any]) -> None:
    found = charts(parse(render_report(sleep_document)))
    threads = next(
        s
        for s in series_of(found["Wall time vs workers · RTT 50ms"])
        if s.attrs["data-label"] == "threads"
    )
    assert len(threads.find_all("path", "marker")) == 3
    assert len(threads.find_all("path", "error-bar")) == 3


def test_single_worker_count_variants_are_drawn_as_markers(
    sleep_document: dict[str, Any],
) -> None:
    found = charts(parse(render_report(sleep_document)))
    for series in series_of(found["CPU vs workers · RTT 200ms"]):
        if series.attrs["data-label"] != "threads":
            assert not series.find_all("polyline")
            assert len(series.find_all("path", "marker")) == 1


def test_every_coordinate_is_inside_the_plot_area(sleep_document: dict[str, Any]) -> None:
    for title, chart in charts(parse(render_report(sleep_document))).items():
        left, top, right, bottom = plot_area(chart)
        for series in series_of(chart):
            points = coordinates(series)
            assert points, f"{title}: {series.attrs['data-label']} draws nothing"
            for x, y in points:
                assert left <= x <= right and top <= y <= bottom, (title, x, y)


def test_log_axes_are_labelled_in_decades(sleep_document: dict[str, Any]) -> None:
    found = charts(parse(render_report(sleep_document)))
    labels = [t.text for t in found["Wall time vs workers · RTT 50ms"].find_all("text")]
    # workers run from 1 (sequential) to 1000 (threads, one per task)
    assert {"1", "10", "100", "1k"} <= set(labels)
    # sequential takes 1000 x 50ms = 50 s; goroutines take about one RTT
    assert {"100 ms", "1 s", "10 s"} <= set(labels)


def test_answer_and_tables(sleep_document: dict[str, Any]) -> None:
    root = parse(render_report(sleep_document))
    recommendations = root.find_all("ul", "recommendations")[0].find_all("li")
    assert len(recommendations) == 2
    assert recommendations[0].text.startswith("RTT 50ms: ")
    headings = [h.text for h in root.find_all("h2")]
    assert headings == [
        "Recommendation", "Knees", "RTT 50ms", "RTT 200ms", "Points", "Failed trials",
    ]  # fmt: skip
    tables = root.find_all("table")
    knees, points, failed = (t.find_all("tbody")[0].find_all("tr") for t in tables)
    assert len(knees) == 2 * SLEEP_VARIANTS
    assert len(points) == 2 * (SLEEP_VARIANTS + 2)  # threads has three worker counts
    assert len(failed) == 1
    assert failed[0].find_all("td")[0].text == FAILED_TRIAL
    assert "OOMKilled <exit 137>" in failed[0].all_text()
    intervals = column(tables[1], "95% CI")
    # three repetitions give an interval; the point of the failed trial has two, and says so
    assert sorted(c if c == "n=2" else c[0] for c in intervals) == ["["] * 13 + ["n=2"]
    assert any("recommended" in row.all_text() for row in points)


def test_header_describes_the_experiment(sleep_document: dict[str, Any]) -> None:
    root = parse(render_report(sleep_document))
    header = root.find_all("header")[0].all_text()
    assert "sweep" in header and "Failed" in header  # one trial failed: the phase says so
    assert "42 of 42 trials done, 1 failed" in header
    assert "sleep: 1,000 tasks, each sleeps one RTT (50ms, 200ms)" in header
    assert "goroutines (one worker per task; GOMAXPROCS 1, default)" in header
    assert "2 CPU, 1Gi" in header and "2026-11-21T04:50:00Z" in header
    assert "CPython 3.11.9, go1.26.8" in header


def test_text_is_escaped(sleep_document: dict[str, Any]) -> None:
    document = copy.deepcopy(sleep_document)
    for entry in document["status"]["summary"]["points"]:
        if entry["variant"] == "gevent":
            entry["variant"] = "gevent <b>&</b>"
    document["metadata"]["name"] = "<script>alert(1)</script>"
    html = render_report(document)
    assert "<b>" not in html and "<script>" not in html
    assert "gevent &lt;b&gt;&amp;&lt;/b&gt;" in html
    root = parse(html)
    labels = [s.attrs["data-label"] for s in series_of(charts(root)["CPU vs workers · RTT 50ms"])]
    assert "gevent <b>&</b>" in labels  # escaped in the file, the same text once parsed


# --- unfinished and unusual documents ------------------------------------------------------


def test_a_running_experiment_shows_what_is_done() -> None:
    document = build_document(SLEEP_SPEC, done=25)
    assert "summary" not in document["status"]
    root = parse(render_report(document))
    assert "running" in root.find_all("section")[0].all_text()
    assert "25 of 42 trials done" in root.find_all("header")[0].all_text()
    found = charts(root)
    # 25 trials: the first repetition of both RTTs (14 trials) and eleven of the second
    assert len(found) == 8
    assert len(series_of(found["Wall time vs workers · RTT 200ms"])) == SLEEP_VARIANTS + 1
    assert not root.find_all("ul", "recommendations")


def test_a_pending_experiment_without_status_renders() -> None:
    document = {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "fresh"},
        "spec": SLEEP_SPEC,
    }
    root = parse(render_report(document))
    assert "Pending" in root.find_all("h1")[0].all_text()
    assert not root.find_all("svg")


def test_the_cpu_workload_renders_without_rtt() -> None:
    root = parse(render_report(build_document(CPU_SPEC)))
    found = charts(root)
    assert list(found) == [
        "Wall time vs workers",
        "CPU vs workers",
        "Peak memory vs workers",
        "Memory over time",
    ]
    wall = series_of(found["Wall time vs workers"])
    assert [s.attrs["data-label"] for s in wall] == ["sequential", "threads", "processes"]
    assert all(len(s.find_all("path", "marker")) >= 1 for s in wall)  # no floor for cpu
    timeline = found["Memory over time"].all_text()
    assert "time since the tasks started" in timeline  # runs of 1.6 s and 3.2 s: seconds
    assert set(column(root.find_all("table")[-1], "Efficiency")) == {"—"}  # needs a floor


def test_the_hold_workload_has_a_floor_of_waves_of_holds() -> None:
    spec = {
        "workload": {"type": "hold", "tasks": 100, "hold": "1s"},
        "models": [{"model": "threads", "workers": [10, 100]}, {"model": "asyncio"}],
    }
    found = charts(parse(render_report(build_document(spec))))
    wall = series_of(found["Wall time vs workers"])
    assert [s.attrs["data-label"] for s in wall] == [
        "threads", "asyncio", "floor: ⌈tasks / workers⌉ \u00d7 hold",
    ]  # fmt: skip


def test_a_chart_of_single_points_at_one_x_renders() -> None:
    series = [
        Series("a", (Point(8, 1.0, 0.1),), "#000"),
        Series("b", (Point(8, 2.0),), "#111", shape="square"),
    ]
    root = parse(line_chart("t", Axis("x", "log"), Axis("y", "log"), series))
    chart = root.find_all("svg")[0]
    left, top, right, bottom = plot_area(chart)
    for s in series_of(chart):
        ((x, y),) = coordinates(s)
        assert left < x < right and top < y < bottom


def test_markers_only_series_draw_no_line_in_the_plot_or_the_legend() -> None:
    points = (Point(1, 1.0), Point(2, 2.0), Point(3, 1.5))
    series = [
        Series("curve", points, "#000", markers=False),
        Series("hollow", points, "#111", joined=False, hollow=True),
        Series("crossed", points, "#222", "cross", joined=False),
    ]
    chart = parse(line_chart("t", Axis("x"), Axis("y"), series)).find_all("svg")[0]
    curve, hollow, crossed = series_of(chart)
    assert len(curve.find_all("polyline")) == 1 and not curve.find_all("path", "marker")
    for drawn, fill in ((hollow, "#fff"), (crossed, "none")):
        assert not drawn.find_all("polyline")
        assert [m.attrs["fill"] for m in drawn.find_all("path", "marker")] == [fill] * 3
    legend = chart.find_all("g", "legend")[0]
    assert [line.attrs["stroke"] for line in legend.find_all("line")] == ["#000"]
    assert [m.attrs["fill"] for m in legend.find_all("path", "marker")] == ["#fff", "none"]


def test_an_empty_chart_says_so() -> None:
    html = line_chart("empty", Axis("x"), Axis("y"), [])
    assert "no data yet" in html
    parse(html)


# --- ticks and labels ----------------------------------------------------------------------


def test_log_ticks() -> None:
    assert log_ticks(1, 10_000) == [1, 10, 100, 1000, 10_000]
    assert log_ticks(0.05, 50) == [0.1, 1, 10]
    # under three decades: 1-2-5 steps
    assert log_ticks(0.05, 2) == [0.05, 0.1, 0.2, 0.5, 1, 2]
    assert log_ticks(20, 500) == [20, 50, 100, 200, 500]
    # many decades: every other one, still starting at the first
    assert log_ticks(1e-6, 1e6) == [1e-6, 1e-4, 1e-2, 1, 1e2, 1e4, 1e6]


def test_linear_ticks() -> None:
    assert linear_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert linear_ticks(0, 0.3) == [0, 0.1, 0.2, 0.3]
    assert linear_ticks(0, 0.25) == [0, 0.05, 0.1, 0.15, 0.2, 0.25]  # no 0.15000000000000002
    assert linear_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1]


def test_tick_labels() -> None:
    assert [format_count(v) for v in (1, 10, 100, 1000, 10_000, 1500, 2e6)] == [
        "1", "10", "100", "1k", "10k", "1.5k", "2M",
    ]  # fmt: skip
    assert [format_seconds(v) for v in (0.05, 1, 1.5, 2e-4, 0.99999, 0)] == [
        "50 ms", "1 s", "1.5 s", "200 µs", "1 s", "0 s",
    ]  # fmt: skip
    assert format_mib(512) == "512 MiB"
    assert format_mib(0.5) == "0.5 MiB"


def test_floor_line_follows_the_tasks() -> None:
    document = build_document(SLEEP_SPEC)
    chart = charts(parse(render_report(document)))["Wall time vs workers · RTT 200ms"]
    floor = series_of(chart)[-1].find_all("polyline")[0].attrs["points"].split()
    # workers 1, 10, 100, 1000 → floors 200 s, 20 s, 2 s, 0.2 s: equal steps on a log axis
    ys = [float(p.split(",")[1]) for p in floor]
    steps = [b - a for a, b in itertools.pairwise(ys)]
    assert len(ys) == 4
    assert all(math.isclose(s, steps[0], abs_tol=0.2) for s in steps)


# --- objectives -------------------------------------------------------------------------------

# fake_result's p99 is the wall time: with one worker 3.2 s (x 0.97 and x 1 over the two
# repetitions), with 4 or 16 about 1.6 s.
GATED_SPEC: dict[str, Any] = {
    "workload": {"type": "cpu", "tasks": 8, "iterations": 1_000_000},
    "models": [{"model": "threads", "workers": [1, 4, 16]}],
    "repetitions": 2,
}
P99_UNDER_2S = {"name": "p99-fast", "latency": {"max": "2s"}, "abortOnFail": True}
PEAK_RSS = {"peakRss": {"max": "1Gi"}}
# 4 workers' two p99s, 1.552 s and 1.6 s: their interval straddles 1.6 s
P99_NEAR = {"name": "p99-near", "latency": {"max": "1600ms"}, "workers": [4]}


def gated_document(*objectives: dict[str, Any], done: int | None = None) -> dict[str, Any]:
    return build_document({**GATED_SPEC, "objectives": list(objectives)}, done=done)


def test_a_broken_objective_is_a_banner_on_top_and_a_table_of_its_points() -> None:
    document = gated_document(P99_UNDER_2S, PEAK_RSS)
    judged = document["status"]["objectives"]
    root = parse(render_report(document))
    (banner,) = root.find_all("div", "verdict")
    assert "broken" in banner.attrs["class"].split()
    assert banner.find_all("strong")[0].text == "Objectives broken"
    assert [li.text for li in banner.find_all("li")] == [o["message"] for o in judged]
    # near the top: right under the header, before the recommendation
    main = root.find_all("main")[0].children
    assert [n.tag for n in main[:3]] == ["header", "div", "section"]
    (section,) = [s for s in root.find_all("section") if s.attrs.get("id") == "objectives"]
    titles = [h.all_text() for h in section.find_all("h3")]
    # peak RSS holds where measured, but 4 and 16 workers ran one repetition of the two asked
    # for (p99-fast's abort skipped the second): one value of two decides nothing
    assert titles == ["p99-fast Broken", "peak RSS ≤ 1024 MiB Inconclusive"]
    p99, rss = section.find_all("table")
    assert [th.text for th in p99.find_all("th")] == [
        "Configuration", "Reps", "Mean [95% CI]", "Bound", "Verdict", "Reps needed",
    ]  # fmt: skip
    # broken first; the skipped repetitions leave 4 and 16 workers one value each
    assert rows(p99) == [
        ["threads, 1 worker", "2", "3.15s [2.54s, 3.76s]", "≤ 2s", "Broken", "—"],
        [
            "threads, 4 workers",
            "1",
            "1.55s (n=1, no interval)",
            "≤ 2s",
            "Inconclusive",
            "2 or more",
        ],
        [
            "threads, 16 workers",
            "1",
            "1.55s (n=1, no interval)",
            "≤ 2s",
            "Inconclusive",
            "2 or more",
        ],
    ]
    assert [r[4] for r in rows(rss)] == ["Inconclusive", "Inconclusive", "Met"]
    assert "2 trial(s) skipped (abortOnFail)" in section.all_text()


def test_an_inconclusive_point_says_how_many_repetitions_would_decide() -> None:
    document = gated_document(P99_NEAR, PEAK_RSS)
    (near, _) = document["status"]["objectives"]
    (point,) = near["points"]
    assert point["verdict"] == "Inconclusive" and point["repetitionsNeeded"] > 2
    root = parse(render_report(document))
    (banner,) = root.find_all("div", "verdict")
    assert "inconclusive" in banner.attrs["class"].split()
    assert banner.find_all("strong")[0].text == "Objectives inconclusive"
    table = root.find_all("section")[1].find_all("table")[0]
    ((configuration, reps, figure, _, verdict, needed),) = rows(table)
    assert (configuration, reps, verdict) == ("threads, 4 workers", "2", "Inconclusive")
    assert figure.startswith("1.58s [") and needed == f"{point['repetitionsNeeded']:,}"


def test_objectives_met_and_objectives_not_judged_yet() -> None:
    met = parse(render_report(gated_document(PEAK_RSS)))
    (banner,) = met.find_all("div", "verdict")
    assert banner.attrs["class"] == "verdict met"
    running = parse(render_report(gated_document(PEAK_RSS, done=2)))
    (banner,) = running.find_all("div", "verdict")
    assert "Not judged yet" in banner.all_text()
    assert not [s for s in running.find_all("section") if s.attrs.get("id") == "objectives"]


def test_a_report_without_objectives_has_no_banner(sleep_document: dict[str, Any]) -> None:
    root = parse(render_report(sleep_document))
    assert not root.find_all("div", "verdict")
    shown = root.find_all("main")[0].all_text()
    assert "Objectives" not in shown and "skipped" not in shown


def test_skipped_trials_are_shown_as_skipped_not_failed() -> None:
    document = gated_document(P99_UNDER_2S)
    entries = document["status"]["trials"]
    skipped = [e for e in entries if e["phase"] == "Skipped"]
    assert [e["name"] for e in skipped] == ["004-threads-w4-r2", "005-threads-w16-r2"]
    root = parse(render_report(document))
    assert "6 of 6 trials done, 2 skipped (abortOnFail)" in root.find_all("header")[0].all_text()
    headings = [h.text for h in root.find_all("h2")]
    assert "Skipped trials" in headings and "Failed trials" not in headings
    tables = root.find_all("table")
    listed = rows(tables[-1])
    assert [(r[0], r[-1]) for r in listed] == [(e["name"], e["message"]) for e in skipped]
    points = tables[-2]
    assert set(column(points, "Failed")) == {"—"}
    tagged = [r for r in points.find_all("tr") if r.find_all("span", "skipped")]
    assert [r.find_all("td")[2].text for r in tagged] == ["4", "16"]
    assert {r.find_all("span", "skipped")[0].text for r in tagged} == {"skipped: 1 trial"}


def test_an_arrival_point_not_run_says_skipped() -> None:
    point = SummaryPoint.read({
        "variant": "asyncio",
        "model": "asyncio",
        "workers": 10,
        "rttSeconds": 0.05,
        "ratePerSecond": 800.0,
        "repetitions": 0,
        "failedTrials": 0,
        "skippedTrials": 1,
    })  # fmt: skip
    (row,) = rows(parse(rate_points_table([point])).find_all("table")[0])
    assert row[5] == "skipped: 1 trial (an objective broke)"


# --- a service subject (spec.service) --------------------------------------------------------

SERVICE_SPEC: dict[str, Any] = {
    "service": {
        "command": ["gunicorn", "--bind", "127.0.0.1:8080"],
        "variants": {"named": [{"name": "sync-2", "args": ["-w", "2", "httpbin:app"]},
                               {"name": "sync-4", "args": ["-w", "4", "httpbin:app"]}]},
    },
    "workload": {"type": "http", "tasks": 200, "target": {"url": "http://127.0.0.1:8080/get"}},
    "models": [{"model": "asyncio", "workers": [64]}],
}  # fmt: skip


def test_the_services_figures_are_a_table_beside_the_generators_cpu() -> None:
    from dataclasses import replace

    from cxlab.analysis.service_figures import ServiceFigures

    experiment = parse_experiment(
        {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
         "metadata": {"name": "svc"}, "spec": SERVICE_SPEC}
    )  # fmt: skip
    trials = plan_trials(experiment.spec)
    figures = [
        ServiceFigures(cpu_seconds=1.72, cpu_per_request_seconds=0.0086, peak_memory_bytes=70 * MIB,
                       restarts=0, oom_kills=0, samples=15),
        ServiceFigures(restarts=1, oom_kills=1, samples=2),  # a restart: its CPU not known
    ]  # fmt: skip
    outcomes = [
        replace(TrialOutcome(t, fake_result(experiment.spec, t)), service=f)
        for t, f in zip(trials, figures, strict=True)
    ]
    status = local_status(experiment, trials, outcomes, set(), None, NOW).document()
    html = render_report({"kind": "ConcurrencyExperiment", "metadata": {"name": "svc"},
                          "spec": SERVICE_SPEC, "status": status})  # fmt: skip
    (section,) = [s for s in parse(html).find_all("section") if "The service" in s.all_text()]
    (table,) = section.find_all("table")
    assert column(table, "variant / model") == ["sync-2 / asyncio", "sync-4 / asyncio"]
    assert column(table, "service cpu s") == ["1.720", "—"]
    assert column(table, "service cpu/req") == ["8.60 ms", "—"]
    assert column(table, "service peak MiB") == ["70.0", "—"]
    assert column(table, "throttled") == ["—", "—"]
    assert column(table, "restarts") == ["0", "1"]
    assert column(table, "oom kills") == ["0", "1"]
    generator = [o.result["cpuUserSeconds"] + o.result["cpuSystemSeconds"] for o in outcomes]
    assert column(table, "generator cpu s") == [f"{g:.3f}" for g in generator]
