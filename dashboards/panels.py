"""What every cxlab dashboard shares: the datasource, experiment and model variables, panel
builders that insist on a title, a description and a unit, and the JSON writer."""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import (
    barchart,
    dashboard,
    prometheus,
    stat,
    statetimeline,
    timeseries,
)
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
# The runner series of the chosen experiment and models (labels set by Prometheus'
# relabelling of the trial Pods' labels).
RUNNER = 'experiment="$experiment",model=~"$model"'
# cAdvisor knows Pods, not experiments: trial Pods are named <experiment>-t<index>-a<attempt>.
# The runner container's series, or the Pod's (container="") where cAdvisor sees only Pods.
CONTAINER = 'pod=~"$experiment-t[0-9]+-a[0-9]+(-p[0-9]+)?",container=~"runner|"'
# The operator's own /metrics: the scrape job of hack/prometheus.sh.
OPERATOR_JOB = 'job="cxlab-operator"'


def datasource_variable() -> dashboard.DatasourceVariable:
    return (
        dashboard.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .description("The Prometheus that scrapes the trial Pods and the operator.")
    )


def query_variable(
    name: str, label: str, query: str, multi: bool = False, description: str = ""
) -> Any:
    variable = (
        dashboard.QueryVariable(name)
        .label(label)
        .description(description or f"{label}: values of the label in the runner series.")
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


def tallies(title: str, description: str, unit: str, expr: str, legend: str) -> Any:
    """One big number per series of an instant query, named by `legend`."""
    target = prometheus.Dataquery().expr(expr).legend_format(legend).instant()
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .span(8)
        .height(6)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
        .with_target(target)
    )


def _value_map(names: dict[str, tuple[str, str]]) -> model.ValueMap:
    """`names` maps a value to the (text, colour) a panel shows for it."""
    return model.ValueMap(
        options={
            value: model.ValueMappingResult(text=text, color=color, index=index)
            for index, (value, (text, color)) in enumerate(names.items())
        }
    )


def verdicts(
    title: str, description: str, names: dict[str, tuple[str, str]], expr: str, legend: str
) -> Any:
    """A row of tiles, one per series of an instant query, each showing the name of its value
    on that value's colour."""
    return (
        tallies(title, description, "none", expr, legend)
        .span(24)
        .height(4)
        .mappings([_value_map(names)])
        .color_mode(common.BigValueColorMode.BACKGROUND)
    )


def states(
    title: str,
    description: str,
    unit: str,
    names: dict[str, tuple[str, str]],
    expr: str,
    legend: str,
) -> Any:
    """A state timeline of one query; `names` maps a value to the (text, colour) it shows."""
    mapping = _value_map(names)
    return (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .span(16)
        .height(6)
        .mappings([mapping])
        .with_target(query(expr, legend))
    )


class _PrometheusAnnotation(model.AnnotationQuery):
    """The SDK's annotation query knows `expr` only; Grafana's Prometheus annotations also read
    `step` (the smallest query step), `titleFormat`, `textFormat` and `tagKeys` beside it."""

    def __init__(self, step: str, title: str, text: str, tags: str, **fields: Any) -> None:
        super().__init__(**fields)
        self.step, self.title_format, self.text_format, self.tag_keys = step, title, text, tags

    def to_json(self) -> dict[str, object]:
        return {
            **super().to_json(),
            "step": self.step,
            "titleFormat": self.title_format,
            "textFormat": self.text_format,
            "tagKeys": self.tag_keys,
        }


def annotation(
    name: str, expr: str, *, title: str, text: str, tags: str = "", step: str = "1m"
) -> model.AnnotationQuery:
    """An event on every time series panel wherever `expr` has a value above 0 (consecutive
    steps make one region), titled and described by `title` and `text` ({{label}} legends),
    tagged with the values of the comma-separated labels `tags`."""
    return _PrometheusAnnotation(
        step, title, text, tags, name=name, datasource=DATASOURCE, icon_color="red", expr=expr
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


def build(
    title: str,
    uid: str,
    description: str,
    variables: list[Any],
    panels: list[Any],
    annotations: list[model.AnnotationQuery] | None = None,
) -> Any:
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
    built = board.build()
    if annotations:
        built.annotations = model.AnnotationContainer(list_val=annotations)
    return built


def to_json(board: Any) -> str:
    """Stable bytes: keys sorted, two-space indent, one final newline."""
    plain = json.loads(JSONEncoder().encode(board))
    return json.dumps(plain, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
