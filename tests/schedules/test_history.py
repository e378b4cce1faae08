"""A finished run as one compact history entry, the history's bounds, and `cxlab history` on
a folder of runs: the same pure code the operator uses for a schedule's status."""

from __future__ import annotations

import json
import statistics
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.history import START, document

from cxlab.cli import main
from cxlab.local.history_folder import save_run
from cxlab.schedules.history import MAX_HISTORY_BYTES, HistoryEntry, appended, entry_of

MIB = 2**20


def test_an_entry_holds_each_points_medians_and_samples_and_the_plan() -> None:
    entry = entry_of(document([1.0, 1.2, 3.0], START))
    assert entry["run"] == "trend" and entry["phase"] == "Succeeded"
    assert entry["scheduledTime"] == "2026-11-23T03:00:00Z" and entry["finishedTime"]
    keys = [p["point"] for p in entry["points"]]
    assert keys == ["asyncio w=10", "asyncio w=per-task"]  # one RTT: not in the key
    point = entry["points"][0]
    walls = point["samples"]["wallSeconds"]
    assert point["n"] == 3 and point["wallSeconds"] == statistics.median(walls)
    assert point["cpuSecondsPerTask"] == pytest.approx(0.0003)
    assert point["peakRssBytes"] == pytest.approx(40 * MIB, rel=1e-4)  # 5 significant digits
    assert set(point["samples"]) == {
        "wallSeconds", "throughputPerSecond", "cpuSecondsPerTask", "latencyP99Seconds",
        "peakRssBytes",
    }  # fmt: skip
    assert entry["plan"]["display"].endswith("asyncio") and entry["plan"]["pods"] >= 1


def test_several_rtts_put_the_rtt_in_the_point() -> None:
    entry = entry_of(document([1.0], START, rtts=["50ms", "100ms"]))
    assert "asyncio w=10 rtt=50ms" in [p["point"] for p in entry["points"]]


def append(history: list[dict[str, Any]], entry: dict[str, Any], limit: int) -> Any:
    """appended, on entries as written (the schedule's status.history)."""
    typed = appended([HistoryEntry.read(e) for e in history], HistoryEntry.read(entry), limit)
    return [e.document() for e in typed]


def test_appending_keeps_one_entry_per_run_in_slot_order_within_the_limit() -> None:
    entries = [entry_of(document([1.0], START + timedelta(hours=h))) | {"run": f"r-{h}"}
               for h in range(5)]  # fmt: skip
    history: list[dict[str, Any]] = []
    for entry in reversed(entries):  # recorded out of order
        history = append(history, entry, limit=3)
    assert [e["run"] for e in history] == ["r-2", "r-3", "r-4"]
    assert append(history, history[-1], limit=3) == history  # recorded twice: one entry
    # only the newest succeeded run keeps its repetitions: the baseline reads medians
    assert [bool(e["points"][0].get("samples")) for e in history] == [False, False, True]


def test_the_history_stays_under_its_byte_budget_whatever_the_matrix() -> None:
    big = entry_of(document([1.0], START))
    big["points"] = [big["points"][0] | {"point": f"asyncio w={w}"} for w in range(1, 201)]
    history: list[dict[str, Any]] = []
    for hour in range(30):  # the budget binds from the twelfth run on
        history = append(history, big | {"run": f"r-{hour:03}"}, limit=100)
    size = len(json.dumps(history, separators=(",", ":")))
    assert size <= MAX_HISTORY_BYTES and history[-1]["run"] == "r-029"
    assert 5 < len(history) < 30  # fewer entries, never a bigger object


def test_cxlab_history_prints_the_trend_the_regression_and_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "history"
    for day, walls in enumerate([[1.0, 1.01, 0.99], [1.02, 1.0, 1.01], [0.99, 1.0, 1.02],
                                 [1.6, 1.62, 1.61]]):  # fmt: skip
        save_run(document(walls, START + timedelta(days=day)), folder)
    assert main(["history", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "asyncio w=10" in out and "capacity plan:" in out
    plan = out[out.index("capacity plan: ") :].splitlines()
    [plan_row] = [line for line in plan if line.startswith("asyncio ")]
    assert " MiB " in plan_row and " ms " in plan_row  # units in the cells, as the trend's
    assert "regressions in trend-" in out and "wallSeconds of asyncio w=10" in out
    newest = sorted(p.stem for p in folder.glob("*.json"))[-1]
    assert main(["history", str(folder), "--acknowledged", newest]) == 0
    assert "regressions: none in" in capsys.readouterr().out


@pytest.mark.parametrize("what", ["missing", "empty", "not json", "not a result"])
def test_cxlab_history_refuses_a_bad_folder_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    folder = tmp_path / "history"
    if what != "missing":
        folder.mkdir()
    if what == "not json":
        (folder / "a.json").write_text("{")
    if what == "not a result":
        (folder / "a.json").write_text('{"kind": "Pod"}')
    assert main(["history", str(folder)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("cxlab: ") and str(folder) in error


def test_cxlab_history_names_an_unknown_acknowledged_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_run(document([1.0], START), tmp_path)
    assert main(["history", str(tmp_path), "--acknowledged", "nope"]) == 2
    assert "--acknowledged: 'nope' is not a run" in capsys.readouterr().err
