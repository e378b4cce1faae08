"""`cxlab compare A B`: two runs point by point, each side a result.json, one history entry's
JSON, DIR#RUN (a run of a history folder), FILE#RUN (a run of an ExperimentSchedule's
status.history), `-` or cx/NAME. 0 when no point of B is worse than A's, 1 when one is, 2 for
a source it cannot read or two runs without a point in common."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cxlab.cli.exits import USAGE_ERROR, usage
from cxlab.cli.settings import Settings
from cxlab.cli.sources import checked_document, first_problem, read_document
from cxlab.compare import ComparePolicy, NothingToCompare, compare
from cxlab.inputs import InputError, load_json_document
from cxlab.local.history_folder import load_history
from cxlab.report.compare import render_comparison
from cxlab.schedules.history import HistoryEntry, history_entry
from cxlab.table import comparison_text


def compare_command(args: argparse.Namespace, settings: Settings) -> int:
    """B against A, point by point: 1 when a point of B is worse."""
    before = _compare_side(settings, args.a, "A", args.namespace)
    after = _compare_side(settings, args.b, "B", args.namespace)
    policy = ComparePolicy(significance=args.significance, min_change=args.min_change)
    try:
        comparison = compare(before, after, policy)
    except NothingToCompare as error:
        print(f"cxlab: compare: {error}", file=sys.stderr)
        return USAGE_ERROR
    print(comparison_text(comparison, (args.a, args.b)))
    if args.html:
        args.html.write_text(render_comparison(comparison, (args.a, args.b)))
        print(f"\nreport: {args.html}")
    return 1 if comparison.worse else 0


def _compare_side(settings: Settings, source: str, which: str, namespace: str) -> HistoryEntry:
    """One side of `cxlab compare` as a history entry: cx/NAME or `-` (as `cxlab summary`
    reads them), a result.json, one history entry's JSON, DIR#RUN (a run of a history
    folder) or FILE#RUN (a run of an ExperimentSchedule's status.history)."""
    label = f"{which} {source}"
    if source.startswith("cx/") or source == "-":
        return history_entry(read_document(settings, source, namespace, label))
    path, run = Path(source), None
    if not path.exists() and "#" in source:
        head, run = source.rsplit("#", 1)
        path = Path(head)
    if path.is_dir():
        return _history_run(path, run, label)
    try:
        document = load_json_document(path)
    except InputError as error:
        raise usage(label, str(error)) from None
    if run is not None:
        history = (document.get("status") or {}).get("history")
        if not isinstance(history, list):
            raise usage(
                label,
                "has no status.history: #RUN names a run of an ExperimentSchedule "
                "(kubectl get cxs NAME -o json) or of a history folder",
            )
        return _named_run(history, run, label)
    if "run" in document and "metadata" not in document:
        return _history_entry(document, label)
    return history_entry(checked_document(document, label))


def _history_run(folder: Path, run: str | None, label: str) -> HistoryEntry:
    """A run of a history folder (`cxlab run --history DIR`)."""
    try:
        entries, _ = load_history(folder)
    except InputError as error:
        raise usage(label, str(error)) from None
    if run is None:
        names = ", ".join(e.run for e in entries[-3:])
        raise usage(label, f"is a history folder: name one of its runs, {folder}#RUN ({names})")
    return _named_run([e.document() for e in entries], run, label)


def _named_run(entries: list[Any], run: str, label: str) -> HistoryEntry:
    names = [e.get("run") if isinstance(e, dict) else None for e in entries]
    if run not in names:
        shown = ", ".join(str(n) for n in names[-5:])
        raise usage(label, f"{run!r} is not a run there; name one of: {shown or 'none'}")
    return _history_entry(entries[names.index(run)], label)


def _history_entry(document: dict[str, Any], label: str) -> HistoryEntry:
    try:
        return HistoryEntry.read(document)
    except ValidationError as error:
        raise usage(label, first_problem(error, "", "a history entry")) from None
