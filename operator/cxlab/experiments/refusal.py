"""A Pod the apiserver refused, as the next pass decides on it (pure)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """A Pod the apiserver refused for what it is (400, 422; a 403 from admission) when a
    pass's act step created it: a fact the next pass decides on (Observed.refused), as it
    would on a Pod's phase. `created`: the Pods that step created before it, which go too."""

    pod: str
    code: int
    reason: str
    message: str
    created: tuple[str, ...] = ()
