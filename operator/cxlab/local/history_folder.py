"""The local backend's history folder: every `cxlab run --history DIR` adds its result
document, named as the operator names a scheduled run (<experiment>-<unix seconds>), and
`cxlab history DIR` reads them back as the schedule's history entries (the same pure code as
the operator: cxlab.schedules.history)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from cxlab.inputs import InputError, load_json_document
from cxlab.schedules.history import HistoryEntry, history_entry, newest_succeeded
from cxlab.times import parse_time, timestamp


def save_run(document: dict[str, Any], folder: Path) -> Path:
    """A copy of the run's document in the folder, under the run's own name."""
    started = (document.get("status") or {}).get("startTime")
    moment = parse_time(started) if started else datetime.now()
    name = f"{document['metadata']['name']}-{int(moment.timestamp())}"
    run = {**document, "metadata": {**document["metadata"], "name": name}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(run, indent=1) + "\n")
    return path


def load_history(folder: Path) -> tuple[list[HistoryEntry], dict[str, Any] | None]:
    """The folder's runs as history entries, oldest first, and the newest succeeded run's
    document (its capacity plan); InputError names the file that cannot be read."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder; run `cxlab run FILE --history {folder}`")
    documents = []
    for path in sorted(folder.glob("*.json")):
        try:
            document = load_json_document(path)
        except InputError as error:
            raise InputError(f"{path}: {error}") from None
        if "status" not in document or "metadata" not in document:
            raise InputError(f"{path}: is not a result document of `cxlab run`")
        documents.append(document)
    if not documents:
        raise InputError(f"{folder}: holds no run; run `cxlab run FILE --history {folder}`")
    entries = sorted(
        (history_entry(d) for d in documents),
        key=lambda e: (timestamp(e.scheduled_time) if e.scheduled_time else "", e.run),
    )
    by_name = {d["metadata"]["name"]: d for d in documents}
    newest = newest_succeeded(entries)
    return entries, by_name[newest.run] if newest else None
