"""`cxlab compare A B`: two runs point by point, each metric's medians, 95 % intervals and
Welch's test on the logarithms, adjusted by Benjamini-Yekutieli; the sources it reads (a
result.json, a history entry, DIR#RUN, FILE#RUN), its exit statuses and its HTML page."""

from __future__ import annotations

import json
import math
import statistics
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.history import START, document

from cxlab.cli import main
from cxlab.cli.exits import USAGE_ERROR
from cxlab.compare import Change, ComparePolicy, Comparison, NothingToCompare, compare
from cxlab.local.history_folder import save_run
from cxlab.schedules.history import HistoryEntry, HistoryPoint, entry_of, history_entry

# The wall times of two points' three repetitions: asyncio w=10, then w=per-task.
STEADY = [1.0, 1.01, 0.99], [2.0, 2.02, 1.98]
SLOWER = [1.3, 1.31, 1.29], [2.0, 2.01, 1.99]  # w=10 30 % slower, per-task unchanged


def run(walls: tuple[list[float], list[float]], hours: int = 0) -> dict[str, Any]:
    """A finished run (tests/schedules/test_history.py's): its trials run repetition after
    repetition, each of both points."""
    in_order = [walls[point][rep] for rep in range(3) for point in range(2)]
    return document(in_order, START + timedelta(hours=hours))


def cli(*argv: str) -> int:
    """cxlab's exit status: what main returns, or the SystemExit a refusal raises."""
    try:
        return main(list(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)


def entry(name: str, points: dict[str, list[float]]) -> HistoryEntry:
    """A history entry whose points have only wall times: samples from two on, else the
    median alone (a schedule's older runs, or one repetition)."""
    made = []
    for key, walls in points.items():
        point = HistoryPoint(point=key, model="asyncio", n=len(walls))
        point.wall_seconds = statistics.median(walls)
        if len(walls) > 1:
            point.samples = {"wallSeconds": walls}
        made.append(point)
    return HistoryEntry(run=name, phase="Succeeded", points=made)


def change(comparison: Comparison, point: str, metric: str = "wallSeconds") -> Change:
    return next(c for c in comparison.changes if c.point == point and c.metric == metric)


def test_a_point_30_percent_slower_is_worse_and_an_unchanged_one_the_same() -> None:
    found = compare(history_entry(run(STEADY)), history_entry(run(SLOWER)))
    slower = change(found, "asyncio w=10")
    assert slower.verdict == "worse" and slower.change == pytest.approx(0.30)
    assert (slower.before.median, slower.after.median) == (1.0, 1.3)
    assert slower.p_value is not None and slower.p_value <= 0.01
    assert slower.before.n == slower.after.n == 3
    # the throughput fell and the p99 (wall / 10 here) rose with it: worse both ways
    assert change(found, "asyncio w=10", "throughputPerSecond").verdict == "worse"
    assert change(found, "asyncio w=10", "latencyP99Seconds").verdict == "worse"
    assert change(found, "asyncio w=10", "peakRssBytes").verdict == "same"
    assert {c.verdict for c in found.changes if c.point == "asyncio w=per-task"} == {"same"}
    assert found.worse and found.count("worse") == 3 and found.tests == 10
    # the other way round the same point is better, and nothing is worse
    back = compare(history_entry(run(SLOWER)), history_entry(run(STEADY)))
    assert change(back, "asyncio w=10").verdict == "better"
    assert change(back, "asyncio w=10", "throughputPerSecond").verdict == "better"
    assert not back.worse


def test_each_sides_interval_is_a_t_interval_on_the_log_scale() -> None:
    found = compare(entry("a", {"p": [1.0, 1.1, 1.3]}), entry("b", {"p": [1.0, 4.0]}))
    logs = [math.log(v) for v in (1.0, 1.1, 1.3)]
    half = 4.3027 * statistics.stdev(logs) / math.sqrt(3)  # t(0.975, 2)
    mean = statistics.fmean(logs)
    low, high = change(found, "p").before.interval or (0, 0)
    assert low == pytest.approx(math.exp(mean - half))
    assert high == pytest.approx(math.exp(mean + half))
    # two repetitions: t(0.975, 1) = 12.706, an interval as wide as two values can say
    low, high = change(found, "p").after.interval or (0, 0)
    assert math.log(high / 2) == pytest.approx(12.706 * math.log(4) / 2, rel=1e-4)
    assert low * high == pytest.approx(4.0)  # around the geometric mean, 2


def test_a_small_change_needs_the_minimum_however_certain() -> None:
    tight = entry("a", {"p": [1.0, 1.001, 0.999]})
    faster = entry("b", {"p": [0.95, 0.951, 0.949]})  # 5 % less wall time, beyond doubt
    found = change(compare(tight, faster), "p")
    assert found.p_value is not None and found.p_value < 1e-4 and found.verdict == "same"
    assert change(compare(tight, faster, ComparePolicy(min_change=0.04)), "p").verdict == "better"


def test_one_repetition_on_either_side_is_not_tested() -> None:
    found = compare(entry("a", {"p": [1.0]}), entry("b", {"p": [1.5, 1.51, 1.49]}))
    only = change(found, "p")
    assert only.verdict == "n/a" and only.p_value is None and found.tests == 0
    assert only.before.n == 1 and only.before.interval is None and only.after.interval
    assert only.change == pytest.approx(0.5)  # still shown
    # an entry that kept only its medians (a schedule's older run of 3) counts one each
    older = entry("a", {"p": [1.0, 1.01, 0.99]})
    assert older.points is not None
    older.points[0].samples = None
    assert change(compare(older, entry("b", {"p": [1.5, 1.51, 1.49]})), "p").verdict == "n/a"
    assert not found.worse


def test_points_of_one_run_only_are_added_or_removed() -> None:
    a = entry("a", {"kept": [1.0, 1.0, 1.0], "gone": [1.0, 1.0, 1.0]})
    b = entry("b", {"new": [1.0, 1.0, 1.0], "kept": [1.0, 1.0, 1.0]})
    found = compare(a, b)
    assert found.added == ("new",) and found.removed == ("gone",)
    assert {c.point for c in found.changes} == {"kept"}
    assert change(found, "kept").verdict == "same"  # every value equal: p = 1


def test_the_p_values_are_adjusted_together() -> None:
    """p = 0.0035 passes 0.01 alone; among 31 tests Benjamini-Yekutieli makes it 0.44."""
    borderline = {"p": [1.0, 1.02, 0.98]}, {"p": [1.25, 1.3, 1.2]}
    alone = change(compare(entry("a", borderline[0]), entry("b", borderline[1])), "p")
    assert alone.p_value == pytest.approx(0.0035, abs=1e-4) and alone.verdict == "worse"
    unchanged = {f"q{i}": [1.0, 1.02, 0.98] for i in range(30)}
    found = compare(entry("a", borderline[0] | unchanged), entry("b", borderline[1] | unchanged))
    among = change(found, "p")
    assert found.tests == 31 and among.verdict == "same"
    harmonic = sum(1 / i for i in range(1, 32))
    assert among.p_value == pytest.approx(alone.p_value * 31 * harmonic)


def test_runs_without_a_point_in_common_cannot_be_compared() -> None:
    with pytest.raises(NothingToCompare, match=r"A \(a\) and B \(b\) have no point in common"):
        compare(entry("a", {"p": [1.0]}), entry("b", {"q": [1.0]}))
    with pytest.raises(NothingToCompare, match=r"B \(b, Failed\) has no points"):
        compare(entry("a", {"p": [1.0]}), HistoryEntry(run="b", phase="Failed"))


def write(path: Path, content: dict[str, Any]) -> str:
    path.write_text(json.dumps(content))
    return str(path)


def test_cxlab_compare_exits_1_when_a_point_is_worse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = write(tmp_path / "a.json", run(STEADY)), write(tmp_path / "b.json", run(SLOWER))
    assert cli("compare", a, b) == 1
    out = capsys.readouterr().out
    assert f"A: trend ({a})" in out and f"B: trend ({b})" in out
    [row] = [line for line in out.splitlines() if line.startswith("asyncio w=10 ")]
    assert "wallSeconds" in row and "3 → 3" in row and "+30.0 %" in row
    assert row.endswith("worse") and "1.000 s" in row and "1.300 s" in row
    assert "B against A: 3 worse, 0 better, 7 same, 0 n/a" in out
    assert cli("compare", b, a) == 0  # faster: better, nothing worse
    assert cli("compare", a, a) == 0
    # --significance and --min-change are the gates: a 30 % change is not 40 %
    assert cli("compare", a, b, "--min-change", "0.4") == 0


def test_cxlab_compare_reads_history_folders_entries_and_schedules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "history"
    before = save_run(run(STEADY), folder).stem
    after = save_run(run(SLOWER, hours=1), folder).stem
    assert cli("compare", f"{folder}#{before}", f"{folder}#{after}") == 1
    assert "+30.0 %" in capsys.readouterr().out
    # one entry's JSON, and a run of an ExperimentSchedule's status.history
    one = write(tmp_path / "entry.json", entry_of(run(STEADY)) | {"run": "old"})
    schedule = {"kind": "ExperimentSchedule", "status": {"history": [entry_of(run(SLOWER))]}}
    assert cli("compare", one, write(tmp_path / "cxs.json", schedule) + "#trend") == 1
    assert "A: old (" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("a", "b", "told"),
    [
        ("missing.json", "b.json", "cxlab: A missing.json: cannot read"),
        ("a.json", "history", "cxlab: B history: is a history folder: name one of its runs"),
        ("a.json", "history#nope", "cxlab: B history#nope: 'nope' is not a run there"),
        ("a.json", "b.json#trend", "cxlab: B b.json#trend: has no status.history"),
        ("a.json", "entry.json", "cxlab: B entry.json: points.0.model: Field required"),
        ("a.json", "other.json", "cxlab: compare: A (trend) and B (trend) have no point in"),
    ],
)
def test_cxlab_compare_refuses_what_it_cannot_read_with_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    a: str,
    b: str,
    told: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "a.json", run(STEADY))
    write(tmp_path / "b.json", run(SLOWER))
    save_run(run(STEADY), tmp_path / "history")
    write(tmp_path / "entry.json", {"run": "x", "phase": "Succeeded", "points": [{"point": "p"}]})
    write(tmp_path / "other.json", document([1.0], START, rtts=["50ms", "100ms"]))
    assert cli("compare", a, b) == USAGE_ERROR
    error = capsys.readouterr().err
    assert error.startswith(told), error


def test_cxlab_compare_writes_the_table_as_a_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = write(tmp_path / "a.json", run(STEADY)), write(tmp_path / "b.json", run(SLOWER))
    page = tmp_path / "compare.html"
    assert cli("compare", a, b, "--html", str(page)) == 1
    assert f"report: {page}" in capsys.readouterr().out
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html  # the report's shell
    assert f'<dd>trend <span class="note">({a})</span></dd>' in html
    assert "<th>point</th>" in html and "<td>asyncio w=10</td>" in html
    assert html.count('<span class="phase failed">worse</span>') == 3
    assert html.count('<span class="phase">same</span>') == 7
    assert "+30.0 %" in html and "3 → 3" in html
    assert "B against A: 3 worse, 0 better, 7 same, 0 n/a" in html
