"""/proc/PID/stat, read one way by every part of cxlab that reads it (the runner's CPU of a
live child, a trial host's reaping, cxlab run's service tree). The command (field 2) is in
parentheses and may hold spaces and parentheses itself: the fields after it start after its
last ')'."""

from __future__ import annotations

import os
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat that cxlab uses (times in clock ticks)."""

    pid: int
    ppid: int
    state: str
    utime: int
    stime: int
    cutime: int
    cstime: int
    session: int = 0

    @property
    def ticks(self) -> int:
        """Its own CPU and its reaped descendants'."""
        return self.utime + self.stime + self.cutime + self.cstime


def parse_stat(text: str | bytes) -> ProcStat:
    """One /proc/PID/stat line. ValueError if it is not one."""
    line = text.decode() if isinstance(text, bytes) else text
    head, closing, tail = line.rpartition(")")
    rest = tail.split()
    if not closing or len(rest) < 15:
        raise ValueError(f"not a /proc/PID/stat line: {line[:80]!r}")
    # rest[0] is field 3 (state): field n is rest[n - 3]
    return ProcStat(
        pid=int(head[: head.index(" ")]), ppid=int(rest[1]), state=rest[0],
        utime=int(rest[11]), stime=int(rest[12]), cutime=int(rest[13]), cstime=int(rest[14]),
        session=int(rest[3]),
    )  # fmt: skip


def read_stat(pid: int | str) -> ProcStat | None:
    """The process's stat now; None once it is gone (or was never there)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return parse_stat(stat.read())
    except (OSError, ValueError):
        return None
