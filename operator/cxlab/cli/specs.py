"""The spec files `cxlab plan` and `cxlab run` read (YAML, several documents as `kubectl
apply -f` takes them): every broken rule told as `cxlab: FILE: [document N: ]FIELD: ...`, then
exit 2 before anything is run or written."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from cxlab.cli.exits import USAGE_ERROR
from cxlab.experiments.fields import SpecError
from cxlab.experiments.resource import ConcurrencyExperiment, load_experiments, parse_experiment
from cxlab.inputs import InputError, load_yaml_documents
from cxlab.schedules.spec import SCHEDULE_KIND, ExperimentSchedule, parse_experiment_schedule

Resource = ConcurrencyExperiment | ExperimentSchedule


def experiments_of(path: Path) -> list[ConcurrencyExperiment]:
    """Every ConcurrencyExperiment of the file (what `cxlab run` runs)."""
    try:
        return load_experiments(path)
    except SpecError as error:
        _refuse(path, error.problems)


def resources_of(path: Path) -> list[Resource]:
    """Every experiment and schedule of the file, in its order (what `cxlab plan` shows)."""
    try:
        documents = load_yaml_documents(path)
    except InputError as error:
        _refuse(path, [str(error)])
    if not documents:
        _refuse(
            path, ["holds no document; expected a ConcurrencyExperiment or an ExperimentSchedule"]
        )
    resources: list[Resource] = []
    problems: list[str] = []
    for number, document in enumerate(documents, start=1):
        where = f"document {number}: " if len(documents) > 1 else ""
        try:
            resources.append(_parser_of(document)(document))
        except SpecError as error:
            problems += [where + problem for problem in error.problems]
    problems += _names_used_twice(resources)
    if problems:
        _refuse(path, problems)
    return resources


def _parser_of(document: Any) -> Callable[[Any], Resource]:
    schedule = isinstance(document, dict) and document.get("kind") == SCHEDULE_KIND
    return parse_experiment_schedule if schedule else parse_experiment


def _names_used_twice(resources: Sequence[Resource]) -> list[str]:
    """Two of a kind with one name: the second would replace the first (kinds apart do not)."""
    names = [(r.kind, r.metadata.name) for r in resources]
    twice = sorted({n for n in names if names.count(n) > 1})
    return [f"metadata.name: {name!r} is used twice" for _, name in twice]


def _refuse(path: Path, problems: list[str]) -> NoReturn:
    for problem in problems:
        print(f"cxlab: {path}: {problem}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR)
