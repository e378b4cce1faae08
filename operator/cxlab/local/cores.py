"""Which cores a local trial is pinned to, mirroring the static CPU manager's habit of
keeping core 0 for the system: trials take the highest cores, cxlab and the delay target
keep the rest."""

from __future__ import annotations

import os


class NotEnoughCores(Exception):
    pass


def available_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def trial_cores(count: int, available: list[int] | None = None) -> set[int]:
    cores = available if available is not None else available_cores()
    if count > len(cores):
        raise NotEnoughCores(
            f"resources.cpu is {count} but this machine lets cxlab use {len(cores)} "
            f"CPUs ({cores}): lower resources.cpu or run on a cluster"
        )
    return set(cores[-count:])


def helper_cores(trial: set[int], available: list[int] | None = None) -> set[int]:
    """Cores for everything that is not the trial; all of them if the trial took every core."""
    cores = set(available if available is not None else available_cores())
    return (cores - trial) or cores
