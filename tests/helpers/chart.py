"""The Helm chart rendered with the Helm built for the tests, and its resources by kind."""

from __future__ import annotations

import functools
import json
import subprocess
from typing import Any

import pytest
import yaml

from helpers import ROOT

CHART = ROOT / "charts" / "cxlab"


def render(
    *sets: str, namespace: str = "cxlab-system", json_values: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The chart's resources with these values (fresh dicts: a test may change them);
    json_values by --set-json, where --set would read a backslash as its own escape."""
    as_json = tuple(f"{key}={json.dumps(value)}" for key, value in (json_values or {}).items())
    return [doc for doc in yaml.safe_load_all(_template(sets, namespace, as_json)) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str, hooks: bool = False) -> list[dict[str, Any]]:
    """The resources of a kind: the release's, or (hooks=True) the helm test's."""
    return [doc for doc in docs if doc["kind"] == kind and is_hook(doc) == hooks]


def only(docs: list[dict[str, Any]], kind: str, hooks: bool = False) -> dict[str, Any]:
    found = of_kind(docs, kind, hooks)
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


@functools.cache
def _template(sets: tuple[str, ...], namespace: str, as_json: tuple[str, ...] = ()) -> str:
    """`helm template`, once per values in each test process: it takes seconds beside the
    cluster tests, and the chart's tests render the same values many times."""
    args = ["template", "cx", str(CHART), "--namespace", namespace]
    for value in sets:
        args += ["--set", value]
    for value in as_json:
        args += ["--set-json", value]
    return helm(*args)


def is_hook(doc: dict[str, Any]) -> bool:
    return "helm.sh/hook" in (doc["metadata"].get("annotations") or {})


def helm(*args: str) -> str:
    if not HELM.exists():
        pytest.fail("helm is not built: run `make helm`")
    run = subprocess.run([str(HELM), *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr + run.stdout
    return run.stdout


HELM = ROOT / "build" / "bin" / "helm"
