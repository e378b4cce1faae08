"""The spec files `cxlab plan` and `cxlab run` read (YAML, several documents as `kubectl
apply -f` takes them): every broken rule told as `cxlab: FILE: [document N: ]FIELD: ...`, then
exit 2 before anything is run or written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

from cxlab.cli.exits import USAGE_ERROR
from cxlab.experiments.fields import SpecError
from cxlab.experiments.resource import ConcurrencyExperiment, load_experiments


def experiments_of(path: Path) -> list[ConcurrencyExperiment]:
    """Every ConcurrencyExperiment of the file (what `cxlab run` runs)."""
    try:
        return load_experiments(path)
    except SpecError as error:
        _refuse(path, error.problems)


def _refuse(path: Path, problems: list[str]) -> NoReturn:
    for problem in problems:
        print(f"cxlab: {path}: {problem}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR)
