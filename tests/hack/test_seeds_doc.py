"""The seeds document (hack/seeds-doc.py, `make seeds-doc`) rendered from hand-made Results:
a table per seed table, every published figure in it, cxlab's figure as a median with its
range and count, and a missing measurement shown as missing, never as 0. Nothing is run."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

_SPEC = importlib.util.spec_from_file_location("seeds_doc", ROOT / "hack" / "seeds-doc.py")
assert _SPEC is not None and _SPEC.loader is not None
seeds_doc = importlib.util.module_from_spec(_SPEC)
sys.modules["seeds_doc"] = seeds_doc  # dataclasses look their module up while it loads
_SPEC.loader.exec_module(seeds_doc)

PUBLISHED = seeds_doc.load_published()
EXAMPLES = {
    seed["example"]: seeds_doc.load_example(ROOT / seed["example"]) for seed in PUBLISHED["seeds"]
}
ENVIRONMENT = {"generated": "2026-01-01 00:00 UTC", "machine": "2 CPUs", "commit": "abc"}


def result(**fields: Any) -> dict[str, Any]:
    """A Result as an older runner writes it (none of the fields added for issue 11)."""
    base = {
        "wallSeconds": 1.0, "floorSeconds": None, "efficiency": None, "cpuUserSeconds": 0.5,
        "cpuSystemSeconds": 0.1, "cpuPercent": 60.0, "peakRssBytes": 30 * 2**20,
        "voluntaryContextSwitches": 300, "involuntaryContextSwitches": 20,
        "runtime": "CPython 3.11.7",
    }  # fmt: skip
    return base | fields


def entry(model: str, workers: int, rep: int, res: dict[str, Any] | None, **kw: Any) -> Any:
    trial = {
        "name": f"{rep:03d}-{model}", "model": model, "workers": workers, "gomaxprocs": None,
        "rttSeconds": None, "repetition": rep, "phase": "Succeeded", "pinned": True,
    }  # fmt: skip
    if res is None:
        trial |= {"phase": "Failed", "message": "runner exited 1"}
    else:
        trial["result"] = res
    return trial | kw


def document(name: str, example: str, trials: list[dict[str, Any]]) -> dict[str, Any]:
    experiment = next(e for e in EXAMPLES[example] if e["metadata"]["name"] == name)
    return {
        "metadata": {"name": name},
        "spec": experiment["spec"],
        "status": {"phase": "Succeeded", "completionTime": "2026-01-01T00:00:00Z",
                   "trials": trials},
    }  # fmt: skip


GIL = "manifests/examples/gil-threading-caveats.yaml"
GREENLETS = "manifests/examples/greenlets-vs-threads.yaml"


def fixture_documents() -> dict[str, dict[str, Any]]:
    """A little of each kind: three repetitions, a failure, an unpinned trial, the new fields
    present in some Results and absent from others, syscalls counted, unavailable, not asked."""
    traced = {"total": 55000, "counts": {"futex": 54000, "read": 100}}
    unavailable = {"unavailable": "strace is not installed where the runner runs"}
    return {
        "gil-count": document("gil-count", GIL, [
            entry("sequential", 0, 1, result(wallSeconds=1.0)),
            entry("sequential", 0, 2, result(wallSeconds=3.0)),
            entry("sequential", 0, 3, result(wallSeconds=1.5)),
            entry("threads", 2, 1, result(
                wallSeconds=2.5, taskContextSwitches={"voluntary": 250, "involuntary": 3})),
            entry("threads", 2, 2, None),
            entry("processes", 2, 1, result(), pinned=False, message="not pinned: cpus [0]"),
        ]),
        "gil-count-syscalls": document("gil-count", GIL, [
            entry("sequential", 0, 1, result(syscalls=None, taskContextSwitches=None)),
            entry("threads", 2, 1, result(
                syscalls=traced, taskContextSwitches={"voluntary": 900, "involuntary": 3})),
            entry("processes", 2, 1, result(syscalls=unavailable)),
        ]) | {"metadata": {"name": "gil-count-syscalls"}},
        "greenlets-sleep-n100": document("greenlets-sleep-n100", GREENLETS, [
            entry(model, 0, 1, result(wallSeconds=0.21, floorSeconds=0.2, rttSeconds=0.2),
                  rttSeconds=0.2)
            for model in ("threads", "gevent", "asyncio")
        ]),
        "greenlets-hold-n1000": document("greenlets-hold-n1000", GREENLETS, [
            entry("threads", 0, 1, result(peakRssBytes=45 * 2**20, peakVmBytes=9 * 2**30,
                                          pool="onDemand", workersStarted=1000)),
            entry("gevent", 0, 1, result(peakRssBytes=42 * 2**20)),
        ]),
    }  # fmt: skip


def render(documents: dict[str, Any] | None = None) -> str:
    names = [
        e["metadata"]["name"]
        for seed in PUBLISHED["seeds"]
        for e in seeds_doc.seed_experiments(seed, EXAMPLES[seed["example"]])
    ]
    given = fixture_documents() if documents is None else documents
    text: str = seeds_doc.render_document(
        PUBLISHED, EXAMPLES, {name: given.get(name) for name in names}, ENVIRONMENT
    )
    return text


def section(text: str, heading: str) -> str:
    """The text from a heading to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    ends = [text.find("\n" + "#" * depth + " ", start + 1) for depth in range(1, len(level) + 1)]
    return text[start : min((e for e in ends if e != -1), default=len(text))]


def table(text: str, seed: str, title: str) -> dict[str, dict[str, str]]:
    """A seed's table by title: each row's cells by header, rows by their first cell."""
    article = next(s["article"] for s in PUBLISHED["seeds"] if s["seed"] == seed)
    lines = [
        line
        for line in section(section(text, f"## {article}"), f"### {title}").splitlines()
        if line.startswith("|")
    ]
    headers = [h.strip() for h in lines[0].strip("|").split(" | ")]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]
    return {row[0]: dict(zip(headers, row, strict=True)) for row in rows}


def test_a_section_per_seed_and_a_table_per_seed_table() -> None:
    text = render()
    for seed in PUBLISHED["seeds"]:
        part = section(text, f"## {seed['article']}")
        for spec in seed["tables"]:
            rows = table(text, seed["seed"], spec["title"])
            assert list(rows) == [row["label"] for row in spec["rows"]]
        assert part.count("\n### ") == len(seed["tables"])


def test_every_published_figure_appears_in_its_table() -> None:
    text = render()
    for seed in PUBLISHED["seeds"]:
        for spec in seed["tables"]:
            rows = table(text, seed["seed"], spec["title"])
            columns = {c["figure"]: c for c in spec["columns"]}
            for row in spec["rows"]:
                for name, figure in (row.get("published") or {}).items():
                    if name in columns:
                        cell = rows[row["label"]][f"{columns[name]['header']}, seed"]
                        assert figure["text"] in cell, (seed["seed"], row["label"], name)


def test_the_figure_here_is_the_median_with_its_range_and_count() -> None:
    rows = table(render(), "gil-threading-caveats", "Time")
    assert rows["sequential"]["wall, here"] == "1.50 s (1.00\u20133.00, n=3)"  # the median
    assert rows["sequential"]["wall, seed"] == "0m1.443s"
    # one of two repetitions failed, one trial ran off its cores: said, not averaged in
    assert rows["two threads"]["wall, here"] == "2.50 s (n=1)"
    assert "1 trial(s) failed" in rows["two threads"]["note"]
    assert rows["two processes"]["wall, here"] == "not pinned"
    assert "1 trial(s) not pinned, left out" in rows["two processes"]["note"]
    # cpu has no floor; the ratio row divides the seed's figures and cxlab's alike
    assert rows["sequential"]["floor"] == "—"
    assert rows["two threads ÷ sequential"]["wall, seed"] == "1.38\u00d7 †"
    assert rows["two threads ÷ sequential"]["wall, here"] == "1.67\u00d7"


def test_the_floor_and_the_seeds_derived_efficiency() -> None:
    text = render()
    rows = table(text, "greenlets-vs-threads", "Prog 1: N tasks sleep 200 ms, time")
    assert rows["threads, N = 100"]["floor"] == "0.200 s"
    assert rows["threads, N = 100"]["time, here"] == "0.210 s (n=1)"
    assert rows["threads, N = 1,000"]["time, here"] == "not run"
    assert rows["threads, N = 100,000"]["time, here"] == "not in the example"
    nornir = "threads (nornir, a ThreadPoolExecutor of num_workers): time"
    rows = table(text, "rtt-sweep-threads-vs-goroutines", nornir)
    # 10,000 tasks / 100 workers x 50 ms = 5 s floor against 5.532 s
    assert rows["W = 100, RTT 50 ms"]["efficiency, seed"] == "0.90 †"
    assert "the seed ran 10,000 tasks, the example 2,000" in section(text, f"### {nornir}")


def test_missing_measurements_are_never_zero() -> None:
    text = render()
    rows = table(text, "gil-threading-caveats", "System calls")  # from the traced run
    threads, sequential, processes = (
        rows[label] for label in ("two threads", "sequential", "two processes")
    )
    assert threads["futex calls, here"] == "54,000 (n=1)"
    assert sequential["futex calls, here"] == "not traced"
    assert processes["futex calls, here"].startswith("unavailable (strace is not installed")
    assert processes["all system calls, here"].startswith("unavailable")
    switches = table(text, "gil-threading-caveats", "Context switches")  # the untraced run
    assert switches["two threads"]["voluntary switches, task threads, here"] == "250 (n=1)"
    assert switches["sequential"]["voluntary switches, task threads, here"] == "—"  # older runner
    process = switches["sequential"]["voluntary switches, process, here"]
    assert process == "300 (300\N{EN DASH}300, n=3)"
    memory = table(text, "greenlets-vs-threads", "Prog 2: N tasks alive, memory")
    assert memory["threads, N = 1,000"]["VmPeak, here"] == "9.00 GiB (n=1)"
    assert memory["greenlets (gevent), N = 1,000"]["VmPeak, here"] == "—"
    assert memory["greenlets (gevent), N = 1,000"]["peak RSS, here"] == "42.0 MiB (n=1)"
    cells = [*threads.values(), *sequential.values(), *processes.values()]
    for cell in [*cells, *switches["sequential"].values()]:
        assert not cell.startswith("0 ") and cell != "0"


def test_no_results_at_all_still_shows_every_published_figure() -> None:
    text = render({})
    assert "no results (`out/gil-count/result.json` is missing)" in text
    rows = table(text, "gil-threading-caveats", "Time")
    assert rows["two threads"] == rows["two threads"] | {"wall, here": "not run", "floor": "—"}
    assert rows["two threads"]["wall, seed"] == "0m1.988s"


def test_the_header_says_where_and_how() -> None:
    text = render()
    assert "| machine | 2 CPUs |" in text and "| commit | abc |" in text
    assert "[hack/seeds-published.yaml](../../hack/seeds-published.yaml)" in text
    assert "[`gil-threading-caveats.yaml`](gil-threading-caveats.yaml)" in text


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (("match",), {"modle": "threads"}, "cannot match on"),
        (("published", "wall"), {"value": 1.9}, "figure 'wall'"),
        (("published", "wall"), {"text": "1.9 s", "value": "1.9"}, "figure 'wall'"),
        (("ratio",), ["two threads", "nobody"], "ratio of unknown rows"),
    ],
)
def test_a_broken_published_row_is_refused(path: tuple[str, ...], value: Any, problem: str) -> None:
    published = copy.deepcopy(PUBLISHED)
    rows = published["seeds"][0]["tables"][0]["rows"]
    row = rows[3] if path == ("ratio",) else rows[0]
    for key in path[:-1]:
        row = row[key]
    row[path[-1]] = value
    with pytest.raises(seeds_doc.PublishedError, match=problem):
        seeds_doc.check_published(published)


def test_quotes_are_checked_against_the_seed_text(tmp_path: Path) -> None:
    published = {
        "seeds": [{"seed": "s", "tables": [{"rows": [
            {"label": "ok", "quote": "real    0m1.988s", "published": {
                "wall": {"text": "0m1.988s", "value": 1.988}}},
            {"label": "bad", "quote": "real 0m2.000s", "published": {
                "wall": {"text": "207 ms", "value": 0.27}}},
        ]}]}],
    }  # fmt: skip
    (tmp_path / "s.txt").write_text("real    0m1.988s\nTime\t207 ms\n")
    problems = seeds_doc.check_quotes(published, tmp_path)
    assert problems == [
        "s: bad: quote not in the seed: 'real 0m2.000s'",
        "s: bad: wall: '207 ms' is not 0.27",
    ]
