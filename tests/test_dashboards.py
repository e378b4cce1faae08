"""The Grafana dashboards, rendered without Grafana: committed JSON matches the sources, and
every panel says what it shows (title, description, unit) over templated queries."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from dashboards.__main__ import DASHBOARDS, FOLDER, rendered


def panels(name: str) -> list[dict[str, Any]]:
    return list(json.loads((FOLDER / name).read_text())["panels"])


def test_the_committed_json_is_what_the_sources_generate() -> None:
    stale = [p.name for p, text in rendered().items() if not p.exists() or p.read_text() != text]
    assert not stale, f"run `make dashboards`: {stale} differ from dashboards/*.py"


RENDER = (
    "import json, sys\n"
    "from dashboards.__main__ import rendered\n"
    "json.dump({p.name: text for p, text in rendered().items()}, sys.stdout)\n"
)


def _rendered_in_a_process(hash_seed: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(FOLDER.parent)}
    completed = subprocess.run([sys.executable, "-c", RENDER], capture_output=True, text=True,
                               env=env, cwd=FOLDER.parent, check=True)  # fmt: skip
    return dict(json.loads(completed.stdout))


def test_rendering_is_stable_across_processes_and_hash_seeds() -> None:
    # One process renders the same thing twice whatever it iterates over; only separate
    # processes with different string hashes show set/dict-order, time or uuid leaking in.
    here = {path.name: text for path, text in rendered().items()}
    for seed in ("0", "1", "4242"):
        there = _rendered_in_a_process(seed)
        assert sorted(there) == sorted(here)
        differ = [name for name in here if there[name] != here[name]]
        assert not differ, f"PYTHONHASHSEED={seed} renders {differ} differently"


def _sorted_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assert keys == sorted(keys), keys
    return dict(pairs)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_rendering_sorts_keys_and_indents_two_spaces(name: str) -> None:
    text = (FOLDER / name).read_text()
    board = json.loads(text, object_pairs_hook=_sorted_keys)
    assert text == json.dumps(board, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_panel_has_title_description_unit_and_templated_datasource(name: str) -> None:
    assert panels(name)
    for panel in panels(name):
        assert panel["title"] and panel["description"], panel
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            for window in re.findall(r"\brate\([^\[]*\[([^\]]+)\]", expr):
                assert window == "$__rate_interval", (panel["title"], expr)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_variables(name: str) -> None:
    board = json.loads((FOLDER / name).read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    if name != "operator-health.json":  # the operator's series belong to no experiment
        assert variables["experiment"]["type"] == "query"
        assert variables["model"]["multi"] and variables["model"]["includeAll"]
        for panel in panels(name):
            assert all("$experiment" in t["expr"] for t in panel["targets"]), panel["title"]
