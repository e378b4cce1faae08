"""Conditions in the Kubernetes shape: type, status, reason, message, lastTransitionTime,
observedGeneration; the transition time moves only when the status does."""

from __future__ import annotations

from datetime import datetime
from typing import Any

Condition = dict[str, Any]


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime,
) -> list[Condition]:
    value = "Unknown" if status is None else str(status)
    previous = next((c for c in conditions if c.get("type") == type_), None)
    changed = previous is None or previous.get("status") != value
    condition = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": (
            now.strftime("%Y-%m-%dT%H:%M:%SZ")
            if changed or previous is None
            else previous.get("lastTransitionTime")
        ),
        "observedGeneration": generation,
    }
    return [c for c in conditions if c.get("type") != type_] + [condition]
