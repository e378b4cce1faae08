"""What the queue's cluster tests share: experiments that take a few seconds, and how to read
that they ran one after another."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from itertools import pairwise
from typing import Any

from cxlab.times import parse_time
from helpers.cluster import Lab, experiment_spec


def short(seconds: int = 3) -> dict[str, Any]:
    """One trial holding the core for a few seconds."""
    return experiment_spec(ASYNCIO, {"type": "sleep", "tasks": 1, "rtt": f"{seconds}s"})


def status(experiment: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = experiment.get("status") or {}
    return found


def condition(experiment: dict[str, Any], kind: str) -> dict[str, Any]:
    found = {c["type"]: c for c in status(experiment).get("conditions") or []}
    return found.get(kind, {})


def moment(text: str) -> datetime:
    return parse_time(text)


def started_after_it_finished(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """cxlab's queue: an admitted experiment holds its slot until it has finished, so the next
    one's first trial starts once the one before has a completion time (1 s stamps)."""
    return moment(status(after)["startTime"]) >= moment(status(before)["completionTime"])


def assert_ran_one_after_another(
    lab: Lab, names: list[str], follows: Callable[[Any, Any], bool] = started_after_it_finished
) -> list[dict[str, Any]]:

    done = [lab.wait_finished(name, timeout=180) for name in names]
    for experiment in done:
        assert status(experiment)["phase"] == "Succeeded", status(experiment)
        [entry] = status(experiment)["trials"]
        assert entry["attempts"] == 1  # no trial ran twice
    for before, after in pairwise(done):
        assert follows(before, after), (status(before), status(after))
    return done


ASYNCIO = [{"model": "asyncio"}]
