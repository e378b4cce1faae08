"""The Python half of the runner contract's shared cases (workloads/testdata): the Go
runner's tests (internal/runner/truncate_test.go) run the same files."""

from __future__ import annotations

import json

from cxlab_contract import runner_contract
from helpers import ROOT

from cxlab_runner.result import encode

TESTDATA = ROOT / "workloads" / "testdata"


def test_an_oversized_result_is_cut_by_the_contracts_rule() -> None:
    # errors first (least frequent first), then the RSS timeline's resolution halved
    oversized = json.loads((TESTDATA / "oversized-result.json").read_text())
    line = encode(oversized) + "\n"
    assert len(line.encode()) <= runner_contract().result_max_bytes
    assert json.loads(line) == json.loads((TESTDATA / "truncated-result.json").read_text())
