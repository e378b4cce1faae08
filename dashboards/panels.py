"""What every cxlab dashboard shares: the datasource, experiment and model variables, panel
builders that insist on a title, a description and a unit, and the JSON writer."""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import barchart, dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
# The runner series of the chosen experiment and models (labels set by Prometheus'
# relabelling of the trial Pods' labels).
RUNNER = 'experiment="$experiment",model=~"$model"'
# cAdvisor knows Pods, not experiments: trial Pods are named <experiment>-t<index>-a<attempt>.
# The runner container's series, or the Pod's (container="") where cAdvisor sees only Pods.
CONTAINER = 'pod=~"$experiment-t[0-9]+-a[0-9]+",container=~"runner|"'


def datasource_variable() -> dashboard.DatasourceVariable:
    return (
        dashboard.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .description("The Prometheus that scrapes the trial Pods and the operator.")
    )


def query_variable(name: str, label: str, query: str, multi: bool = False) -> Any:
    variable = (
        dashboard.QueryVariable(name)
        .label(label)
        .description(f"{label}: values of the label in the runner series.")
        .query(query)
        .datasource(DATASOURCE)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.NATURAL_ASC)
    )
    if multi:
        variable = variable.multi(True).include_all(True).all_value(".*")
    return variable


def experiment_variables() -> list[Any]:
    return [
        datasource_variable(),
        query_variable("experiment", "Experiment", "label_values(cxlab_trial_info, experiment)"),
        query_variable(
            "model",
            "Model",
            'label_values(cxlab_trial_info{experiment="$experiment"}, model)',
            multi=True,
        ),
    ]


def query(expr: str, legend: str = "", *, instant: bool = False) -> prometheus.Dataquery:
    target = prometheus.Dataquery().expr(expr).legend_format(legend or "__auto")
    if instant:
        target = target.instant().format(PromQueryFormat.TABLE)
    return target


def graph(title: str, description: str, unit: str, *targets: prometheus.Dataquery) -> Any:
    panel = timeseries.Panel().title(title).description(description).unit(unit)
    panel = panel.datasource(DATASOURCE).span(12).height(8)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def single(title: str, description: str, unit: str, expr: str) -> Any:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .span(6)
        .height(4)
        .with_target(query(expr, instant=True))
    )


def bars(title: str, description: str, unit: str, expr: str, x: str, series: str) -> Any:
    """A bar chart of one instant table: `x` along the axis, one bar per `series` value."""
    pivot = model.DataTransformerConfig(
        id_val="groupingToMatrix",
        options={"rowField": x, "columnField": series, "valueField": "Value"},
    )
    return (
        barchart.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .span(12)
        .height(8)
        .x_field(x)
        .with_target(query(expr, instant=True))
        .with_transformation(pivot)
    )


def build(title: str, uid: str, description: str, variables: list[Any], panels: list[Any]) -> Any:
    board = (
        dashboard.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["cxlab"])
        .time("now-1h", "now")
        .refresh("10s")
        .variables(variables)
    )
    for panel in panels:
        board = board.with_panel(panel)
    return board.build()


def to_json(board: Any) -> str:
    """Stable bytes: keys sorted, two-space indent, one final newline."""
    plain = json.loads(JSONEncoder().encode(board))
    return json.dumps(plain, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
