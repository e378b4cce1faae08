"""When an ExperimentSchedule fires: its ``spec.schedule`` parsed the way a Kubernetes CronJob
user writes it, and its fire times ("slots") computed from the resource alone, so a restarted
operator finds the same slots.

The fields are read as CronJob reads them, with github.com/robfig/cron/v3's standard parser
(tests/schedules/test_cron_robfig.py compares the two on hundreds of schedules). Its day rule: a
day field is unrestricted only when one of its items is ``*`` or ``?`` with no step (or step 1);
when both day fields are restricted, a day matches if either does (``0 0 */2 * 1``: odd days and
Mondays). ``sun`` is 0, so a range ending in it (``fri-sun``) runs backwards and is refused.
Where cxlab differs on purpose (listed in docs/schedules.md): ``7`` is Sunday too, a schedule
that never fires is refused, a wall time the clocks repeat is one slot (below), and slots follow
the wall clock where it moves by part of an hour.

Five fields (minute hour day-of-month month day-of-week) are matched against the wall clock of
``spec.timeZone``. Two rules make that clock a function of time:

- A wall time that does not exist (skipped when clocks spring forward) is not a slot: a
  "30 2 * * *" in Europe/Berlin does not fire on the day 02:30 is skipped.
- A wall time that happens twice (when clocks fall back) is a slot once, at its first
  occurrence (fold=0): the same schedule fires once on that day, before the clocks go back,
  and a "*/15 * * * *" pauses for the repeated hour.

``@every <duration>`` slots ignore the time zone: they are anchor + k * interval (k ≥ 1), the
anchor being the schedule's creation time, so they do not drift with reconcile passes.
"""

from __future__ import annotations

import bisect
import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cxlab_contract.durations import DURATION_PATTERN, parse_duration

# Below 10 s the operator's 1 s reconcile pass and Pod start-up dominate, and runs overlap.
MIN_EVERY: str = "10s"
MAX_EVERY: str = "8760h"  # a year, as the longest cron period

_SPACE = "[ \t]"
_TOKEN = "[0-9A-Za-z*?,/-]+"
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# The shape of a schedule, for the CRD's OpenAPI pattern: RE2 (the apiserver's Go regexp), so no
# lookarounds or backreferences. Values and ranges are checked by parse_schedule.
CRON_PATTERN: str = (
    rf"^{_SPACE}*(?:{_TOKEN}(?:{_SPACE}+{_TOKEN}){{4}}"
    rf"|@(?:{'|'.join(name[1:] for name in _MACROS)})"
    rf"|@every{_SPACE}+{DURATION_PATTERN.removeprefix('^').removesuffix('$')}){_SPACE}*$"
)

_DIGITS = re.compile("[0-9]+")
# robfig/cron reads a step with strconv.Atoi: a larger one is refused there, so here too.
_MAX_STEP = 2**63 - 1
_FIVE = "use 5 (minute hour day-of-month month day-of-week) or @every 30s / @hourly"
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # the most each month has
# 400 years repeat the Gregorian calendar, so a schedule with no slot in them has none at all.
_SEARCH_YEARS = 401
_MINUTE = timedelta(minutes=1)
_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)


class CronError(ValueError):
    """A schedule or time zone that cannot be used; the message says what to write instead."""


@dataclass(frozen=True)
class _Field:
    number: int
    name: str
    low: int
    high: int
    top: int  # where * and a/n end: below high for day-of-week, so */2 does not add 7 (Sunday)
    names: tuple[str, ...] = ()  # names[i] stands for low + i

    def where(self) -> str:
        return f"field {self.number} ({self.name})"


_FIELDS = (
    _Field(1, "minute", 0, 59, 59),
    _Field(2, "hour", 0, 23, 23),
    _Field(3, "day-of-month", 1, 31, 31),
    _Field(4, "month", 1, 12, 12, _MONTHS),
    _Field(5, "day-of-week", 0, 7, 6, _WEEKDAYS),  # 7 is Sunday too
)


@dataclass(frozen=True)
class Slots:
    """The slots in (since, until]."""

    latest: datetime | None  # the most recent slot <= until; None when there is none after since
    count: int  # exact unless truncated
    truncated: bool  # counting stopped at the limit: count is then a lower bound


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule. For five fields, each set is sorted; empty for @every."""

    text: str
    every_seconds: float | None  # the interval of @every, whole seconds; None for cron fields
    minutes: tuple[int, ...] = ()
    hours: tuple[int, ...] = ()
    days: tuple[int, ...] = ()  # of the month
    months: tuple[int, ...] = ()
    weekdays: tuple[int, ...] = ()  # 0 is Sunday
    either_day: bool = False  # both day fields restricted: a day matches when either does

    def next_after(self, moment: datetime, zone: zoneinfo.ZoneInfo, anchor: datetime) -> datetime:
        """The first slot strictly after moment, in UTC; anchor is used only by @every."""
        _require_aware(moment, anchor)
        if self.every_seconds is not None:
            interval = int(self.every_seconds)
            start = _whole_seconds(anchor)
            return start + timedelta(seconds=interval * (_slots_until(moment, start, interval) + 1))
        wall = moment.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0) + _MINUTE
        return self._forward(wall, moment, zone)

    def slots(
        self,
        since: datetime,
        until: datetime,
        zone: zoneinfo.ZoneInfo,
        anchor: datetime,
        limit: int = 1000,
    ) -> Slots:
        """The slots s with since < s <= until, counted up to limit (@every counts them all)."""
        _require_aware(since, until, anchor)
        if limit < 0:
            raise ValueError(f"limit is {limit}; it cannot be negative")
        if until <= since:
            return Slots(latest=None, count=0, truncated=False)
        if self.every_seconds is not None:
            return _every_slots(since, until, anchor, int(self.every_seconds))
        count = 0
        latest: datetime | None = None
        slot = self.next_after(since, zone, anchor)
        while slot <= until:
            if count == limit:
                return Slots(self._last_at_or_before(until, zone), count=count, truncated=True)
            count += 1
            latest = slot
            slot = self.next_after(slot, zone, anchor)
        return Slots(latest=latest, count=count, truncated=False)

    def _day_matches(self, wall: datetime) -> bool:
        in_month = wall.day in self.days
        in_week = wall.isoweekday() % 7 in self.weekdays
        return (in_month or in_week) if self.either_day else (in_month and in_week)

    def _forward(self, wall: datetime, moment: datetime, zone: zoneinfo.ZoneInfo) -> datetime:
        """The first slot after moment, searching local wall times from wall on: jump to the
        next month, day, hour or minute that can match, as robfig/cron does."""
        last_year = min(wall.year + _SEARCH_YEARS, 9998)
        while wall.year <= last_year:
            if wall.month not in self.months:
                wall = (wall.replace(day=28, hour=0, minute=0) + 4 * _DAY).replace(day=1)
                continue
            if not self._day_matches(wall):
                wall = wall.replace(hour=0, minute=0) + _DAY
                continue
            hour = _at_or_after(self.hours, wall.hour)
            if hour is None:
                wall = wall.replace(hour=0, minute=0) + _DAY
                continue
            if hour != wall.hour:
                wall = wall.replace(hour=hour, minute=0)
            minute = _at_or_after(self.minutes, wall.minute)
            if minute is None:
                wall = wall.replace(minute=0) + _HOUR
                continue
            wall = wall.replace(minute=minute)
            slot = _to_utc(wall, zone)
            # after a fall-back the first occurrence of wall may lie before moment
            if slot is not None and slot > moment:
                return slot
            wall += _MINUTE
        raise CronError(f"{self.text!r} never fires, e.g. 30 February")

    def _last_at_or_before(self, until: datetime, zone: zoneinfo.ZoneInfo) -> datetime:
        """The most recent slot at or before until: the forward search, mirrored."""
        local = until.astimezone(zone)
        # In a repeated hour, a later wall time's first occurrence may still be before until:
        # start from the wall time that the first occurrence would show at until.
        repeat = until.astimezone(UTC) - local.replace(fold=0)
        wall = local.replace(tzinfo=None, second=0, microsecond=0) + repeat
        first_year = max(wall.year - _SEARCH_YEARS, 2)
        while wall.year >= first_year:
            if wall.month not in self.months:
                wall = wall.replace(day=1, hour=0, minute=0) - _MINUTE
                continue
            if not self._day_matches(wall):
                wall = wall.replace(hour=0, minute=0) - _MINUTE
                continue
            hour = _at_or_before(self.hours, wall.hour)
            if hour is None:
                wall = wall.replace(hour=0, minute=0) - _MINUTE
                continue
            if hour != wall.hour:
                wall = wall.replace(hour=hour, minute=59)
            minute = _at_or_before(self.minutes, wall.minute)
            if minute is None:
                wall = wall.replace(minute=0) - _MINUTE
                continue
            wall = wall.replace(minute=minute)
            slot = _to_utc(wall, zone)
            if slot is not None and slot <= until:
                return slot
            wall -= _MINUTE
        raise CronError(f"{self.text!r} never fires, e.g. 30 February")


def parse_schedule(text: str) -> Schedule:
    """The schedule in text; CronError says what is wrong and what to write."""
    spec = text.strip(" \t")
    if not spec:
        raise CronError(f"is empty; {_FIVE}")
    if re.match(r"(CRON_)?TZ=", spec):
        raise CronError(
            f"{text!r} names a time zone; CRON_TZ= and TZ= are not supported here: "
            "put the zone in spec.timeZone (like timeZone: Europe/Berlin) and leave it out"
        )
    words = re.split(f"{_SPACE}+", spec)
    if spec.startswith("@"):
        return _parse_macro(text, words)
    if len(words) != 5:
        many = "field" if len(words) == 1 else "fields"
        raise CronError(f"{text!r} has {len(words)} {many}; {_FIVE}")
    return _parse_fields(text, words)


def time_zone(name: str | None) -> zoneinfo.ZoneInfo:
    """The IANA time zone named; UTC when no name is given."""
    if not name:
        return zoneinfo.ZoneInfo("UTC")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        # OSError: a directory of the database, like "Europe"
        raise CronError(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC"
        ) from None


def _parse_macro(text: str, words: list[str]) -> Schedule:
    macro = words[0]
    if macro == "@every":
        return Schedule(text=text, every_seconds=_every_seconds(" ".join(words[1:])))
    if macro not in _MACROS:
        raise CronError(
            f"unknown macro {macro!r}: use @yearly, @monthly, @weekly, @daily, @hourly "
            "or @every <duration>, like @every 30s"
        )
    if len(words) > 1:
        raise CronError(f"{text!r}: {macro} stands alone; write just {macro}")
    return _parse_fields(text, _MACROS[macro].split())


def _every_seconds(duration: str) -> float:
    if not duration:
        raise CronError("@every needs a duration, like @every 30s or @every 1h30m")
    try:
        seconds = parse_duration(duration)
    except ValueError as error:
        raise CronError(f"@every {error}") from None
    shortest, longest = parse_duration(MIN_EVERY), parse_duration(MAX_EVERY)
    if seconds < shortest:
        raise CronError(
            f"@every {duration} is too often: use at least @every {MIN_EVERY}, since each run "
            "needs its Pod started and finished before the next"
        )
    if seconds > longest:
        raise CronError(f"@every {duration} is too long: use at most @every {MAX_EVERY} (a year)")
    micros = round(seconds * 1_000_000)
    if micros % 1_000_000:
        raise CronError(f"@every {duration}: use whole seconds, like @every 10s or @every 1m30s")
    return float(micros // 1_000_000)


def _parse_fields(text: str, words: list[str]) -> Schedule:
    (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = (
        _parse_field(word, field) for word, field in zip(words, _FIELDS, strict=True)
    )
    weekdays = {0 if day == 7 else day for day in weekdays}
    # The cron day rule: only when both day fields are restricted does either one suffice.
    either_day = not any_day and not any_weekday
    if not either_day and not any(
        day <= _MONTH_DAYS[month - 1] for day in days for month in months
    ):
        # Any date that exists falls on each weekday within 400 years: only this never fires.
        names = ", ".join(_MONTHS[month - 1].capitalize() for month in sorted(months))
        listed = " or ".join(str(day) for day in sorted(days))
        raise CronError(
            f"{text!r} never fires: {names} {'has' if len(months) == 1 else 'have'} no day {listed}"
        )
    return Schedule(
        text=text,
        every_seconds=None,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=tuple(sorted(days)),
        months=tuple(sorted(months)),
        weekdays=tuple(sorted(weekdays)),
        either_day=either_day,
    )


def _parse_field(word: str, field: _Field) -> tuple[set[int], bool]:
    """The field's values, and whether it is unrestricted: robfig/cron sets its star bit for an
    item * or ? without a step above 1, whatever the other items ("5,*" is "*", "*/2" is not)."""
    values: set[int] = set()
    unrestricted = False
    for item in word.split(","):
        if not item:
            raise CronError(
                f"{field.where()}: {word!r} has an empty item; separate values by one ,"
            )
        span = _parse_item(item, field)
        values.update(span)
        unrestricted |= item.partition("/")[0] in ("*", "?") and span.step == 1
    return values, unrestricted


def _parse_item(item: str, field: _Field) -> range:
    """One item of a list: *, ?, a, a-b, each optionally /step."""
    span, slash, step_text = item.partition("/")
    if "/" in step_text:
        raise CronError(f"{field.where()}: {item!r} has more than one /; write like */15 or 0-30/5")
    step = 1
    if slash:
        if not _DIGITS.fullmatch(step_text):
            raise CronError(
                f"{field.where()}: the step in {item!r} is not a number; write like */15"
            )
        step = int(step_text)
        if step < 1:
            raise CronError(f"{field.where()}: the step in {item!r} is 0; use 1 or more")
        if step > _MAX_STEP:
            raise CronError(
                f"{field.where()}: the step in {item!r} is too large; "
                f"use 1 to {field.top - field.low + 1}"
            )
    if span in ("*", "?"):
        return range(field.low, field.top + 1, step)
    start_text, dash, end_text = span.partition("-")
    if "-" in end_text:
        raise CronError(f"{field.where()}: {item!r} has more than one -; write a range like 1-5")
    start = _value(start_text, item, field)
    if dash:
        end = _value(end_text, item, field)
        if start > end:
            late = str(start) if start >= field.top else f"{start}-{field.top}"
            early = str(end) if end == field.low else f"{field.low}-{end}"
            # sun is 0, as in robfig/cron, which refuses "fri-sun" ("beyond end of range")
            sunday = " (sun is 0)" if field.names == _WEEKDAYS and end == 0 else ""
            raise CronError(f"{field.where()}: {span} runs backwards{sunday}; write {late},{early}")
    else:
        end = max(start, field.top) if slash else start  # "a/n" runs from a to the field's end
    return range(start, end + 1, step)


def _value(text: str, item: str, field: _Field) -> int:
    where = field.where() if text == item else f"{field.where()}: in {item!r}"
    if _DIGITS.fullmatch(text):
        value = int(text)
        if not field.low <= value <= field.high:
            raise CronError(f"{where}: {value} is out of range {field.low}-{field.high}")
        return value
    if text.lower() in field.names:
        return field.low + field.names.index(text.lower())
    if field.names:
        raise CronError(
            f"{where}: {text!r} is not a {field.name}; use "
            f"{field.low}-{field.high} or {field.names[0]}-{field.names[-1]}"
        )
    raise CronError(f"{where}: {text!r} is not a number from {field.low} to {field.high}")


def _at_or_after(values: tuple[int, ...], value: int) -> int | None:
    index = bisect.bisect_left(values, value)
    return values[index] if index < len(values) else None


def _at_or_before(values: tuple[int, ...], value: int) -> int | None:
    index = bisect.bisect_right(values, value)
    return values[index - 1] if index else None


def _to_utc(wall: datetime, zone: zoneinfo.ZoneInfo) -> datetime | None:
    """The first instant the zone's clock shows wall; None when the clock skips it."""
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    return instant if instant.astimezone(zone).replace(tzinfo=None) == wall else None


def _whole_seconds(anchor: datetime) -> datetime:
    return anchor.astimezone(UTC).replace(microsecond=0)


def _every_slots(since: datetime, until: datetime, anchor: datetime, interval: int) -> Slots:
    """@every slots counted arithmetically: a year of @every 10s is 3 million of them."""
    start = _whole_seconds(anchor)
    last = _slots_until(until, start, interval)
    count = last - _slots_until(since, start, interval)
    latest = start + timedelta(seconds=interval * last) if count else None
    return Slots(latest=latest, count=count, truncated=False)


def _slots_until(moment: datetime, anchor: datetime, interval: int) -> int:
    """How many @every slots anchor + k * interval (k ≥ 1) are at or before moment."""
    elapsed = moment - anchor
    micros = (elapsed.days * 86_400 + elapsed.seconds) * 1_000_000 + elapsed.microseconds
    return max(0, micros // (interval * 1_000_000))


def _require_aware(*moments: datetime) -> None:
    for moment in moments:
        if moment.utcoffset() is None:
            raise ValueError(f"{moment.isoformat()} has no time zone; pass an aware datetime")
