"""Kubernetes conditions (metav1.Condition's fields), as both kinds keep them in status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from cxlab.shape import Maybe, Shape
from cxlab.times import whole_seconds

ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(Shape):
    """A Kubernetes condition (metav1.Condition's fields)."""

    type: str
    status: ConditionStatus
    reason: Maybe[str] = None
    message: Maybe[str] = None
    last_transition_time: Maybe[datetime] = None
    observed_generation: Maybe[int] = None

    @property
    def true(self) -> bool:
        return self.status == "True"


def condition_of(conditions: Iterable[Condition] | None, type_: str) -> Condition | None:
    """The condition of that type, if there is one."""
    return next((c for c in conditions or () if c.type == type_), None)


def is_true(conditions: Iterable[Condition] | None, type_: str) -> bool:
    found = condition_of(conditions, type_)
    return found is not None and found.true


def set_condition(
    conditions: Iterable[Condition] | None,
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime,
) -> list[Condition]:
    """The conditions with one set (last); its transition time moves only when its status
    does."""
    value: ConditionStatus = "Unknown" if status is None else "True" if status else "False"
    previous = condition_of(conditions, type_)
    moved = previous is None or previous.status != value
    since = whole_seconds(now) if moved or previous is None else previous.last_transition_time
    condition = Condition(
        type=type_, status=value, reason=reason, message=message,
        last_transition_time=since, observed_generation=generation,
    )  # fmt: skip
    return [c for c in conditions or () if c.type != type_] + [condition]


# A schedule's status is kept as its documents (cxlab.schedules.decide): its conditions too.


def condition_in(documents: Iterable[Mapping[str, Any]] | None, type_: str) -> Condition | None:
    """The condition of that type among conditions as written, if there is one."""
    return condition_of(_read(documents), type_)


def set_condition_in(
    documents: Iterable[Mapping[str, Any]] | None,
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """set_condition on conditions as written, returning them as written."""
    conditions = set_condition(
        _read(documents), type_, status, reason, message, generation=generation, now=now
    )
    return [c.document() for c in conditions]


def _read(documents: Iterable[Mapping[str, Any]] | None) -> list[Condition]:
    return [Condition.read(d) for d in documents or ()]
