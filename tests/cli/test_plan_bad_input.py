"""The bad-input corpus (tests/helpers/bad_input.py) through `cxlab plan`: every case exits 2 with
one line per problem naming the field (or, for a file wrong as a whole, saying what is wrong), no
traceback, and nothing on stdout. `cxlab run` refuses the same files before writing anything
(one case per category proves it)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import ROOT
from helpers.bad_input import CASES, CATEGORIES, BadInput, names_the_field

from cxlab.cli import main
from cxlab.cli.exits import USAGE_ERROR


def write(case: BadInput, folder: Path) -> Path:
    path = folder / "experiment.yaml"
    if isinstance(case.text, bytes):
        path.write_bytes(case.text)
    else:
        path.write_text(case.text)
    return path


def test_every_category_has_cases() -> None:
    counts = Counter(case.category for case in CASES)
    assert set(counts) == set(CATEGORIES), counts
    assert all(count >= 2 for count in counts.values()), counts
    assert len({case.id for case in CASES}) == len(CASES), "two cases with one name"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_plan_refuses_it_naming_the_field(
    case: BadInput, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(case, tmp_path)
    try:
        code = main(["plan", str(path)])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert code == USAGE_ERROR, f"exit {code}\n{out}{err}"
    assert out == "", out
    lines = err.splitlines()
    assert lines and all(line.startswith(f"cxlab: {path}: ") for line in lines), err
    if case.field is not None:
        assert names_the_field(err, case.field), f"{case.field} not named:\n{err}"
    assert case.says in err, err
    if case.lines is not None:
        assert len(lines) == case.lines, err


# One case per category as a real process: no traceback reaches the terminal and no results
# folder appears.
ONE_PER_CATEGORY = list({case.category: case for case in CASES}.values())


@pytest.mark.parametrize("case", ONE_PER_CATEGORY, ids=lambda c: c.id)
def test_run_refuses_it_before_writing_anything(case: BadInput, tmp_path: Path) -> None:
    path = write(case, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "cxlab.cli", "run", str(path), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "operator")},
    )  # fmt: skip
    assert done.returncode == USAGE_ERROR, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) >= 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiment.yaml"]


def test_a_directory_and_a_missing_file_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, says in ((tmp_path, "is a directory"), (tmp_path / "nope.yaml", "cannot read")):
        with pytest.raises(SystemExit) as exit_:
            main(["plan", str(path)])
        assert exit_.value.code == USAGE_ERROR
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
