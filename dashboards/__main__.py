"""python -m dashboards [--check]: write dashboards/*.json (or only say which would change)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dashboards import capacity, experiment, models, operator
from dashboards.panels import to_json

FOLDER = Path(__file__).resolve().parent
DASHBOARDS: dict[str, Any] = {
    "capacity-planning.json": capacity.dashboard,
    "experiment-overview.json": experiment.dashboard,
    "model-comparison.json": models.dashboard,
    "operator-health.json": operator.dashboard,
}


def rendered() -> dict[Path, str]:
    return {FOLDER / name: to_json(make()) for name, make in DASHBOARDS.items()}


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, text in rendered().items():
        if not path.exists() or path.read_text() != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    for path in stale:
        print(f"{'stale' if check else 'wrote'}: {path.relative_to(FOLDER.parent)}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
