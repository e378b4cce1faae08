"""cgroup v1 groups a test makes (we are root) to read a service's CPU and memory from the
kernel's own counters: an independent reading of what cxlab run measures from /proc."""

from __future__ import annotations

import contextlib
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
JOIN = Path(__file__).with_name("cgroup_join.sh")


class Cgroup:
    """cpuacct and memory groups of one name, made on creation, removed by remove()."""

    def __init__(self, name: str) -> None:
        self.name = name
        for controller in ("cpuacct", "memory"):
            (ROOT / controller / name).mkdir(exist_ok=True)

    def remove(self) -> None:
        for controller in ("cpuacct", "memory"):
            with contextlib.suppress(OSError):
                (ROOT / controller / self.name).rmdir()


def available() -> bool:
    return (ROOT / "cpuacct" / "cpuacct.usage").exists() and (ROOT / "memory").is_dir()


def joined(port: int, command: list[str]) -> list[str]:
    """COMMAND run in $CXLAB_TEST_CGROUP's groups (cgroup_join.sh): memory from its start,
    CPU from its first HTTP answer on PORT."""
    return [str(JOIN), str(port), *command]
