"""A process and all its descendants read from /proc: their CPU time and memory. The
arithmetic is pure (ProcStat values, cxlab_contract.proc_stat, and smaps_rollup text in,
figures out); `read_stats` and
`read_pss_bytes` are the readers.

CPU of a tree at an instant is the sum over its live processes of utime + stime + cutime +
cstime: a process that exited and was reaped handed its own time and its reaped children's to
its parent's cutime/cstime, so a worker that died in the window still counts (in its reaper's
figures). Not counted: a descendant re-parented away from the tree (a double fork to init)
before it was reaped."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from cxlab_contract.proc_stat import CLOCK_TICKS, ProcStat, read_stat


def read_stats() -> dict[int, ProcStat]:
    """Every process of the machine now (one that exits while read is left out)."""
    stats = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        stat = read_stat(entry.name)
        if stat is not None:  # None: it exited while read
            stats[stat.pid] = stat
    return stats


def tree(root: int, stats: Mapping[int, ProcStat]) -> dict[int, ProcStat]:
    """The root and every descendant of it in `stats` (empty if the root is gone)."""
    if root not in stats:
        return {}
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found, waiting = {}, [root]
    while waiting:
        pid = waiting.pop()
        found[pid] = stats[pid]
        waiting.extend(children.get(pid, ()))
    return found


def cpu_ticks(processes: Iterable[ProcStat]) -> int:
    return sum(p.ticks for p in processes)


def pss_bytes(smaps_rollup: str) -> int:
    """A process's proportional set size from /proc/PID/smaps_rollup: each page it maps
    divided by the processes that share it, so a tree's sum counts a shared page once."""
    for line in smaps_rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no Pss line in smaps_rollup")


def read_pss_bytes(pids: Iterable[int], proc: Path = Path("/proc")) -> int:
    """The tree's memory: its live processes' PSS summed (one that exits is left out)."""
    total = 0
    for pid in pids:
        try:
            total += pss_bytes(Path(proc, str(pid), "smaps_rollup").read_text())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # gone, or a zombie (it maps nothing)
    return total


def window_cpu_seconds(start_ticks: int, end_ticks: int) -> float:
    """The tree's CPU between two readings of cpu_ticks."""
    return max(end_ticks - start_ticks, 0) / CLOCK_TICKS


def died(seen: Mapping[int, int], root: int, now: Mapping[int, ProcStat]) -> int:
    """Processes of the tree (but the root) seen in at least two samples of the window that
    are gone or zombies at its end: workers that died. `seen`: each pid's samples. One seen
    once lived less than a sample's interval: a passing helper (a shell's `sleep`), not a
    worker."""
    return sum(
        1
        for pid, samples in seen.items()
        if pid != root and samples >= 2 and (pid not in now or now[pid].state == "Z")
    )
