"""What `cxlab plan FILE` prints for an ExperimentSchedule: when it fires next, in its time
zone (cxlab.schedules.cron, as CronJob computes them), and what each run does: the trials of
its template, as `cxlab plan` lists them for an experiment."""

from __future__ import annotations

from datetime import datetime

from cxlab.cli.plan_text import plan_text
from cxlab.experiments.resource import ConcurrencyExperiment
from cxlab.experiments.spec import API_VERSION, KIND
from cxlab.schedules.decide import run_name
from cxlab.schedules.spec import ExperimentSchedule
from cxlab.table import render_table
from cxlab.times import timestamp

# How many firings are shown: enough to see the rhythm (and a clock change close by).
FIRINGS = 5


def schedule_text(schedule: ExperimentSchedule, now: datetime) -> str:
    """The schedule, its next FIRINGS firings after now, and its first run's plan."""
    zone = schedule.spec.timing()[1]
    firings = next_firings(schedule, now, FIRINGS)
    rows = [
        [f"{slot.astimezone(zone):%a %Y-%m-%d %H:%M %Z}", timestamp(slot),
         run_name(schedule.metadata.name, slot)]
        for slot in firings
    ]  # fmt: skip
    headers = [f"next firings ({zone.key})", "UTC", "run (an experiment)"]
    table = render_table(headers, rows)
    first = run_of(schedule, firings[0])
    return (
        f"{_heading(schedule)}\n{table}\n\n"
        f"each run is an experiment of these trials (the first: {first.name}):\n{plan_text(first)}"
    )


def next_firings(schedule: ExperimentSchedule, now: datetime, count: int) -> list[datetime]:
    """The first `count` slots after now, in UTC. A file has no creation time yet: @every
    counts from now, as it would from the schedule's creation were it applied now."""
    timing, zone = schedule.spec.timing()
    anchor = schedule.metadata.creation_timestamp or now
    slots: list[datetime] = []
    moment = now
    for _ in range(count):
        moment = timing.next_after(moment, zone, anchor)
        slots.append(moment)
    return slots


def run_of(schedule: ExperimentSchedule, slot: datetime) -> ConcurrencyExperiment:
    """The experiment the slot's run is (the operator names it <schedule>-<unix seconds>)."""
    name = run_name(schedule.metadata.name, slot)
    return ConcurrencyExperiment.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": schedule.metadata.namespace},
            "spec": schedule.spec.experiment_template.spec,
        }
    )


def _heading(schedule: ExperimentSchedule) -> str:
    spec = schedule.spec
    lines = [
        f"{schedule.metadata.name}: an ExperimentSchedule firing {spec.schedule!r} in "
        f"{spec.time_zone or 'UTC'}, concurrencyPolicy {spec.concurrency_policy}"
    ]
    if spec.schedule.strip().startswith("@every"):
        lines.append("@every counts from the schedule's creation: here, from now")
    if spec.suspend:
        lines.append("suspended (spec.suspend): no run starts until it is false; else:")
    return "\n".join(lines)
