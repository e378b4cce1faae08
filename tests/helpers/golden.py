"""The golden status's trials and their Results (tests/golden/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cxlab.experiments.plan import Trial


def result(trial: Trial) -> dict[str, Any]:
    frozen = json.loads((GOLDEN / "result.json").read_text())
    pool = frozen["pool"] if trial.model == "threads" else None  # a pool is threads' only
    return frozen | {"trial": trial.name, "model": trial.model, "pool": pool,
                     "cpus": [1]}  # fmt: skip


GOLDEN = Path(__file__).resolve().parents[1] / "golden"
