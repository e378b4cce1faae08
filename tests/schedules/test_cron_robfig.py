"""cxlab's schedules against robfig/cron v3 itself, the parser and calendar of Kubernetes'
CronJob controller: hundreds of generated schedules (steps, ranges, lists, names, macros, both
day fields restricted, ranges ending in sun, some refused) in zones with and without daylight
saving, each from instants near its zone's clock changes and elsewhere. Both must refuse the
same schedules and give the same next firing times, except where docs/schedules.md says cxlab
differs on purpose: those are set aside by rule (the predicates below), never case by case.

robfig/cron runs as hack/robfig-cron (a Go program of the module proxy's v3.0.1), built once
per session into build/robfig-cron/ and asked every question in one call."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from helpers import ROOT

from cxlab.schedules.cron import CRON_PATTERN, CronError, parse_schedule, time_zone

SOURCE = ROOT / "hack" / "robfig-cron"
OUT = ROOT / "build" / "robfig-cron"
TIMES = 5  # next firing times per question
SEED = 28  # the number: the same schedules every run
GENERATED = 420
ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Australia/Sydney",
    "Australia/Lord_Howe",  # clocks move by 30 minutes
    "America/Sao_Paulo",  # kept daylight saving until 2019, its clocks moving at midnight
)
# Where the questions start: ordinary instants, and the clock changes of each zone in these
# years (America/Sao_Paulo's last ones in 2018-2019).
YEARS = (2018, 2019, 2026, 2027)
ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)  # @every's, never asked here
NAMES = {
    3: ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    4: ("sun", "mon", "tue", "wed", "thu", "fri", "sat"),
}
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# Written by hand: the rules the generator might only brush.
CHOSEN = (
    "0 0 */2 * 1",  # odd days or Mondays
    "0 0 * * */2",
    "0 0 5,* * 1",  # * in a list: the field is unrestricted
    "0 0 *,5 * 1",
    "0 0 */1 * 1",  # a step of 1 keeps the star
    "0 0 ?/2 * 1",
    "0 0 31 2 */2",  # no 31 February, but Sundays, Tuesdays, ... of February
    "0 0 31 2 *",  # never fires
    "0 0 30 2 mon",
    "0 0 29 2 *",
    "0 12 * * sun-sun",
    "0 12 * * 0-sun",
    "0 12 * * mon-sun",
    "0 12 * * fri-sun",
    "0 12 * * sun-sat",
    "0 12 * * sat-sun/2",
    "30 2 * * *",
    "*/15 * * * *",
    "0 * * * *",
    "15 0 * * *",
    "*/20 0-3 * * *",
    "0 0 * * 7",
    "0 0 * * 5-7",
    "0 0 1,,15 * *",
    "*-5 * * * *",
    "0 0 * * *,",
    "*/9999999999999999999 * * * *",
    " @daily",
    "@hourly\t",
    "  0 0 * * *  ",
)


# ---- robfig/cron, built once ------------------------------------------------------------------


def _inputs() -> str:
    """What the build depends on: the module's files and the Go toolchain."""
    digest = hashlib.sha256()
    for path in sorted(SOURCE.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    version = subprocess.run(["go", "version"], capture_output=True, text=True, check=True)
    digest.update(version.stdout.encode())
    return digest.hexdigest()


@pytest.fixture(scope="session")
def robfig_cron() -> Path:
    """build/robfig-cron/robfig-cron, built unless its .inputs say it is current. Under a lock
    and into a temporary folder renamed when done, as hack/lib.sh's from_cache builds: two
    pytest-xdist workers build it once, and a build cut short leaves nothing behind."""
    if shutil.which("go") is None:
        pytest.fail("go is not on PATH: it builds hack/robfig-cron, the reference of this test")
    OUT.mkdir(parents=True, exist_ok=True)
    binary, stamp = OUT / "robfig-cron", OUT / ".inputs"
    with open(OUT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for left in OUT.glob(".partial-*"):  # from a build cut short
            shutil.rmtree(left, ignore_errors=True)
        inputs = _inputs()
        if binary.is_file() and stamp.is_file() and stamp.read_text().strip() == inputs:
            return binary
        with tempfile.TemporaryDirectory(dir=OUT, prefix=".partial-") as partial:
            # the flags of hack/lib.sh's go_build_in; GOFLAGS, GOCACHE, GOMODCACHE, GOPROXY
            # as the environment sets them
            env = os.environ | {"CGO_ENABLED": "0", "GOWORK": "off"}
            built = subprocess.run(
                ["go", "build", "-mod=readonly", "-trimpath", "-o", partial, "."],
                cwd=SOURCE,
                env=env,
                capture_output=True,
                text=True,
            )
            if built.returncode:
                pytest.fail(
                    f"go build in {SOURCE.relative_to(ROOT)} failed "
                    f"(exit {built.returncode}):\n{built.stdout}{built.stderr}"
                )
            os.replace(Path(partial) / "robfig-cron", binary)
        stamp.write_text(inputs + "\n")
    return binary


# ---- the questions ----------------------------------------------------------------------------


def _item(rng: random.Random, field: int) -> str:
    """One item of a list, now and then one that robfig/cron or cxlab refuses."""
    low, high = BOUNDS[field]
    names = NAMES.get(field, ())

    def value(lo: int = low, hi: int = high) -> str:
        number = rng.randint(lo, hi)
        if names and rng.random() < 0.4:
            name = names[number - low]
            return rng.choice((name, name.upper(), name.capitalize()))
        return str(number)

    kind = rng.random()
    if field == 4 and kind < 0.06:  # a range ending in sun, forwards only from sun itself
        return f"{rng.choice(('sun', '0', 'mon', 'fri', 'sat', '3'))}-sun"
    if kind < 0.02:  # refused by both: out of range, step 0, a stray name
        return rng.choice((str(high + 1), "*/0", "x", str(low - 1) if low else "1-"))
    if kind < 0.03 and field == 4:
        return rng.choice(("7", "5-7", "7/2"))  # cxlab's 7 for Sunday
    if kind < 0.18:
        return rng.choice(("*", "?"))
    if kind < 0.36:
        return f"{rng.choice(('*', '?'))}/{rng.randint(1, high - low + 3)}"
    if kind < 0.6:
        return value()
    start = rng.randint(low, high)
    end = rng.randint(start, high) if rng.random() < 0.93 else rng.randint(low, start)
    span = f"{value(start, start)}-{value(end, end)}"
    if kind < 0.82:
        return span
    if kind < 0.92:
        return f"{span}/{rng.randint(1, high - low + 1)}"
    return f"{value()}/{rng.randint(1, high - low + 1)}"


def _field(rng: random.Random, field: int) -> str:
    dense = field < 2 and rng.random() < 0.3  # minute or hour: often fire within the hour
    if dense:
        return rng.choice(("*", "*/5", "*/20", "0-10", "0,30", "55-59"))
    count = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    return ",".join(_item(rng, field) for _ in range(count))


def _schedules() -> list[str]:
    rng = random.Random(SEED)
    schedules = list(CHOSEN) + list(MACROS)
    while len(schedules) < len(CHOSEN) + len(MACROS) + GENERATED:
        fields = [_field(rng, field) for field in range(5)]
        if rng.random() < 0.3:  # both day fields restricted
            fields[2] = rng.choice(("1", "13", "*/2", "*/7", "10-20", "?/3", "31", "29-31"))
            fields[4] = rng.choice(("1", "mon-fri", "*/2", "?/3", "sun", "5", "1/2", "sat,sun"))
        schedules.append(" ".join(fields))
    return schedules


@dataclass(frozen=True)
class Change:
    at: datetime  # the first instant of the new offset
    shift: timedelta  # forwards (+) or back (-)


@functools.cache
def _changes_in(name: str, year: int) -> tuple[Change, ...]:
    """When the zone's clocks change in a year (UTC), to the minute."""
    zone = ZoneInfo(name)

    def offset(moment: datetime) -> timedelta:
        return moment.astimezone(zone).utcoffset() or timedelta()

    found = []
    day = datetime(year, 1, 1, tzinfo=UTC)
    while day.year == year:
        after = day + timedelta(days=1)
        if offset(day) != offset(after):
            low, high = day, after  # the offset changes in (low, high]
            while high - low > timedelta(minutes=1):
                middle = low + (high - low) / 2
                low, high = (middle, high) if offset(middle) == offset(low) else (low, middle)
            found.append(Change(high, offset(high) - offset(low)))
        day = after
    return tuple(found)


def _changes(name: str, since: datetime, until: datetime) -> list[Change]:
    years = range(since.year, until.year + 1)
    return [c for year in years for c in _changes_in(name, year) if since < c.at <= until]


@dataclass(frozen=True)
class Question:
    spec: str
    zone: str
    after: datetime


def _questions() -> list[Question]:
    rng = random.Random(SEED + 1)
    questions: list[Question] = []
    for number, spec in enumerate(_schedules()):
        for zone in (ZONES[number % len(ZONES)], rng.choice(ZONES)):
            ordinary = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(
                seconds=rng.randrange(2 * 365 * 86400)
            )
            instants = [ordinary]
            changes = [c.at for year in YEARS for c in _changes_in(zone, year)]
            if changes:
                # from a little before a change (a day, hours, minutes, a second) or after it
                before = rng.choice((86400, 3 * 3600, 3600 + 59, 1799, 61, 1, -1800))
                instants.append(rng.choice(changes) - timedelta(seconds=before))
            questions.extend(Question(spec, zone, instant) for instant in instants)
    return questions


def _ask(binary: Path, questions: list[Question]) -> list[dict[str, object]]:
    lines = "".join(
        json.dumps({"spec": q.spec, "zone": q.zone, "after": q.after.isoformat(), "count": TIMES})
        + "\n"
        for q in questions
    )
    answered = subprocess.run(
        [str(binary)], input=lines, capture_output=True, text=True, timeout=120
    )
    assert answered.returncode == 0, answered.stderr
    answers = [json.loads(line) for line in answered.stdout.splitlines()]
    assert len(answers) == len(questions)
    return answers


# ---- the differences on purpose (docs/schedules.md), by rule ---------------------------------


def sunday_as_seven(spec: str) -> bool:
    """cxlab reads 7 in the day-of-week field as Sunday, as Vixie cron does; robfig refuses it."""
    fields = spec.split()
    if len(fields) != 5:
        return False
    spans = (item.partition("/")[0] for item in fields[4].split(","))
    return any(part.isdigit() and int(part) == 7 for span in spans for part in span.split("-"))


def robfig_reads_past(spec: str) -> bool:
    """robfig skips an empty list item ("1,,15") and what follows * in "*-5"; cxlab refuses
    both (likely typos) and names the field."""
    return bool(re.search(r"(^|[ ,]),|,($|[ \t])|[*?]-", spec))


def blanks_around_a_macro(spec: str) -> bool:
    """cxlab strips blanks around the schedule; robfig reads " @daily" as one field."""
    return spec.strip(" \t").startswith("@") and spec != spec.strip(" \t")


def repeated_wall_time(zone: ZoneInfo, moment: datetime) -> bool:
    """The wall time's second occurrence when clocks go back: robfig fires in both, cxlab once
    (the first)."""
    return moment.astimezone(zone).fold == 1


def late_past_part_of_an_hour(
    zone: str, since: datetime, theirs: list[datetime]
) -> list[tuple[datetime, datetime | None]]:
    """Where robfig is late, as (from, to) open intervals (to None: past its last time): from
    a change of the clocks by part of an hour (Lord Howe's 30 minutes) to robfig's first firing
    time after it. robfig steps hours by adding 60 minutes, so a search that crosses such a
    change looks at 05:30 for 05:00 until a minute step brings it back to :00, and passes over
    what fires in between, days or weeks of it for @weekly; cxlab reads the wall clock."""
    until = theirs[-1] if theirs else since + timedelta(days=6 * 366)
    return [
        (change.at, next((t for t in theirs if t >= change.at), None))
        for change in _changes(zone, since, until)
        if change.shift.total_seconds() % 3600
    ]


def beyond_robfig_horizon(zone: ZoneInfo, since: datetime, moment: datetime) -> bool:
    """robfig gives up (the zero time) past 5 years from the year it searches from; cxlab
    searches the 400-year cycle of the calendar."""
    return moment.astimezone(zone).year > since.astimezone(zone).year + 5


# ---- the comparison ---------------------------------------------------------------------------


def _cxlab(spec: str, zone: ZoneInfo, after: datetime) -> list[datetime] | str:
    """cxlab's next TIMES firing times, or its refusal."""
    try:
        schedule = parse_schedule(spec)
    except CronError as error:
        return str(error)
    times = []
    for _ in range(TIMES):
        after = schedule.next_after(after, zone, ANCHOR)
        times.append(after)
    return times


def _disagreement(question: Question, answer: dict[str, object]) -> str | None:
    """What differs beyond the rules, or None."""
    zone = time_zone(question.zone)
    ours = _cxlab(question.spec, zone, question.after)
    error = answer.get("error")
    if isinstance(ours, str):
        if error is not None:
            return None  # both refuse
        if robfig_reads_past(question.spec):
            return None
        if "never fires" in ours and not answer["times"]:
            return None  # robfig found no firing time either
        return f"cxlab refuses ({ours}), robfig fires at {answer['times']}"
    if not re.fullmatch(CRON_PATTERN, question.spec):
        return "cxlab parses it but the CRD's pattern refuses it"
    if error is not None:
        if sunday_as_seven(question.spec) or blanks_around_a_macro(question.spec):
            return None
        return f"robfig refuses ({error}), cxlab fires at {[t.isoformat() for t in ours]}"
    assert isinstance(answer["times"], list)
    theirs = [datetime.fromisoformat(t) for t in answer["times"]]
    # the times both answer for: up to the last of the shorter list; past robfig's last time
    # when it gave up, cxlab's must all lie beyond robfig's horizon
    if len(theirs) < TIMES:
        since = theirs[-1] if theirs else question.after
        missing = [t for t in ours if t > since and not beyond_robfig_horizon(zone, since, t)]
        if missing:
            return f"robfig gave up after {theirs}, cxlab fires at {missing}"
        end = since
    else:
        end = min(theirs[-1], ours[-1])

    late = late_past_part_of_an_hour(question.zone, question.after, theirs)
    ours_kept = [
        t.astimezone(zone).isoformat()
        for t in ours
        if t <= end and not any(start < t and (stop is None or t < stop) for start, stop in late)
    ]
    theirs_kept = [
        t.astimezone(zone).isoformat()
        for t in theirs
        if t <= end and not repeated_wall_time(zone, t)
    ]
    if ours_kept != theirs_kept:
        local = [[t.astimezone(zone).isoformat() for t in times] for times in (ours, theirs)]
        return f"cxlab fires at {local[0]}, robfig at {local[1]}"
    return None


def test_cxlab_agrees_with_robfig_cron(robfig_cron: Path) -> None:
    questions = _questions()
    answered = list(zip(questions, _ask(robfig_cron, questions), strict=True))
    disagreements = [
        f"{q.spec!r} in {q.zone} after {q.after.isoformat()}: {differs}"
        for q, answer in answered
        if (differs := _disagreement(q, answer))
    ]
    assert not disagreements, f"{len(disagreements)} of {len(answered)}:\n" + "\n".join(
        disagreements[:40]
    )
    _covers_what_it_claims(answered)


def _covers_what_it_claims(answered: list[tuple[Question, dict[str, object]]]) -> None:
    """Enough of each kind of question, so that a change of the generator cannot empty the
    comparison."""
    assert len({q.spec for q, _ in answered}) > 400
    assert sum(1 for _, a in answered if a.get("error")) > 30
    assert sum(1 for _, a in answered if a.get("times")) > 600
    assert sum(1 for q, a in answered if a.get("times") and _both_days_restricted(q.spec)) > 100
    near = timedelta(days=1)
    assert sum(1 for q, _ in answered if _changes(q.zone, q.after - near, q.after + near)) > 300
    assert {q.zone for q, a in answered if a.get("times")} == set(ZONES)


def _both_days_restricted(spec: str) -> bool:
    try:
        return parse_schedule(spec).either_day
    except CronError:
        return False
