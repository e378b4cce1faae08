"""`cxlab plan` of an ExperimentSchedule file: the schedule validated as the operator would
(exit 2 naming the field otherwise), its next firings in its time zone, and its runs' trials,
the same listing `cxlab plan` prints for an experiment. The clock is the Settings' own: the
firings below are worked out by hand from a fixed now, not by cxlab.schedules.cron."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import EXAMPLES

from cxlab.cli import main
from cxlab.cli.exits import USAGE_ERROR
from cxlab.cli.settings import Settings

NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # a Friday; Berlin springs forward on Sunday


def schedule(**spec: Any) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        (EXAMPLES / "schedules" / "capacity-nightly.yaml").read_text()
    )
    document["spec"] |= spec
    return document


def plan(folder: Path, *documents: dict[str, Any]) -> tuple[int, str]:
    """`cxlab plan FILE` at NOW, in this process: its exit status and the file's path (its
    output stays in capsys)."""
    folder.mkdir(exist_ok=True)
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    settings = dataclasses.replace(Settings.from_environment(), clock=lambda: NOW)
    try:
        code = main(["plan", str(path)], settings)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, str(path)


def unix(year: int, month: int, day: int, hour: int, minute: int) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp())


def test_a_schedule_shows_its_next_firings_in_its_zone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 02:30 Berlin: 01:30 UTC in winter (CET, +1), 00:30 in summer (CEST, +2); on Sunday
    # 2026-03-29 the clocks go from 02:00 to 03:00, so 02:30 does not happen: no firing.
    code, _ = plan(tmp_path, schedule(schedule="30 2 * * *", timeZone="Europe/Berlin"))
    out, err = capsys.readouterr()
    assert code == 0, err
    expected = [
        ("Sat 2026-03-28 02:30 CET", "2026-03-28T01:30:00Z", unix(2026, 3, 28, 1, 30)),
        ("Mon 2026-03-30 02:30 CEST", "2026-03-30T00:30:00Z", unix(2026, 3, 30, 0, 30)),
        ("Tue 2026-03-31 02:30 CEST", "2026-03-31T00:30:00Z", unix(2026, 3, 31, 0, 30)),
        ("Wed 2026-04-01 02:30 CEST", "2026-04-01T00:30:00Z", unix(2026, 4, 1, 0, 30)),
        ("Thu 2026-04-02 02:30 CEST", "2026-04-02T00:30:00Z", unix(2026, 4, 2, 0, 30)),
    ]
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("next firings"))
    assert "Europe/Berlin" in lines[header]
    shown = [line.split() for line in lines[header + 2 : header + 2 + len(expected) + 1]]
    assert shown[: len(expected)] == [
        [*local.split(), utc, f"capacity-nightly-{run}"] for local, utc, run in expected
    ], out
    assert shown[len(expected)] == [], "five firings, then a blank line"
    assert "2026-03-29" not in out, "the skipped 02:30 is no firing"
    assert out.startswith("capacity-nightly: an ExperimentSchedule firing '30 2 * * *'")


def test_every_counts_from_now_for_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = plan(tmp_path, schedule(schedule="@every 90m"))
    out, err = capsys.readouterr()
    assert code == 0, err
    for hour, minute in ((13, 30), (15, 0), (16, 30), (18, 0), (19, 30)):
        assert f"2026-03-27T{hour:02}:{minute:02}:00Z" in out, out
    assert "2026-03-27T21:00:00Z" not in out, "five firings only"
    assert "from now" in out


def test_its_runs_trials_are_the_listing_of_the_same_experiment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = schedule(schedule="0 3 * * *", timeZone="UTC")
    first = f"capacity-nightly-{unix(2026, 3, 28, 3, 0)}"
    experiment = {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": first},
        "spec": document["spec"]["experimentTemplate"]["spec"],
    }
    code, _ = plan(tmp_path / "alone", experiment)
    alone, err = capsys.readouterr()
    assert code == 0, err
    code, _ = plan(tmp_path, document)
    shown, err = capsys.readouterr()
    assert code == 0, err
    assert "000-asyncio-w50-rtt100ms-r1" in alone and "24 trials" in alone, alone
    assert alone in shown, "the template's listing, as plan prints it for an experiment"
    assert f"the first: {first}" in shown


def test_a_file_of_both_kinds_shows_each_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = schedule()
    experiment = {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "capacity-nightly"},  # another kind: the same name is fine
        "spec": document["spec"]["experimentTemplate"]["spec"],
    }
    code, _ = plan(tmp_path, experiment, document)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.index("capacity-nightly: 24 trials") < out.index("an ExperimentSchedule")
    assert "suspended" not in out
    code, _ = plan(tmp_path, schedule(suspend=True))
    assert code == 0 and "suspended (spec.suspend)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": "61 * * * *"}, "spec.schedule"),
        ({"timeZone": "Mars/Olympus"}, "spec.timeZone"),
        ({"historyLimit": 0}, "spec.historyLimit"),
        ({"concurrencyPolicy": "Allow"}, "spec.concurrencyPolicy"),
        ({"experimentTemplate": {"spec": {"workload": {"type": "sleep"}}}},
         "spec.experimentTemplate.spec.models"),
        ({"experimentTemplate": "nightly"}, "spec.experimentTemplate"),
    ],
)  # fmt: skip
def test_a_bad_schedule_exits_2_naming_the_field(
    change: dict[str, Any], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, path = plan(tmp_path, schedule(**change))
    out, err = capsys.readouterr()
    assert code == USAGE_ERROR, f"exit {code}\n{out}{err}"
    assert out == "", out
    lines = err.splitlines()
    assert lines and all(line.startswith(f"cxlab: {path}: ") for line in lines), err
    assert any(line.startswith(f"cxlab: {path}: {field}: ") for line in lines), err


def test_two_schedules_of_one_name_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = copy.deepcopy(schedule())
    code, path = plan(tmp_path, schedule(), other)
    err = capsys.readouterr().err
    assert code == USAGE_ERROR
    assert err == f"cxlab: {path}: metadata.name: 'capacity-nightly' is used twice\n", err
