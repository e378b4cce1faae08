"""Capacity planning: one ExperimentSchedule over time — the Pods and cores its capacity plan
needs, its newest run's medians per point, its regressions (marked on every panel) and what
became of its slots, from the operator's cxlab_schedule_* gauges."""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.models import dashboard as model

from dashboards.panels import (
    OPERATOR_JOB,
    annotation,
    build,
    datasource_variable,
    graph,
    query,
    query_variable,
    states,
    tallies,
)

# The chosen schedule's series on the operator's /metrics (namespace and schedule are the
# operator's own labels: its scrape job sets no namespace).
SCHEDULE = f'{OPERATOR_JOB},namespace="$namespace",schedule="$schedule"'
REGRESSED = f"cxlab_schedule_regressed{{{SCHEDULE}}}"
STEPS = "Each scrape holds the newest run's values: a step is a new run."
# The newest succeeded run's medians per point (cxlab.schedules.history.METRICS): title, the
# metric label, unit, what it is.
POINT_METRICS = [
    ("Wall time", "wallSeconds", "s", "Wall time of the task phase"),
    ("Throughput", "throughputPerSecond", "count:tasks/s", "Tasks completed per second"),
    ("p99 latency", "latencyP99Seconds", "s", "p99 of the task latency"),
    ("CPU per task", "cpuSecondsPerTask", "s", "CPU time (user + system) per task"),
    ("Peak RSS", "peakRssBytes", "bytes", "Peak resident memory of the runner"),
]


def _capacity(title: str, metric: str, what: str) -> Any:
    return graph(
        title,
        f"{what} the capacity plan of the newest succeeded run needs for the target rate: the "
        f"chosen (cheapest) model, thick, and every model that meets the latency objective. "
        f"{STEPS}",
        "short",
        query(f'max by (variant) ({metric}{{{SCHEDULE},chosen="true"}})', "chosen: {{variant}}"),
        query(f"max by (variant) ({metric}{{{SCHEDULE}}})", "{{variant}}"),
    ).override_by_regexp("^chosen: ", [model.DynamicConfigValue("custom.lineWidth", 3)])


def _per_point(title: str, metric: str, unit: str, what: str) -> Any:
    return graph(
        f"{title} per point",
        f"{what}, median over the newest succeeded run's repetitions, per point (model, "
        f"workers, RTT). {STEPS}",
        unit,
        query(
            f'max by (point) (cxlab_schedule_point_value{{{SCHEDULE},metric="{metric}"}})',
            "{{point}}",
        ),
    )


def dashboard() -> Any:
    panels = [
        tallies(
            "Runs",
            "The schedule's slots so far, by what became of them: started (a run created), "
            "skipped (a run was still going, concurrencyPolicy Forbid), missed (the operator "
            "was down, or past startingDeadlineSeconds), replaced (runs stopped for a newer "
            "slot, concurrencyPolicy Replace). At the end of the time range.",
            "short",
            f"max by (outcome) (cxlab_schedule_runs{{{SCHEDULE}}})",
            "{{outcome}}",
        ),
        states(
            "Regressed",
            "Whether the newest run regressed against the runs before it (the schedule's "
            "Regressed condition); the red marks on the other panels are the moments it "
            "turned regressed.",
            "bool",
            {"0": ("no regression", "green"), "1": ("regressed", "red")},
            f"max({REGRESSED})",
            "newest run",
        ),
        _capacity("Pods needed", "cxlab_schedule_capacity_pods", "Pods"),
        _capacity("Cores needed", "cxlab_schedule_capacity_cores", "Cores"),
        *(_per_point(*metric) for metric in POINT_METRICS),
    ]
    # 1 at the one step where the schedule turned regressed: regressed now, not one step
    # ($__interval) before. A run regressing after a regressed run is not marked again.
    turned_regressed = (
        f"max by (namespace, schedule) ({REGRESSED}) == 1"
        f" and max by (namespace, schedule) ({REGRESSED} offset $__interval) == 0"
    )
    regression = annotation(
        "Regressions",
        turned_regressed,
        title="Regressed",
        text="{{namespace}}/{{schedule}}: the newest run regressed",
        tags="schedule",
    )
    variables = [
        datasource_variable(),
        query_variable(
            "namespace",
            "Namespace",
            f"label_values(cxlab_schedule_runs{{{OPERATOR_JOB}}}, namespace)",
            description="Namespace: the namespaces of the schedules the operator reports.",
        ),
        query_variable(
            "schedule",
            "Schedule",
            f'label_values(cxlab_schedule_runs{{{OPERATOR_JOB},namespace="$namespace"}}, schedule)',
            description="Schedule: the ExperimentSchedules of the namespace.",
        ),
    ]
    return build(
        "cxlab / capacity planning",
        "cxlab-capacity",
        "One ExperimentSchedule over time: its capacity plan, its newest run's medians per "
        "point, its regressions and its runs, from the operator's /metrics.",
        variables,
        panels,
        [regression],
    )
