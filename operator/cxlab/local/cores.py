"""Whether a trial fits this machine, and which cores a local trial is pinned to, mirroring
the static CPU manager's habit of keeping core 0 for the system: trials take the highest
cores, cxlab and the delay target keep the rest."""

from __future__ import annotations

import os
from dataclasses import dataclass

from cxlab.experiments.fields import memory_bytes
from cxlab.experiments.spec import Resources


class DoesNotFit(Exception):
    """A trial asks for more than this machine has: one line naming the field."""


class NotEnoughCores(DoesNotFit):
    pass


def total_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(resources: Resources) -> None:
    """Cores and memory of one trial Pod against this machine (`cxlab plan`, `cxlab run`)."""
    trial_cores(resources)
    total = total_memory_bytes()
    if memory_bytes(resources.memory) > total:
        raise DoesNotFit(
            f"resources.memory: asks for {resources.memory} but this machine has "
            f"{total / 2**30:.1f}Gi in all: lower it or run on a cluster"
        )


def available_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@dataclass(frozen=True)
class TrialCores:
    """The cores of each of a trial's processes (its Pods), and why they share cores when
    they do: then the trial is unpinned, whatever the processes' affinity says."""

    pods: list[set[int]]
    unpinned: str | None = None

    @property
    def all(self) -> set[int]:
        return set().union(*self.pods)


def trial_cores(
    resources: Resources, pods: int = 1, available: list[int] | None = None
) -> TrialCores:
    """Distinct cores for each Pod, the highest first, where the machine has them; else
    the Pods share the highest cores they would have taken, unpinned and marked so."""
    cores = available if available is not None else available_cores()
    whole = resources.whole_cpus
    if whole is None:
        return TrialCores(
            [set(cores)] * pods,
            f"resources.cpu {resources.cpu} is a fraction of a CPU: the trial shares this "
            f"machine's cores {cores}",
        )
    if whole > len(cores):
        raise NotEnoughCores(
            f"resources.cpu: asks for {whole} CPUs but this machine lets cxlab use "
            f"{len(cores)} ({cores}): lower it or run on a cluster"
        )
    if whole * pods > len(cores):
        shared = set(cores[-min(whole * pods, len(cores)) :])
        return TrialCores(
            [shared] * pods,
            f"{pods} Pods x {whole} CPU(s) need {whole * pods} cores but this machine lets "
            f"cxlab use {len(cores)}: they shared cores {sorted(shared)}",
        )
    return TrialCores([set(cores[len(cores) - whole * (i + 1) :][:whole]) for i in range(pods)])


def helper_cores(trial: set[int], available: list[int] | None = None) -> set[int]:
    """Cores for everything that is not the trial; all of them if the trial took every core."""
    cores = set(available if available is not None else available_cores())
    return (cores - trial) or cores


def service_cores(trials: set[int], available: list[int] | None = None) -> set[int]:
    """The cores of spec.service's process: every core the trials do not take (on a 2-core
    machine one each); none left is refused, naming the field that takes them."""
    cores = available if available is not None else available_cores()
    left = set(cores) - trials
    if not left:
        raise NotEnoughCores(
            f"resources.cpu: the trials take all {len(cores)} cores this machine lets cxlab "
            f"use ({cores}) and spec.service needs cores of its own, apart from the "
            f"generator's: lower resources.cpu or the Pods, or run on a cluster"
        )
    return left
