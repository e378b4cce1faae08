"""The Python half of the runner contract's shared cases (workloads/testdata): the Go
runner's tests (internal/runner/shared_cases_test.go) run the same files."""

from __future__ import annotations

import json

import pytest
from cxlab_contract import runner_contract
from helpers import ROOT

from cxlab_runner.config import build_parser
from cxlab_runner.durations import format_duration, parse_duration
from cxlab_runner.result import encode, floor_seconds

TESTDATA = ROOT / "workloads" / "testdata"


def test_an_oversized_result_is_cut_by_the_contracts_rule() -> None:
    # errors first (least frequent first), then the RSS timeline's resolution halved
    oversized = json.loads((TESTDATA / "oversized-result.json").read_text())
    line = encode(oversized) + "\n"
    assert len(line.encode()) <= runner_contract().result_max_bytes
    assert json.loads(line) == json.loads((TESTDATA / "truncated-result.json").read_text())


def test_the_floor_is_the_contracts_formula() -> None:
    cases = json.loads((TESTDATA / "floors.json").read_text())["cases"]
    for case in cases:
        floor = floor_seconds(
            case["workload"], case["tasks"], case["workers"],
            parse_duration(case["rtt"]), parse_duration(case["hold"]),
        )  # fmt: skip
        assert floor == pytest.approx(case["floorSeconds"]), case


def test_the_python_runner_takes_the_contracts_flags() -> None:
    # the Go runner's half: TestTheGoRunnerTakesTheContractsFlags
    durations = {"rtt", "hold", "linger"}
    taken: dict[str, str | None] = {}
    for action in build_parser()._actions:
        if action.option_strings == ["-h", "--help"]:
            continue
        (option,) = action.option_strings
        name = option.removeprefix("--")
        if action.required:
            taken[name] = None
        elif name in durations:
            taken[name] = format_duration(action.default)
        else:
            taken[name] = "" if action.default is None else str(action.default)
    assert taken == runner_contract().flags
