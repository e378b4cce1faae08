"""Whether a trial fits this machine, and which cores a local trial is pinned to, mirroring
the static CPU manager's habit of keeping core 0 for the system: trials take the highest
cores, cxlab and the delay target keep the rest."""

from __future__ import annotations

import os

from cxlab.spec import Resources, memory_bytes


class DoesNotFit(Exception):
    """A trial asks for more than this machine has: one line naming the field."""


class NotEnoughCores(DoesNotFit):
    pass


def total_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(resources: Resources) -> None:
    """Cores and memory of one trial against this machine (`cxlab plan` and `cxlab run`)."""
    trial_cores(resources.cpu)
    total = total_memory_bytes()
    if memory_bytes(resources.memory) > total:
        raise DoesNotFit(
            f"resources.memory: asks for {resources.memory} but this machine has "
            f"{total / 2**30:.1f}Gi in all: lower it or run on a cluster"
        )


def available_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def trial_cores(count: int, available: list[int] | None = None) -> set[int]:
    cores = available if available is not None else available_cores()
    if count > len(cores):
        raise NotEnoughCores(
            f"resources.cpu: asks for {count} CPUs but this machine lets cxlab use "
            f"{len(cores)} ({cores}): lower it or run on a cluster"
        )
    return set(cores[-count:])


def helper_cores(trial: set[int], available: list[int] | None = None) -> set[int]:
    """Cores for everything that is not the trial; all of them if the trial took every core."""
    cores = set(available if available is not None else available_cores())
    return (cores - trial) or cores
