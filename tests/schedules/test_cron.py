"""Schedules: every syntax a CronJob user writes, the refusals and their messages, and the slots
across month ends, leap years, time zones and both DST transitions."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cxlab.schedules.cron import (
    CRON_PATTERN,
    CronError,
    Schedule,
    parse_schedule,
    time_zone,
)

BERLIN = ZoneInfo("Europe/Berlin")
ZONE_UTC = ZoneInfo("UTC")
ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)  # for cron schedules, which ignore it

VALID = [
    "0 3 * * *",
    "*/15 0-6/2 1,15 jan-mar MON-Fri",
    "5/20 ? * * ?",
    "1,5-7,*/30 * * * *",
    "0 0 * * 7",
    "0 0 13 * 5",
    "  0 0 * * *\t",
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@every 10s",
    "@every 1h30m",
    "@every  8760h",
    "@every 10000ms",
]


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def fires(text: str, after: datetime, times: int = 1, zone: ZoneInfo = ZONE_UTC) -> list[str]:
    """The next slots of text after `after`, as UTC ISO strings."""
    schedule = parse_schedule(text)
    found = []
    for _ in range(times):
        after = schedule.next_after(after, zone, ANCHOR)
        found.append(after.isoformat())
    return found


@pytest.mark.parametrize(
    ("text", "field", "values"),
    [
        ("*/15 * * * *", "minutes", (0, 15, 30, 45)),
        ("10-30/10 * * * *", "minutes", (10, 20, 30)),
        ("5/20 * * * *", "minutes", (5, 25, 45)),
        ("1,5-7,*/30 * * * *", "minutes", (0, 1, 5, 6, 7, 30)),
        ("0 ? * * *", "hours", tuple(range(24))),
        ("0 0-6/2 * * *", "hours", (0, 2, 4, 6)),
        ("0 0 1,15 * *", "days", (1, 15)),
        ("0 0 * JAN,jul *", "months", (1, 7)),
        ("0 0 * jan-mar *", "months", (1, 2, 3)),
        ("0 0 * * MON-fri", "weekdays", (1, 2, 3, 4, 5)),
        ("0 0 * * 7", "weekdays", (0,)),
        ("0 0 * * 5-7", "weekdays", (0, 5, 6)),
        ("0 0 * * sun-sun", "weekdays", (0,)),  # sun is 0, as in robfig/cron
        ("0 0 * * 0-sun", "weekdays", (0,)),
        ("0 0 * * sun-sat", "weekdays", tuple(range(7))),
        ("0 0 * * */2", "weekdays", (0, 2, 4, 6)),
        ("0 0 * * 1/2", "weekdays", (1, 3, 5)),
        ("0 0 * * ?", "weekdays", tuple(range(7))),
    ],
)
def test_parses_each_syntax_form(text: str, field: str, values: tuple[int, ...]) -> None:
    assert getattr(parse_schedule(text), field) == values


@pytest.mark.parametrize(
    ("text", "either_day"),
    [
        ("0 0 13 * 5", True),
        ("0 0 13 * *", False),
        ("0 0 ? * 5", False),
        # as robfig/cron's star bit: a * or ? item without a step above 1, anywhere in the list
        ("0 0 */2 * 5", True),
        ("0 0 ?/3 * 5", True),
        ("0 0 13 * */2", True),
        ("0 0 */1 * 5", False),
        ("0 0 5,* * 5", False),
        ("0 0 *,5 * 5", False),
        ("0 0 13 * 1,?", False),
    ],
)
def test_either_day_only_when_both_day_fields_are_restricted(text: str, either_day: bool) -> None:
    assert parse_schedule(text).either_day is either_day


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_macros_are_their_fields(macro: str, fields: str) -> None:
    parsed = parse_schedule(macro)
    assert parsed.text == macro
    assert dataclasses.replace(parsed, text=fields) == parse_schedule(fields)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("@every 10s", 10.0), ("@every 1h30m", 5400.0), ("@every 10000ms", 10.0)],
)
def test_every_is_whole_seconds(text: str, seconds: float) -> None:
    parsed = parse_schedule(text)
    assert parsed.every_seconds == seconds
    assert parsed.minutes == ()


def test_every_allows_a_year() -> None:
    assert parse_schedule("@every 8760h").every_seconds == 365 * 86400


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"is empty; use 5 \(minute hour day-of-month month day-of-week\)"),
        ("0 0 * * * *", r"has 6 fields; use 5 \(minute hour day-of-month month day-of-week\) or"),
        ("* * * *", "has 4 fields"),
        ("daily", "has 1 field;"),
        ("60 * * * *", r"field 1 \(minute\): 60 is out of range 0-59"),
        ("0 25 * * *", r"field 2 \(hour\): 25 is out of range 0-23"),
        ("0 0 0 * *", r"field 3 \(day-of-month\): 0 is out of range 1-31"),
        ("0 0 * 13 *", r"field 4 \(month\): 13 is out of range 1-12"),
        ("0 0 * * 8", r"field 5 \(day-of-week\): 8 is out of range 0-7"),
        ("0 1-30 * * *", r"field 2 \(hour\): in '1-30': 30 is out of range 0-23"),
        ("x * * * *", r"field 1 \(minute\): 'x' is not a number from 0 to 59"),
        ("0 0 * foo *", r"field 4 \(month\): 'foo' is not a month; use 1-12 or jan-dec"),
        ("0 0 * * mon-xyz", r"field 5 \(day-of-week\): in 'mon-xyz': 'xyz' is not a day-of-week"),
        ("jan * * * *", r"field 1 \(minute\): 'jan' is not a number"),
        ("0 22-2 * * *", r"field 2 \(hour\): 22-2 runs backwards; write 22-23,0-2"),
        ("0 0 * * sat-mon", r"field 5 \(day-of-week\): sat-mon runs backwards; write 6,0-1"),
        # robfig/cron: "beginning of range (1) beyond end of range (0): mon-sun"
        (
            "0 0 * * mon-sun",
            r"field 5 \(day-of-week\): mon-sun runs backwards \(sun is 0\); write 1-6,0",
        ),
        (
            "0 0 * * FRI-Sun",
            r"field 5 \(day-of-week\): FRI-Sun runs backwards \(sun is 0\); write 5-6,0",
        ),
        ("0 0 * * sat-0", r"field 5 \(day-of-week\): sat-0 runs backwards \(sun is 0\); write 6,0"),
        (
            "*/9223372036854775808 * * * *",
            r"field 1 \(minute\): the step in .* is too large; use 1 to 60",
        ),
        ("*/0 * * * *", r"field 1 \(minute\): the step in '\*/0' is 0; use 1 or more"),
        ("*/x * * * *", r"field 1 \(minute\): the step in '\*/x' is not a number"),
        ("*/2/3 * * * *", r"field 1 \(minute\): '\*/2/3' has more than one /"),
        ("1-2-3 * * * *", r"field 1 \(minute\): '1-2-3' has more than one -"),
        ("1,,2 * * * *", r"field 1 \(minute\): '1,,2' has an empty item"),
        ("*-5 * * * *", r"field 1 \(minute\): in '\*-5': '\*' is not a number"),
        ("0 0 30 2 *", "never fires: Feb has no day 30"),
        ("0 0 31 4,6 *", "never fires: Apr, Jun have no day 31"),
        ("@often", "unknown macro '@often': use @yearly, .* or @every <duration>"),
        ("@Daily", "unknown macro '@Daily'"),
        ("@daily 5", "@daily stands alone; write just @daily"),
        ("@every", "@every needs a duration, like @every 30s"),
        ("@every 5 minutes", "@every '5 minutes' is not a duration"),
        ("@every 5s", "@every 5s is too often: use at least @every 10s"),
        ("@every 8761h", "@every 8761h is too long: use at most @every 8760h"),
        ("@every 10.5s", "@every 10.5s: use whole seconds"),
        ("CRON_TZ=Europe/Berlin 0 9 * * *", "CRON_TZ= and TZ= are not supported.*spec.timeZone"),
        ("TZ=UTC @daily", "put the zone in spec.timeZone"),
    ],
)
def test_refuses_with_what_to_write(text: str, message: str) -> None:
    with pytest.raises(CronError, match=message) as caught:
        parse_schedule(text)
    assert "schedule:" not in str(caught.value)  # the caller prefixes the field's path


def test_restricted_day_fields_never_fire_only_with_a_star() -> None:
    # */2 restricts day-of-week: 31 February does not exist, but Sundays, Tuesdays, Thursdays
    # and Saturdays of February do (1 February 2027 is a Monday)
    assert fires("0 0 31 2 */2", utc(2026, 3, 1), 2) == [
        "2027-02-02T00:00:00+00:00",
        "2027-02-04T00:00:00+00:00",
    ]
    with pytest.raises(CronError, match="never fires"):
        parse_schedule("0 0 31 2 *")


def test_never_firing_fields_raise_when_searched() -> None:
    never = Schedule(
        text="0 0 30 2 *",
        every_seconds=None,
        minutes=(0,),
        hours=(0,),
        days=(30,),
        months=(2,),
        weekdays=tuple(range(7)),
    )
    with pytest.raises(CronError, match=r"never fires, e\.g\. 30 February"):
        never.next_after(utc(2026, 1, 1), ZONE_UTC, ANCHOR)


def test_time_zone() -> None:
    assert time_zone(None).key == "UTC"
    assert time_zone("").key == "UTC"
    assert time_zone("Europe/Berlin").key == "Europe/Berlin"
    for name in ("Mars/Base", "Europe", "../etc/passwd", "/etc/localtime"):
        with pytest.raises(CronError, match=f"unknown time zone '{name}': use an IANA name such"):
            time_zone(name)


def test_next_is_strictly_after() -> None:
    assert fires("0 * * * *", utc(2026, 5, 1, 10)) == ["2026-05-01T11:00:00+00:00"]
    assert fires("* * * * *", utc(2026, 5, 1, 10, 0, 30)) == ["2026-05-01T10:01:00+00:00"]


def test_next_crosses_month_and_year_ends() -> None:
    assert fires("0 0 31 * *", utc(2026, 4, 1), 2) == [
        "2026-05-31T00:00:00+00:00",
        "2026-07-31T00:00:00+00:00",
    ]
    assert fires("59 23 1 * *", utc(2026, 12, 15)) == ["2027-01-01T23:59:00+00:00"]


def test_leap_day() -> None:
    assert fires("0 0 29 2 *", utc(2027, 1, 1)) == ["2028-02-29T00:00:00+00:00"]


def test_either_day_field_matches_when_both_are_restricted() -> None:
    # the 13th or a Friday; April 2026 starts on a Wednesday, the 13th is a Monday
    assert fires("0 0 13 * 5", utc(2026, 4, 1), 4) == [
        "2026-04-03T00:00:00+00:00",
        "2026-04-10T00:00:00+00:00",
        "2026-04-13T00:00:00+00:00",
        "2026-04-17T00:00:00+00:00",
    ]


def test_a_stepped_star_restricts_its_day_field() -> None:
    # robfig/cron clears the star bit of */2: odd days or Mondays (6 April 2026 is a Monday)
    assert fires("0 0 */2 * 1", utc(2026, 4, 1), 5) == [
        "2026-04-03T00:00:00+00:00",
        "2026-04-05T00:00:00+00:00",
        "2026-04-06T00:00:00+00:00",
        "2026-04-07T00:00:00+00:00",
        "2026-04-09T00:00:00+00:00",
    ]


def test_a_star_in_a_list_leaves_its_day_field_unrestricted() -> None:
    # 5,* is every day, and unrestricted: Mondays only, not every day (nor the 5th, a Sunday)
    assert fires("0 0 5,* * 1", utc(2026, 4, 1), 3) == [
        "2026-04-06T00:00:00+00:00",
        "2026-04-13T00:00:00+00:00",
        "2026-04-20T00:00:00+00:00",
    ]


def test_ranges_ending_in_sunday_are_robfigs() -> None:
    # sun is 0: sun-sun and 0-sun are Sundays only (5 April 2026), not the whole week
    assert fires("0 12 * * sun-sun", utc(2026, 4, 1), 2) == [
        "2026-04-05T12:00:00+00:00",
        "2026-04-12T12:00:00+00:00",
    ]
    assert fires("0 12 * * 0-SUN", utc(2026, 4, 1)) == ["2026-04-05T12:00:00+00:00"]
    for backwards in ("mon-sun", "fri-sun", "sat-sun/2"):
        with pytest.raises(
            CronError, match=rf"field 5 \(day-of-week\): {backwards.split('/')[0]} runs"
        ):
            parse_schedule(f"0 12 * * {backwards}")


def test_names_steps_and_seven_for_sunday() -> None:
    assert fires("0 0 * * 7", utc(2026, 4, 1)) == ["2026-04-05T00:00:00+00:00"]
    assert fires("0 0 * * SUN", utc(2026, 4, 1)) == ["2026-04-05T00:00:00+00:00"]
    assert fires("30 12 * jul,Dec mon-wed", utc(2026, 4, 1), 2) == [
        "2026-07-01T12:30:00+00:00",  # a Wednesday
        "2026-07-06T12:30:00+00:00",
    ]
    assert fires("5/20 */6 * * *", utc(2026, 4, 1, 1), 4) == [
        "2026-04-01T06:05:00+00:00",
        "2026-04-01T06:25:00+00:00",
        "2026-04-01T06:45:00+00:00",
        "2026-04-01T12:05:00+00:00",
    ]


def test_time_zone_moves_the_slot_in_utc() -> None:
    assert fires("0 9 * * *", utc(2026, 1, 15), zone=BERLIN) == ["2026-01-15T08:00:00+00:00"]
    assert fires("0 9 * * *", utc(2026, 7, 15), zone=BERLIN) == ["2026-07-15T07:00:00+00:00"]


def test_spring_forward_skips_the_missing_wall_time() -> None:
    # Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST, so there is no 02:30
    assert fires("30 2 * * *", utc(2026, 3, 27, 12), 3, BERLIN) == [
        "2026-03-28T01:30:00+00:00",
        "2026-03-30T00:30:00+00:00",
        "2026-03-31T00:30:00+00:00",
    ]


def test_fall_back_fires_once_at_the_first_occurrence() -> None:
    # Berlin, 25 October 2026: 03:00 CEST becomes 02:00 CET, so 02:30 happens twice
    assert fires("30 2 * * *", utc(2026, 10, 24, 12), 2, BERLIN) == [
        "2026-10-25T00:30:00+00:00",
        "2026-10-26T01:30:00+00:00",
    ]
    # from inside the repeated hour, after the first 02:30: not again at the second one
    assert fires("30 2 * * *", utc(2026, 10, 25, 1, 10), 1, BERLIN) == ["2026-10-26T01:30:00+00:00"]


def _brute_force(text: str, since: datetime, until: datetime, zone: ZoneInfo) -> list[datetime]:
    """Every UTC minute whose local time matches the fields and is a first occurrence."""
    schedule = parse_schedule(text)
    found = []
    moment = since.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while moment <= until:
        local = moment.astimezone(zone)
        in_month = local.day in schedule.days
        in_week = local.isoweekday() % 7 in schedule.weekdays
        day = (in_month or in_week) if schedule.either_day else (in_month and in_week)
        if (
            day
            and not local.fold
            and local.minute in schedule.minutes
            and local.hour in schedule.hours
            and local.month in schedule.months
        ):
            found.append(moment)
        moment += timedelta(minutes=1)
    return found


@pytest.mark.parametrize("text", ["*/20 * * * *", "30 2 * * *", "15 1-3 * * 0", "0 0 25 * 1"])
@pytest.mark.parametrize("start", [utc(2026, 3, 26), utc(2026, 10, 23)])
def test_search_agrees_with_checking_every_minute(text: str, start: datetime) -> None:
    until = start + timedelta(days=5)
    schedule = parse_schedule(text)
    found = []
    moment = start
    while (moment := schedule.next_after(moment, BERLIN, ANCHOR)) <= until:
        found.append(moment)
    assert found == _brute_force(text, start, until, BERLIN)
    slots = schedule.slots(start, until, BERLIN, ANCHOR)
    assert (slots.count, slots.latest) == (len(found), found[-1])


def test_every_is_anchored() -> None:
    every = parse_schedule("@every 45s")
    anchor = datetime(2026, 1, 1, 0, 0, 7, 654321, tzinfo=UTC)  # slots at :07 + k x 45 s
    assert every.next_after(anchor, BERLIN, anchor) == utc(2026, 1, 1, 0, 0, 52)
    assert every.next_after(utc(2026, 1, 1, 1), BERLIN, anchor) == utc(2026, 1, 1, 1, 0, 7)
    # on a slot, the next one; before the anchor, the first one; the zone does not matter
    assert every.next_after(utc(2026, 1, 1, 1, 0, 7), BERLIN, anchor) == utc(2026, 1, 1, 1, 0, 52)
    assert every.next_after(utc(2025, 6, 1), ZONE_UTC, anchor) == utc(2026, 1, 1, 0, 0, 52)


def fires_every(every: Schedule, anchor: datetime, after: datetime, times: int) -> list[datetime]:
    found = []
    for _ in range(times):
        after = every.next_after(after, BERLIN, anchor)
        found.append(after)
    return found


def test_every_ignores_daylight_saving() -> None:
    every = parse_schedule("@every 1h")
    anchor = datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN)  # 23:30 UTC the day before
    assert fires_every(every, anchor, utc(2026, 10, 25, 0, 0), 3) == [
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 25, 1, 30),
        utc(2026, 10, 25, 2, 30),
    ]


def test_slots_counts_the_half_open_interval() -> None:
    hourly = parse_schedule("0 * * * *")
    day = hourly.slots(utc(2026, 1, 1), utc(2026, 1, 2), ZONE_UTC, ANCHOR)
    assert (day.count, day.latest, day.truncated) == (24, utc(2026, 1, 2), False)
    inside = hourly.slots(utc(2026, 1, 1, 0, 1), utc(2026, 1, 1, 0, 59), ZONE_UTC, ANCHOR)
    assert (inside.count, inside.latest, inside.truncated) == (0, None, False)
    backwards = hourly.slots(utc(2026, 1, 2), utc(2026, 1, 1), ZONE_UTC, ANCHOR)
    assert (backwards.count, backwards.latest) == (0, None)


def test_slots_stops_counting_at_the_limit_but_finds_the_latest() -> None:
    minutely = parse_schedule("* * * * *")
    until = utc(2026, 1, 2, 0, 0, 30)
    slots = minutely.slots(utc(2026, 1, 1), until, ZONE_UTC, ANCHOR, limit=100)
    assert (slots.count, slots.latest, slots.truncated) == (100, utc(2026, 1, 2), True)
    exact = minutely.slots(utc(2026, 1, 1), utc(2026, 1, 1, 1, 40), ZONE_UTC, ANCHOR, 100)
    assert (exact.count, exact.truncated) == (100, False)


def test_latest_of_a_truncated_count_after_a_fall_back() -> None:
    # until is in the repeated hour, after the first 02:30 (00:30 UTC), before the second
    daily = parse_schedule("30 2 * * *")
    until = utc(2026, 10, 25, 1, 10)
    slots = daily.slots(utc(2026, 1, 1), until, BERLIN, ANCHOR, limit=3)
    assert (slots.latest, slots.truncated) == (utc(2026, 10, 25, 0, 30), True)
    before = daily.slots(utc(2026, 1, 1), utc(2026, 10, 25, 0, 10), BERLIN, ANCHOR, limit=3)
    assert before.latest == utc(2026, 10, 24, 0, 30)


def test_every_slots_are_counted_not_listed() -> None:
    every = parse_schedule("@every 10s")
    anchor = utc(2026, 1, 1)
    decade = every.slots(anchor, utc(2036, 1, 1), BERLIN, anchor, limit=5)
    assert (decade.count, decade.latest, decade.truncated) == (3652 * 8640, utc(2036, 1, 1), False)


def test_every_slots_since_before_the_anchor() -> None:
    hourly = parse_schedule("@every 1h")
    anchor = datetime(2026, 1, 1, 10, 0, 0, 900_000, tzinfo=UTC)
    slots = hourly.slots(utc(2026, 1, 1, 8), utc(2026, 1, 1, 13, 30), BERLIN, anchor)
    assert (slots.count, slots.latest) == (3, utc(2026, 1, 1, 13))
    none_yet = hourly.slots(utc(2026, 1, 1, 8), utc(2026, 1, 1, 10, 59), BERLIN, anchor)
    assert (none_yet.count, none_yet.latest) == (0, None)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="has no time zone"):
        parse_schedule("@daily").next_after(datetime(2026, 1, 1), BERLIN, ANCHOR)


@pytest.mark.parametrize("text", VALID)
def test_pattern_accepts_every_valid_schedule(text: str) -> None:
    parse_schedule(text)
    assert re.fullmatch(CRON_PATTERN, text)


@pytest.mark.parametrize(
    "text",
    [
        "every 5 minutes",
        "* * * *",
        "* * * * * *",
        "@often",
        "@every",
        "@every5s",
        "0 0 * * * ;",
        "",
    ],
)
def test_pattern_refuses_garbage(text: str) -> None:
    assert not re.fullmatch(CRON_PATTERN, text)


def test_pattern_is_re2() -> None:
    # the apiserver compiles it with Go's regexp: no lookaround, backreference or atomic group
    assert not re.search(r"\(\?[=!<>P]|\\[1-9]|[*+?}][+]", CRON_PATTERN)
