"""The ExperimentSchedule resource as typed models: a ConcurrencyExperiment spec re-run on a
schedule, with CronJob's conventions (schedule, timeZone, suspend, concurrencyPolicy,
startingDeadlineSeconds, history limits), how its runs are compared (regression) and how many
of them it keeps. Shared by the operator and the CRD generator, as cxlab.experiments.spec is for
experiments; the CRD repeats what the apiserver can check."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal
from zoneinfo import ZoneInfo

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from cxlab.experiments.fields import (
    NAME_PATTERN,
    RelativeChange,
    Significance,
    SpecError,
    Strict,
    between,
    describe,
    name_rules,
)
from cxlab.experiments.spec import API_VERSION, EXAMPLE, KIND, ExperimentSpec
from cxlab.rules import Check, Rule, check_rules
from cxlab.schedules.cron import CRON_PATTERN, CronError, Schedule, parse_schedule, time_zone

SCHEDULE_KIND = "ExperimentSchedule"
# The smallest schedule: its rules' examples set some of its fields and keep the rest.
SCHEDULE_EXAMPLE = {"schedule": "@daily", "experimentTemplate": {"spec": EXAMPLE}}
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


# The calendar parser says what is wrong in words; the apiserver checks the shape with CEL,
# whose message says it in words too (a pattern's error would show the regular expression).
_TIME_ZONE_PREFIX = r"^[ \t]*(CRON_)?TZ="
_CRON_RE2 = CRON_PATTERN.replace("\t", "\\t")  # a tab written as \t in the CRD
Cron = Annotated[
    str,
    Field(strict=True, min_length=1, max_length=SCHEDULE_MAX_LENGTH),
    AfterValidator(_check_schedule),
    Check(
        "names a time zone: CRON_TZ= and TZ= are not supported here (as in a CronJob): put the "
        "zone in spec.timeZone (like timeZone: Europe/Berlin) and leave it out",
        holds=lambda text: re.match(_TIME_ZONE_PREFIX, text) is None,
        cel=f"!self.matches(r'{_TIME_ZONE_PREFIX}')",
        valid="0 3 * * *",
        invalid="CRON_TZ=UTC 0 3 * * *",
    ),
    Check(
        "must be 5 fields (minute hour day-of-month month day-of-week), a macro (@hourly, "
        "@daily, @weekly, @monthly, @yearly) or @every <duration>, like @every 30s",
        holds=lambda text: re.match(CRON_PATTERN, text) is not None,
        cel=f"self.matches(r'{_TIME_ZONE_PREFIX}') || self.matches(r'{_CRON_RE2}')",
        valid="@every 30s",
        invalid="0 0 3 * * *",
    ),
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

    min_relative_change: RelativeChange = 0.10
    """The smallest change, as a fraction of the baseline's median, that can count as a
    regression (0.10: 10 % slower, 10 % less throughput)."""
    significance: Significance = 0.01
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

    rules = (
        Rule(
            "experimentTemplate.spec.ttlSecondsAfterFinished: runs are deleted by the history "
            "limits (successfulRunsHistoryLimit, failedRunsHistoryLimit), after their history "
            "entry is written; leave it out",
            holds=lambda s: s.experiment_template.spec.ttl_seconds_after_finished is None,
            cel="!has(self.experimentTemplate.spec.ttlSecondsAfterFinished)",
            valid={"experimentTemplate": {"spec": {**EXAMPLE, "keepPodsOnFailure": True}}},
            invalid={"experimentTemplate": {"spec": {**EXAMPLE, "ttlSecondsAfterFinished": 60}}},
        ),
    )

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

    # The CRD's rules on the schedule's name; cxlab checks it with ScheduleMetadata's bounds.
    rules: ClassVar[tuple[Rule, ...]] = name_rules(
        SCHEDULE_NAME_MAX_LENGTH,
        "a run is named <schedule>-<unix seconds of its slot>, and trial Pods after the run",
    )

    @model_validator(mode="after")
    def _rules_hold(self) -> ExperimentSchedule:
        check_rules(self)
        return self


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
