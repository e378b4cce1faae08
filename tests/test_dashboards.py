"""The Grafana dashboards, rendered without Grafana: committed JSON matches the sources, and
every panel says what it shows (title, description, unit) over templated queries."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dashboards.__main__ import DASHBOARDS, FOLDER, rendered


def panels(name: str) -> list[dict[str, Any]]:
    return list(json.loads((FOLDER / name).read_text())["panels"])


def test_the_committed_json_is_what_the_sources_generate() -> None:
    stale = [p.name for p, text in rendered().items() if not p.exists() or p.read_text() != text]
    assert not stale, f"run `make dashboards`: {stale} differ from dashboards/*.py"


def test_rendering_is_stable() -> None:
    assert rendered() == rendered()


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
