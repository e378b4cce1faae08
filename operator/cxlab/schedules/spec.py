"""The ExperimentSchedule resource as typed models: a ConcurrencyExperiment spec re-run on a
schedule, with CronJob's conventions (schedule, timeZone, suspend, concurrencyPolicy,
startingDeadlineSeconds, history limits), how its runs are compared (regression) and how many
of them it keeps. Shared by the operator and the CRD generator, as cxlab.experiments.spec is for
experiments; the CRD repeats what the apiserver can check."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from cxlab.experiments.fields import NAME_PATTERN, SpecError, Strict, between, describe
from cxlab.experiments.spec import API_VERSION, KIND, ExperimentSpec
from cxlab.schedules.cron import CRON_PATTERN, CronError, Schedule, parse_schedule, time_zone

SCHEDULE_KIND = "ExperimentSchedule"
# A run is named <schedule>-<unix seconds of its slot> (10 digits until 2286) and a run is an
# experiment, whose name may have 40 characters: 40 - 11 leaves 29 for the schedule.
SCHEDULE_NAME_MAX_LENGTH = 29
SCHEDULE_MAX_LENGTH = 100
TIME_ZONE_MAX_LENGTH = 64
# Entries in status.history: each is a few hundred bytes per point (docs/schedules.md), and
# the object must stay far below etcd's 1.5 MiB whatever the template's matrix.
MAX_HISTORY = 100
# Runs (experiments) kept: each holds every trial's Result, up to ~400 KiB.
MAX_RUNS_KEPT = 20
MAX_DEADLINE_SECONDS = 2**31 - 1
MAX_BASELINE_RUNS = 30


def _check_schedule(text: str) -> str:
    try:
        parse_schedule(text)
    except CronError as error:
        raise ValueError(str(error)) from None
    return text


def _check_time_zone(name: str) -> str:
    try:
        time_zone(name)
    except CronError as error:
        raise ValueError(str(error)) from None
    return name


Cron = Annotated[
    str,
    Field(strict=True, min_length=1, max_length=SCHEDULE_MAX_LENGTH, pattern=CRON_PATTERN),
    AfterValidator(_check_schedule),
]
# The apiserver cannot look up the time-zone database: an unknown zone is a status condition.
TimeZone = Annotated[
    str,
    Field(
        strict=True, min_length=1, max_length=TIME_ZONE_MAX_LENGTH, pattern=r"^[A-Za-z0-9_+/-]+$"
    ),
    AfterValidator(_check_time_zone),
]
RunName = Annotated[str, Field(strict=True, max_length=40, pattern=NAME_PATTERN)]


class RegressionPolicy(Strict):
    """How the newest run is compared with the runs before it (cxlab.schedules.regression)."""

    min_relative_change: Annotated[float, Field(strict=True, gt=0, le=10)] = 0.10
    """The smallest change, as a fraction of the baseline's median, that can count as a
    regression (0.10: 10 % slower, 10 % less throughput)."""
    significance: Annotated[float, Field(strict=True, gt=0, lt=0.5)] = 0.01
    """The false discovery rate of a run's findings: the largest p-value, adjusted
    (Benjamini-Yekutieli) over every point and metric of the run, that counts (so about this
    share of unchanged runs raise any alarm, at most)."""
    baseline_runs: Annotated[int, between(1, MAX_BASELINE_RUNS)] = 5
    """How many succeeded runs before the newest one form its baseline."""
    acknowledged_run: RunName | None = None
    """A run accepted as the new normal (a known change): the baseline never reaches back
    past it, so the Regressed condition it raised clears."""


class ExperimentTemplate(Strict):
    """The experiment every run creates."""

    spec: ExperimentSpec
    """A full ConcurrencyExperiment spec."""


class ScheduleSpec(Strict):
    schedule: Cron
    """When runs fire: 5-field cron (minute hour day-of-month month day-of-week), a macro
    (@hourly, @daily, ...), or @every <duration> (at least 10s) counted from the schedule's
    creation."""
    time_zone: TimeZone | None = None
    """An IANA time zone for the cron fields (e.g. Europe/Berlin); UTC when unset."""
    suspend: bool = False
    """Start no new runs; runs going on are not stopped."""
    concurrency_policy: Literal["Forbid", "Replace"] = "Forbid"
    """When a slot comes while a run is going: Forbid skips the slot (counted in
    status.skippedRuns), since two runs would share the pinned cores; Replace stops the run
    going and starts the new one."""
    starting_deadline_seconds: Annotated[int, between(1, MAX_DEADLINE_SECONDS)] | None = None
    """A slot not started within this many seconds (the operator was down) is missed, and
    counted in status.missedRuns; unset: the latest missed slot starts however late."""
    successful_runs_history_limit: Annotated[int, between(0, MAX_RUNS_KEPT)] = 3
    """Succeeded runs (experiments) kept; older ones are deleted once their history entry is
    written."""
    failed_runs_history_limit: Annotated[int, between(0, MAX_RUNS_KEPT)] = 1
    """Failed runs (experiments) kept."""
    history_limit: Annotated[int, between(1, MAX_HISTORY)] = 30
    """Entries in status.history (one compact entry per run), oldest dropped first."""
    regression: RegressionPolicy = RegressionPolicy()
    """How each run is compared with the ones before it."""
    experiment_template: ExperimentTemplate
    """The experiment each run creates."""

    @model_validator(mode="after")
    def _rules(self) -> ScheduleSpec:
        if self.experiment_template.spec.ttl_seconds_after_finished is not None:
            raise ValueError(
                "experimentTemplate.spec.ttlSecondsAfterFinished: runs are deleted by "
                "successfulRunsHistoryLimit and failedRunsHistoryLimit, after their history "
                "entry is written; leave it out"
            )
        return self

    def timing(self) -> tuple[Schedule, ZoneInfo]:
        """The parsed schedule and its zone (both valid once the spec is)."""
        return parse_schedule(self.schedule), time_zone(self.time_zone)


class ScheduleMetadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: Annotated[
        str, Field(strict=True, max_length=SCHEDULE_NAME_MAX_LENGTH, pattern=NAME_PATTERN)
    ]
    namespace: str | None = None
    creation_timestamp: datetime | None = Field(default=None, alias="creationTimestamp")


class ExperimentSchedule(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    api_version: Literal["cxlab.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["ExperimentSchedule"]
    metadata: ScheduleMetadata
    spec: ScheduleSpec


def parse_experiment_schedule(document: Any) -> ExperimentSchedule:
    """Validate a schedule document; SpecError lists every broken rule, field first."""
    if not isinstance(document, dict) or document.get("kind") != SCHEDULE_KIND:
        raise SpecError([f"document: is not an {SCHEDULE_KIND} ({API_VERSION})"])
    try:
        return ExperimentSchedule.model_validate(document)
    except ValidationError as error:
        lines = [line for e in error.errors() for line in describe(e)]
        problems = [line.replace(f"of {KIND}", f"of {SCHEDULE_KIND}") for line in lines]
        raise SpecError(problems) from None
