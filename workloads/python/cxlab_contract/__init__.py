"""The runner contract's data files (workloads/CONTRACT.md), shared by the runners, the
operator and the CRD generator. Read as package data, so an installed package and the
operator image find them without the repository's layout; the Go runner's tests read the
same files by path."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

RESULT_SCHEMA = "result-v1.schema.json"


def result_schema() -> dict[str, Any]:
    """The Result's JSON Schema (version 1)."""
    document: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath(RESULT_SCHEMA).read_text(encoding="utf-8")
    )
    return document
