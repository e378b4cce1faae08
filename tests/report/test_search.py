"""The report's rate search (status.rateSearch): a service subject's search run to its end by
the real planner (cxlab.experiments.followups) on schema-valid Results whose answer is known
by construction, its status built by the local backend, the page parsed back: a marker per
probe at its rate, the probes the generator bound apart and off the curve, the objective
across, and per line the searched rate and every probe in a table."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from helpers.report_dom import Node, charts, column, parse, plot_area, rows, series_of

from cxlab.analysis.outcome import TrialOutcome, parse_result
from cxlab.analysis.rate_search import RateSearch
from cxlab.analysis.service_figures import ServiceFigures
from cxlab.experiments.followups import trials_of
from cxlab.experiments.plan import Trial
from cxlab.experiments.record import trial_entry
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.status import ExperimentStatus
from cxlab.local.backend import local_status
from cxlab.report import render_report
from cxlab_contract import histogram

NOW = datetime(2026, 11, 21, 4, 50, tzinfo=UTC)
SECONDS = 5.0
OBJECTIVE = 0.25
CAPACITY = {"sync-2": 25.0, "sync-4": 45.0}  # the rate each variant's service holds
OFFERS = 30.0  # the most one generator Pod offers: above it, it falls behind its schedule
CHART = "Rate search: p99 latency vs offered rate"

SPEC: dict[str, Any] = {
    "service": {
        "command": ["gunicorn", "--bind", "127.0.0.1:8000", "httpbin:app"],
        "variants": {"named": [{"name": "sync-2", "args": ["-w", "2"]},
                               {"name": "sync-4", "args": ["-w", "4"]}]},
    },
    "workload": {"type": "http", "target": {"url": "http://127.0.0.1:8000/delay/0.05"},
                 "arrival": {"ratePerSecond": 20, "duration": "5s"}},
    "models": [{"model": "asyncio", "workers": [64]}],
    "search": {"rate": {"start": 20, "duration": "5s", "repeats": 1, "maxPods": 2,
                        "latency": {"max": "250ms"}}},
}  # fmt: skip


def arrival_result(trial: Trial, p99: float, saturated: bool) -> dict[str, Any]:
    """A schema-valid Result of an arrival run at the trial's rate: tasks served in 50 ms,
    their p99 as given (all of it over 50 ms waiting for a worker)."""
    rate = trial.rate_per_second or 0.0
    tasks = round(rate * SECONDS)
    wait = max(0.0, p99 - 0.05)
    result = {
        "schema": "cxlab.dev/result/v1", "experiment": "searched", "trial": trial.name,
        "model": trial.model, "workload": "http", "workers": trial.workers, "gomaxprocs": None,
        "tasks": tasks, "rttSeconds": None, "iterations": None, "holdSeconds": None,
        "tasksOk": tasks, "tasksFailed": 0, "wallSeconds": SECONDS, "floorSeconds": None,
        "efficiency": None, "cpuUserSeconds": 0.8, "cpuSystemSeconds": 0.2, "cpuPercent": 20.0,
        "peakRssBytes": 40 * 2**20, "baselineRssBytes": 30 * 2**20, "peakThreads": 2,
        "voluntaryContextSwitches": 100, "involuntaryContextSwitches": 10,
        "throughputPerSecond": rate,
        "latencySeconds": {"p50": 0.05, "p90": p99, "p99": p99, "max": p99},
        "rssTimeline": {"intervalSeconds": 1.0, "rssBytes": [40 * 2**20] * 5},
        "cpus": [1], "runtime": "CPython 3.11.9", "errors": [], "pool": None,
        "workersStarted": trial.workers, "peakVmBytes": 400 * 2**20, "taskContextSwitches": None,
        "syscalls": None, "pods": trial.pods, "podIndex": 0,
        "startedAtUnixSeconds": 1795000000.0, "barrierWaitSeconds": None,
        "startSkewSeconds": None, "locustWorkers": None, "durationSeconds": SECONDS,
        "latencyHistogram": histogram.build([wait + 0.05] * 100),
        "arrival": {
            "process": "uniform", "onBusy": "queue", "ratePerSecond": rate,
            "achievedRatePerSecond": rate * (0.9 if saturated else 1.0), "arrivals": tasks,
            "dropped": 0, "maxQueue": 0,
            "lagSeconds": {"p50": 0.001, "p99": 0.04 if saturated else 0.002, "max": 0.05},
            "maxLagSeconds": 0.01, "generatorSaturated": saturated,
            "saturation": "lag p99 40ms over the bound 10ms" if saturated else None,
            "waitHistogram": histogram.build([wait] * 100),
            "serviceHistogram": histogram.build([0.05] * 100),
        },
        "timeline": None, "warmup": None,
    }  # fmt: skip
    return parse_result(json.dumps(result))  # the real schema check: the fake stays honest


def outcome(trial: Trial) -> TrialOutcome:
    """The service of the trial's variant holds up to its capacity (p99 growing towards the
    objective), breaks above it; a generator Pod asked for more than it offers falls behind.
    The service's one core is busy in proportion to the rate."""
    rate, capacity = trial.rate_per_second or 0.0, CAPACITY[trial.service]
    saturated = rate / trial.pods > OFFERS
    p99 = 0.06 + 0.15 * rate / capacity if rate <= capacity else 0.4 + rate / 100
    figures = ServiceFigures(
        cpu_seconds=SECONDS * min(1.0, 0.5 * rate / capacity), cpu_per_request_seconds=0.002,
        peak_memory_bytes=70 * 2**20, restarts=0, samples=10, window_seconds=SECONDS, cores=1,
    )  # fmt: skip
    return TrialOutcome(trial, arrival_result(trial, p99, saturated), service=figures)


def searched_document(spec: dict[str, Any] = SPEC) -> dict[str, Any]:
    """The document of the experiment run to its end: its sweep, then each variant's probes
    one at a time, each planned from the outcomes before it."""
    experiment = parse_experiment(
        {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
         "metadata": {"name": "searched"}, "spec": spec}
    )  # fmt: skip
    done: list[TrialOutcome] = []
    while True:
        names = {o.trial.name for o in done}
        trials = trials_of(experiment.spec, [trial_entry(o) for o in done]).trials
        waiting = [t for t in trials if t.name not in names]
        if not waiting:
            break
        done.append(outcome(waiting[0]))
    status = local_status(experiment, trials, done, set(), None, NOW).document()
    return {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
            "metadata": {"name": "searched"}, "spec": spec, "status": status}  # fmt: skip


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return searched_document()


@pytest.fixture(scope="module")
def searches(document: dict[str, Any]) -> list[RateSearch]:
    found = ExperimentStatus.read(document["status"]).rate_search or []
    # what the tests rely on: both variants searched, a probe the generator bound in each
    assert [s.variant for s in found] == ["sync-2 / asyncio", "sync-4 / asyncio"]
    assert all(any(p.generator_bound for p in s.probes) for s in found)
    assert all(any(p.holds for p in s.probes) for s in found)
    assert any(not p.holds and not p.generator_bound for s in found for p in s.probes)
    return found


def section(html: str) -> Node:
    (found,) = [s for s in parse(html).find_all("section") if s.attrs.get("id") == "rate-search"]
    return found


def markers(series: Node) -> list[tuple[float, float]]:
    found = []
    for marker in series.find_all("path", "marker"):
        match = re.fullmatch(r"translate\((\S+) (\S+)\)", marker.attrs["transform"])
        assert match, marker.attrs["transform"]
        found.append((float(match[1]), float(match[2])))
    return found


def by_label(chart: Node) -> dict[str, Node]:
    return {s.attrs["data-label"]: s for s in series_of(chart)}


def x_ticks(chart: Node) -> list[tuple[float, float]]:
    """The x axis' ticks as (value, pixel): the labels under the plot."""
    bottom = plot_area(chart)[3]
    ticks = []
    for text in chart.find_all("g", "grid")[0].find_all("text"):
        if float(text.attrs["y"]) > bottom:
            value = float(text.text.replace("k", "e3"))
            ticks.append((value, float(text.attrs["x"])))
    return ticks


UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}


def y_ticks(chart: Node) -> list[tuple[float, float]]:
    """The y axis' ticks as (seconds, pixel): the labels left of the plot."""
    left = plot_area(chart)[0]
    ticks = []
    for text in chart.find_all("g", "grid")[0].find_all("text"):
        if float(text.attrs["x"]) < left:
            number, unit = text.text.split()
            ticks.append((float(number) * UNITS[unit], float(text.attrs["y"])))
    return ticks


def log_pixel_of(seconds: float, ticks: list[tuple[float, float]]) -> float:
    """The y pixel of a latency on the log axis the ticks lay out."""
    (v0, y0), (v1, y1) = ticks[0], ticks[-1]
    return y0 + math.log(seconds / v0) * (y1 - y0) / math.log(v1 / v0)


def pixel_of(rate: float, ticks: list[tuple[float, float]]) -> float:
    """The x pixel of a rate on the linear axis the ticks lay out."""
    (v0, x0), (v1, x1) = ticks[0], ticks[-1]
    return x0 + (rate - v0) * (x1 - x0) / (v1 - v0)


def at_rates(drawn: list[float], rates: list[float], ticks: list[tuple[float, float]]) -> bool:
    """The markers' x pixels are those of these rates (in any order)."""
    return bool(sorted(drawn) == pytest.approx(sorted(pixel_of(r, ticks) for r in rates), 0.1))


# --- the chart ------------------------------------------------------------------------------


def the_chart(document: dict[str, Any]) -> tuple[dict[str, Node], list[tuple[float, float]]]:
    """The rate search chart's series by label, and its x axis' ticks."""
    chart = charts(section(render_report(document)))[CHART]
    return by_label(chart), x_ticks(chart)


def test_one_marker_per_probe_at_its_rate_and_latency(
    document: dict[str, Any], searches: list[RateSearch]
) -> None:
    chart = charts(section(render_report(document)))[CHART]
    lines = by_label(chart)
    xs, ys = x_ticks(chart), y_ticks(chart)
    for search in searches:
        drawn = [
            marker
            for kind in ("held", "broke", "generator's")
            for marker in markers(lines[f"{search.variant} {kind}"])
        ]
        expected = [
            (pixel_of(p.rate_per_second, xs), log_pixel_of(p.latency_seconds or 0.0, ys))
            for p in search.probes
        ]
        assert len(drawn) == len(search.probes)
        for (x, y), (want_x, want_y) in zip(sorted(drawn), sorted(expected), strict=True):
            assert (x, y) == (pytest.approx(want_x, abs=0.1), pytest.approx(want_y, abs=0.2))
        assert not markers(lines[search.variant])  # the curve is a line only


def test_held_and_broke_are_told_apart(
    document: dict[str, Any], searches: list[RateSearch]
) -> None:
    lines, ticks = the_chart(document)
    for search in searches:
        counted = [p for p in search.probes if p.generator_bound is None]
        for kind, holds in (("held", True), ("broke", False)):
            drawn = [x for x, _ in markers(lines[f"{search.variant} {kind}"])]
            assert at_rates(drawn, [p.rate_per_second for p in counted if p.holds is holds], ticks)
        hollow = lines[f"{search.variant} broke"].find_all("path", "marker")
        assert {m.attrs["fill"] for m in hollow} == {"#fff"}
        filled = lines[f"{search.variant} held"].find_all("path", "marker")
        assert "#fff" not in {m.attrs["fill"] for m in filled}
        assert not lines[f"{search.variant} held"].find_all("polyline")


def test_a_probe_the_generator_bound_is_marked_apart_and_off_the_curve(
    document: dict[str, Any], searches: list[RateSearch]
) -> None:
    lines, ticks = the_chart(document)
    for search in searches:
        bound = lines[f"{search.variant} generator's"]
        rates = [p.rate_per_second for p in search.probes if p.generator_bound is not None]
        assert at_rates([x for x, _ in markers(bound)], rates, ticks)
        assert not bound.find_all("polyline")
        assert {m.attrs["fill"] for m in bound.find_all("path", "marker")} == {"none"}
        # the curve joins the counted probes only, in the order of their rates
        counted = sorted(p.rate_per_second for p in search.probes if p.generator_bound is None)
        (curve,) = lines[search.variant].find_all("polyline")
        xs = [float(pair.split(",")[0]) for pair in curve.attrs["points"].split()]
        assert xs == pytest.approx([pixel_of(r, ticks) for r in counted], abs=0.1)


def test_the_objective_is_a_line_across_at_its_latency(
    document: dict[str, Any], searches: list[RateSearch]
) -> None:
    chart = charts(section(render_report(document)))[CHART]
    (objective,) = [s for label, s in by_label(chart).items() if label.startswith("objective")]
    assert objective.attrs["data-label"] == "objective: p99 ≤ 250ms"
    (line,) = objective.find_all("polyline")
    (x0, y0), (x1, y1) = (tuple(map(float, p.split(","))) for p in line.attrs["points"].split())
    ticks = x_ticks(chart)
    rates = [p.rate_per_second for s in searches for p in s.probes]
    assert (x0, x1) == pytest.approx((pixel_of(min(rates), ticks), pixel_of(max(rates), ticks)))
    assert y0 == y1 == pytest.approx(log_pixel_of(OBJECTIVE, y_ticks(chart)), abs=0.2)
    # every probe that held below it on the page, every counted one that broke above it
    lines = by_label(chart)
    held = [y for s in searches for _, y in markers(lines[f"{s.variant} held"])]
    broke = [y for s in searches for _, y in markers(lines[f"{s.variant} broke"])]
    assert max(broke) < y0 < min(held)  # SVG's y grows downwards


# --- the tables ---------------------------------------------------------------------------


def test_a_row_per_line_with_its_searched_rate_interval_and_answer(
    document: dict[str, Any], searches: list[RateSearch]
) -> None:
    found = section(render_report(document))
    lines = found.find_all("table")[0]
    assert column(lines, "variant / model") == [s.variant for s in searches]
    assert column(lines, "held /s") == [f"{s.rate_per_second:g}" for s in searches]
    assert column(lines, "interval /s") == [
        f"[{s.interval.low:g}, {s.interval.high:g})" for s in searches
    ]
    assert column(lines, "limit") == ["service", "service"]
    assert [li.all_text() for li in found.find_all("li")] == [s.message for s in searches]
    # by construction: the interval holds each variant's capacity
    for search in searches:
        low, high = search.interval.low or 0.0, search.interval.high or math.inf
        assert low <= CAPACITY[search.variant.split(" / ")[0]] < high


def test_the_probes_in_order_with_their_verdict_and_the_services_cpu(
    document: dict[str, Any], searches: list[RateSearch]
) -> None:
    probes = section(render_report(document)).find_all("table")[1]
    listed = rows(probes)
    expected = [(s, p) for s in searches for p in s.probes]
    assert [r[0] for r in listed] == [s.variant for s, _ in expected]
    assert column(probes, "rate/s") == [f"{p.rate_per_second:g}" for _, p in expected]
    assert column(probes, "Pods") == [str(p.pods) for _, p in expected]
    assert column(probes, "trial") == [p.trial for _, p in expected]
    verdicts = ["generator's" if p.generator_bound else "held" if p.holds else "broke"
                for _, p in expected]  # fmt: skip
    assert [r[5] for r in listed] == verdicts
    shares = [
        min(1.0, 0.5 * p.rate_per_second / CAPACITY[s.variant.split(" / ")[0]]) for s, p in expected
    ]
    assert column(probes, "service cpu") == [f"{share:.0%}" for share in shares]


def test_no_section_without_a_rate_search(document: dict[str, Any]) -> None:
    status = {k: v for k, v in document["status"].items() if k != "rateSearch"}
    html = render_report({**document, "status": status})
    assert 'id="rate-search"' not in html and CHART not in html
    # nor without search.rate in the spec: the same sweep, no probes
    spec = {k: v for k, v in SPEC.items() if k != "search"}
    unsearched = searched_document(spec)
    assert "rateSearch" not in unsearched["status"]
    assert 'id="rate-search"' not in render_report(unsearched)


def test_a_line_none_of_whose_rates_held_has_no_searched_rate(
    document: dict[str, Any], searches: list[RateSearch]
) -> None:
    """Its probes all broke: no marker filled, "—" for its rate, the objective still across."""
    line = searches[0].model_copy(deep=True)
    for probe in line.probes:
        probe.holds = False
    line.rate_per_second, line.interval.low = None, None
    status = {**document["status"], "rateSearch": [line.document()]}
    found = section(render_report({**document, "status": status}))
    lines = by_label(charts(found)[CHART])
    assert f"{line.variant} held" not in lines  # a series without points is not drawn
    counted = [p for p in line.probes if p.generator_bound is None]
    assert len(markers(lines[f"{line.variant} broke"])) == len(counted)
    assert column(found.find_all("table")[0], "held /s") == ["—"]
    assert any(label.startswith("objective") for label in lines)
