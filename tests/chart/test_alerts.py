"""The operator's alerts (charts/cxlab/files/alerts.yaml, the chart's PrometheusRule), without a
cluster or a Prometheus: rendered only with the ServiceMonitor, the same groups as the file a
plain Prometheus loads, valid (promtool check rules), firing and resolving on the series the
operator exports (promtool test rules, tests/alerts/), each with its runbook section."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, program
from helpers.chart import CHART, of_kind, only, render
from helpers.dashboards import SCHEDULE_STATUS
from helpers.docs import anchors

from cxlab.controller.metrics import OperatorMetrics
from cxlab.schedules.status import ScheduleStatus

ALERTS = CHART / "files" / "alerts.yaml"
UNIT_TESTS = ROOT / "tests" / "alerts" / "cxlab-alerts.test.yaml"
RUNBOOK = ROOT / "docs" / "troubleshooting.md"
RUNBOOK_URL = "https://cxlab.dev/docs/troubleshooting.md"
JOB = "cxlab-operator"  # the ServiceMonitor's job label, and hack/prometheus.sh's job_name
MONITORED = "prometheus.serviceMonitor.enabled=true"


def file_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(ALERTS.read_text())["groups"]
    return groups


def alerts(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def rendered_groups(*sets: str) -> list[dict[str, Any]]:
    rule = only(render(MONITORED, *sets), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def promtool(*args: str) -> None:
    run = subprocess.run([program("promtool"), *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_rule_is_rendered_with_the_service_monitor_only() -> None:
    assert not of_kind(render(), "PrometheusRule")
    assert not of_kind(render("prometheus.prometheusRule.enabled=true"), "PrometheusRule")
    assert not of_kind(render(MONITORED, "prometheus.prometheusRule.enabled=false"),
                       "PrometheusRule")  # fmt: skip
    docs = render(MONITORED, "prometheus.prometheusRule.labels.release=kube-prometheus-stack")
    rule, monitor = only(docs, "PrometheusRule"), only(docs, "ServiceMonitor")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "cxlab-system"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # The alerts select the job the ServiceMonitor gives the operator's series.
    (endpoint,) = monitor["spec"]["endpoints"]
    assert {"targetLabel": "job", "replacement": JOB} in endpoint["relabelings"]
    assert f"job_name: {JOB}" in (ROOT / "hack" / "prometheus.sh").read_text()


def test_the_chart_renders_the_files_groups_as_they_are() -> None:
    # What a plain Prometheus loads from the file is what the Prometheus Operator gets.
    assert rendered_groups() == file_groups()


def test_values_set_an_alerts_for_and_the_runbook_page() -> None:
    groups = rendered_groups(
        "prometheus.prometheusRule.for.CxlabOperatorDown=30s",
        "prometheus.prometheusRule.runbookURL=https://runbooks.example.com/cxlab.md",
    )
    got, want = alerts(groups), alerts(file_groups())
    assert got["CxlabOperatorDown"]["for"] == "30s" != want["CxlabOperatorDown"]["for"]
    for name, rule in got.items():
        if name != "CxlabOperatorDown":
            assert rule["for"] == want[name]["for"], name
        anchor = want[name]["annotations"]["runbook_url"].split("#")[1]
        assert (
            rule["annotations"]["runbook_url"] == f"https://runbooks.example.com/cxlab.md#{anchor}"
        )


def test_the_documented_durations_are_the_files() -> None:
    # values.yaml's comment and docs/observability.md's table say each alert's default `for`.
    want = {name: rule["for"] for name, rule in alerts(file_groups()).items()}
    values = (CHART / "values.yaml").read_text()
    assert dict(re.findall(r"\b(Cxlab\w+) (\w+)[,)]", values)) == want
    table = (ROOT / "docs" / "observability.md").read_text()
    assert dict(re.findall(r"^\| \[(Cxlab\w+)\]\(.*\| (\w+) \| \w+ \|$", table, re.M)) == want


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("prometheus.prometheusRule.for.CxlabOperatorGone=1m", "no such alert"),
        ("prometheus.prometheusRule.for.CxlabOperatorDown=1.5m", "does not match pattern"),
        ("prometheus.prometheusRule.runbookURL=runbooks/cxlab.md", "does not match pattern"),
    ],
)
def test_values_that_name_no_alert_or_no_duration_are_refused(value: str, says: str) -> None:
    run = subprocess.run(
        [str(ROOT / "build" / "bin" / "helm"), "template", "cx", str(CHART),
         "--set", MONITORED, "--set", value],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode != 0 and says in run.stderr.lower(), run.stderr


@pytest.mark.parametrize("source", ["file", "chart"])
def test_the_rules_pass_promtool_check(source: str, tmp_path: Path) -> None:
    path = ALERTS
    if source == "chart":
        path = tmp_path / "rendered.yaml"
        path.write_text(yaml.safe_dump({"groups": rendered_groups()}))
    promtool("check", "rules", str(path))


@pytest.mark.parametrize("source", ["file", "chart"])
def test_every_alert_fires_and_resolves(source: str, tmp_path: Path) -> None:
    # tests/alerts/ as it is (against the file), and against the groups the chart renders.
    path = UNIT_TESTS
    if source == "chart":
        rendered = tmp_path / "rendered.yaml"
        rendered.write_text(yaml.safe_dump({"groups": rendered_groups()}))
        # As text: YAML 1.1 would read series values such as 0x6 as hexadecimal numbers.
        text, rules = UNIT_TESTS.read_text(), os.path.relpath(ALERTS, UNIT_TESTS.parent)
        assert text.count(rules) == 1
        path = tmp_path / "unit.yaml"
        path.write_text(text.replace(rules, str(rendered)))
    promtool("test", "rules", str(path))


def test_the_unit_tests_see_every_alert_fire_then_resolve() -> None:
    # promtool passes a test that never checks an alert: each is seen firing, then not.
    unit = yaml.safe_load(UNIT_TESTS.read_text())
    assert unit["rule_files"] == [os.path.relpath(ALERTS, UNIT_TESTS.parent)]
    seen: dict[str, str] = {}
    for test in unit["tests"]:
        for check in sorted(test["alert_rule_test"], key=lambda c: duration(c["eval_time"])):
            name, firing = check["alertname"], bool(check["exp_alerts"])
            if firing:
                seen.setdefault(name, "fired")
            elif seen.get(name) == "fired":
                seen[name] = "resolved"
    assert seen == dict.fromkeys(alerts(file_groups()), "resolved")


def duration(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d)", text))


def test_every_alert_says_what_and_where_its_runbook_is() -> None:
    sections = anchors(RUNBOOK)
    for name, rule in alerts(file_groups()).items():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, name
        page, _, anchor = annotations["runbook_url"].partition("#")
        assert page == RUNBOOK_URL, name
        assert anchor == name.lower() and anchor in sections, f"{RUNBOOK.name} has no #{anchor}"


def exported() -> dict[str, list[dict[str, str]]]:
    """The label sets of every series the operator exports, with a schedule observed whose
    plan grew and whose newest run was refused."""
    status: dict[str, Any] = dict(SCHEDULE_STATUS)
    status["capacityPlan"] = {**status["capacityPlan"], "pods": 3, "previousPods": 2}
    status["conditions"] = [{"type": "RunRefused", "status": "True", "reason": "RunRefused"}]
    metrics = OperatorMetrics()
    metrics.observe_schedule("ns", "s", ScheduleStatus.read(status))
    series: dict[str, list[dict[str, str]]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            series.setdefault(sample.name, []).append(dict(sample.labels))
    return series


# A selector's label matchers: label, operator, value.
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
# Labels Prometheus puts on every scraped series (the ServiceMonitor adds more, not selected).
TARGET_LABELS = {"job", "instance", "pod"}


def test_the_alerts_select_only_what_the_operator_exports() -> None:
    series = exported()
    for name, rule in alerts(file_groups()).items():
        expr = rule["expr"]
        selectors = re.findall(r"\b(cxlab_\w+|up)\{([^}]*)\}", expr)
        names = re.findall(r"\b(?:cxlab_\w+|up)\b", expr)
        assert selectors and len(selectors) == len(names), f"{name}: a series without a selector"
        labels = set(TARGET_LABELS)
        for metric, selector in selectors:
            matchers = MATCHER.findall(selector)
            assert ("job", "=", JOB) in matchers, f"{name}: {metric} not of job {JOB}"
            if metric == "up":
                continue
            assert metric in series, f"{name}: the operator exports no {metric}"
            have = {label for labels_ in series[metric] for label in labels_}
            labels |= have
            for label, operator, value in matchers:
                assert label in have | TARGET_LABELS, f"{name}: {metric} has no label {label}"
                if label in TARGET_LABELS:
                    continue
                values = {labels_.get(label) for labels_ in series[metric]}
                for one in value.split("|") if operator == "=~" else [value]:
                    assert one in values, f"{name}: no {metric} has {label}={one!r}"
        for grouping in re.findall(r"\b(?:by|without) \(([^)]*)\)", expr):
            assert {g.strip() for g in grouping.split(",")} <= labels, (name, grouping)
        text = " ".join(rule["annotations"].values())
        for label in re.findall(r"\$labels\.(\w+)", text):
            assert label in labels - {"instance", "pod"}, f"{name}: no label {label} to show"
