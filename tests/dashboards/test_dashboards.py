"""The Grafana dashboards, rendered without Grafana: committed JSON matches the sources, and
every panel says what it shows (title, description, unit) over templated queries that parse
(promtool); the capacity dashboard queries only series the operator exports, and marks the
moment a schedule turns regressed; the experiment overview names each objective's verdict."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, program
from helpers.dashboards import SCHEDULE_STATUS
from helpers.metrics import judged

from cxlab.controller.metrics import OperatorMetrics
from cxlab.schedules.history import METRICS
from cxlab.schedules.status import ScheduleStatus
from dashboards.__main__ import DASHBOARDS, FOLDER, rendered

SCRAPE_JOB = "cxlab-operator"


def panels(name: str) -> list[dict[str, Any]]:
    return list(json.loads((FOLDER / name).read_text())["panels"])


def test_the_committed_json_is_what_the_sources_generate() -> None:
    stale = [p.name for p, text in rendered().items() if not p.exists() or p.read_text() != text]
    assert not stale, f"run `make dashboards`: {stale} differ from dashboards/*.py"


RENDER = (
    "import json, sys\n"
    "from dashboards.__main__ import rendered\n"
    "json.dump({p.name: text for p, text in rendered().items()}, sys.stdout)\n"
)


def _rendered_in_a_process(hash_seed: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(FOLDER.parent)}
    completed = subprocess.run([sys.executable, "-c", RENDER], capture_output=True, text=True,
                               env=env, cwd=FOLDER.parent, check=True)  # fmt: skip
    return dict(json.loads(completed.stdout))


def test_rendering_is_stable_across_processes_and_hash_seeds() -> None:
    # One process renders the same thing twice whatever it iterates over; only separate
    # processes with different string hashes show set/dict-order, time or uuid leaking in.
    here = {path.name: text for path, text in rendered().items()}
    for seed in ("0", "1", "4242"):
        there = _rendered_in_a_process(seed)
        assert sorted(there) == sorted(here)
        differ = [name for name in here if there[name] != here[name]]
        assert not differ, f"PYTHONHASHSEED={seed} renders {differ} differently"


def _sorted_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assert keys == sorted(keys), keys
    return dict(pairs)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_rendering_sorts_keys_and_indents_two_spaces(name: str) -> None:
    text = (FOLDER / name).read_text()
    board = json.loads(text, object_pairs_hook=_sorted_keys)
    assert text == json.dumps(board, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_panel_has_title_description_unit_and_templated_datasource(name: str) -> None:
    assert panels(name)
    for panel in panels(name):
        assert panel["title"] and panel["description"], panel
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            for window in re.findall(r"\brate\([^\[]*\[([^\]]+)\]", expr):
                assert window == "$__rate_interval", (panel["title"], expr)


# The variables every panel of a dashboard selects by (the operator's series belong to no
# experiment; the schedules' are the operator's).
SELECTED_BY = {
    "capacity-planning.json": ("namespace", "schedule"),
    "experiment-overview.json": ("experiment",),
    "model-comparison.json": ("experiment",),
    "operator-health.json": (),
}
# What Grafana itself sets.
BUILT_IN = {"__interval", "__rate_interval", "__range"}


def annotations(name: str) -> list[dict[str, Any]]:
    board = json.loads((FOLDER / name).read_text())
    return list(board["annotations"].get("list", []))


def exprs(name: str) -> list[str]:
    """Every PromQL expression of a dashboard: its panels' queries and its annotations'."""
    found = [target["expr"] for panel in panels(name) for target in panel["targets"]]
    return found + [a["expr"] for a in annotations(name) if "expr" in a]


def test_every_dashboard_says_what_its_panels_select_by() -> None:
    assert sorted(SELECTED_BY) == sorted(DASHBOARDS)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_variables(name: str) -> None:
    board = json.loads((FOLDER / name).read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    if "model" in variables:
        assert variables["model"]["multi"] and variables["model"]["includeAll"]
    for selected in SELECTED_BY[name]:
        assert variables[selected]["type"] == "query", selected
        for panel in panels(name):
            assert all(f"${selected}" in t["expr"] for t in panel["targets"]), panel["title"]
    queries = [v["query"] for v in variables.values() if v["type"] == "query"]
    used = {found for text in [*exprs(name), *queries] for found in re.findall(r"\$(\w+)", text)}
    assert used <= set(variables) | BUILT_IN, used - set(variables) - BUILT_IN


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_query_is_valid_promql(name: str, tmp_path: Path) -> None:
    # promtool parses rule files without a Prometheus: one recording rule per expression, with
    # Grafana's intervals as durations and the other variables as a label value.
    def substituted(expr: str) -> str:
        expr = re.sub(r"\$(__interval|__rate_interval|__range)\b", "1m", expr)
        return re.sub(r"\$\w+", "x", expr)

    rules = [
        {"record": f"cxlab:query{i}", "expr": substituted(e)} for i, e in enumerate(exprs(name))
    ]
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps({"groups": [{"name": name, "rules": rules}]}))
    check = subprocess.run([program("promtool"), "check", "rules", str(path)],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


CAPACITY = "capacity-planning.json"
# A label matcher of a selector: label, operator, value.
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def exported_series() -> dict[str, list[dict[str, str]]]:
    """The label sets of every series the operator exports with one schedule observed."""
    metrics = OperatorMetrics()
    metrics.observe_schedule("ns", "s", ScheduleStatus.read(SCHEDULE_STATUS))
    series: dict[str, list[dict[str, str]]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            series.setdefault(sample.name, []).append(dict(sample.labels))
    return series


def test_capacity_queries_only_what_the_operator_exports_from_its_scrape_job() -> None:
    exported = exported_series()
    board = json.loads((FOLDER / CAPACITY).read_text())
    queries = [v["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    # The operator's scrape job, selected as dashboards/operator.py does.
    assert f"job_name: {SCRAPE_JOB}" in (ROOT / "hack" / "prometheus.sh").read_text()
    for expr in [*exprs(CAPACITY), *queries]:
        names = re.findall(r"\bcxlab_\w+", expr)
        assert names and set(names) <= set(exported), (expr, set(names) - set(exported))
        selectors = re.findall(r"\b(cxlab_\w+)\{([^}]*)\}", expr)
        assert len(selectors) == len(names), f"a series without a selector: {expr}"
        labels = {label for name in names for series in exported[name] for label in series}
        for name, selector in selectors:
            assert f'job="{SCRAPE_JOB}"' in selector, expr
            for label, operator, value in MATCHER.findall(selector):
                assert label in labels | {"job"}, (label, expr)
                if operator == "=" and "$" not in value and label != "job":
                    values = {series.get(label) for series in exported[name]}
                    assert value in values, f"no {name} series has {label}={value!r}"
        for grouping in re.findall(r"\bby \(([^)]*)\)", expr):
            assert {g.strip() for g in grouping.split(",")} <= labels, (grouping, expr)


def test_capacity_draws_every_compared_metric_in_a_panel_of_its_own() -> None:
    drawn = [
        re.findall(r'metric="(\w+)"', " ".join(t["expr"] for t in panel["targets"]))
        for panel in panels(CAPACITY)
    ]
    assert sorted(m for found in drawn for m in found) == sorted(METRICS)
    assert all(len(found) <= 1 for found in drawn), drawn


def test_capacity_marks_regressions_on_every_panel() -> None:
    regressions = [a for a in annotations(CAPACITY) if "cxlab_schedule_regressed" in a["expr"]]
    assert len(regressions) == 1, annotations(CAPACITY)
    mark = regressions[0]
    assert mark["enable"] and not mark["hide"], mark
    assert mark["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert mark["titleFormat"] and mark["step"], mark
    assert "$namespace" in mark["expr"] and "$schedule" in mark["expr"], mark["expr"]
    # Grafana draws an annotation on every time series panel unless filtered to some.
    assert "filter" not in mark, mark


def test_capacity_regression_mark_is_the_step_where_it_turned_regressed(tmp_path: Path) -> None:
    # The annotation's query over a schedule that regresses, recovers and regresses again, at
    # one sample per step (Grafana's $__interval): one event per turn to 1, none while it stays.
    (mark,) = (a for a in annotations(CAPACITY) if "cxlab_schedule_regressed" in a["expr"])
    expr = mark["expr"].replace("$__interval", "1m").replace("$namespace", "ns")
    expr = expr.replace("$schedule", "s")
    regressed = [0, 0, 1, 1, 1, 0, 1, 1, 0]
    turned = [2, 6]
    series = 'cxlab_schedule_regressed{job="cxlab-operator",namespace="ns",schedule="s"}'
    marked = [{"labels": '{namespace="ns",schedule="s"}', "value": 1}]
    tests = {
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": " ".join(map(str, regressed))}],
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": f"{m}m",
                        "exp_samples": marked if m in turned else [],
                    }
                    for m in range(len(regressed))
                ],
            }
        ]
    }
    path = tmp_path / "test.yml"
    path.write_text(json.dumps(tests))
    check = subprocess.run([program("promtool"), "test", "rules", str(path)],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


OVERVIEW = "experiment-overview.json"


def test_the_objectives_panel_names_each_verdict_from_the_operators_series(
    tmp_path: Path,
) -> None:
    # The panel's query over what the operator really exports (two replicas scraped alike, and
    # another experiment), then its value mappings: one tile per objective, named its verdict.
    given = {"fast": "Met", "lean": "Broken", "near": "Inconclusive"}
    metrics = OperatorMetrics()
    metrics.observe_objectives("ns", "exp", [judged(n, v) for n, v in given.items()])
    metrics.observe_objectives("ns", "other", [judged("lean", "Met")])  # not this one's
    series = []
    for family in metrics.registry.collect():
        if not family.name.startswith("cxlab_experiment_objective_"):
            continue
        for sample, instance in itertools.product(family.samples, ("10.0.0.1:81", "10.0.0.2:81")):
            labels = {**sample.labels, "job": SCRAPE_JOB, "instance": instance}
            selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            series.append({"series": f"{sample.name}{{{selector}}}", "values": f"{sample.value}x2"})
    (panel,) = (p for p in panels(OVERVIEW) if p["title"] == "Objectives")
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    value_of = {shown["text"]: value for value, shown in mapping["options"].items()}
    assert sorted(value_of) == ["Broken", "Inconclusive", "Met"]
    (target,) = panel["targets"]
    assert target["instant"] and target["legendFormat"] == "{{objective}}"
    expected = [
        {"labels": f'{{namespace="ns",objective="{name}"}}', "value": float(value_of[verdict])}
        for name, verdict in given.items()
    ]
    tests = {
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": target["expr"].replace("$experiment", "exp"),
                        "eval_time": "1m",
                        "exp_samples": expected,
                    }
                ],
            }
        ]
    }
    path = tmp_path / "test.yml"
    path.write_text(json.dumps(tests))
    check = subprocess.run([program("promtool"), "test", "rules", str(path)],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
