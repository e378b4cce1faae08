"""The end of `make test`: the time of each phase (build/test/phases.tsv, written by
hack/test.sh) and the ten slowest tests of every pytest run (its JUnit XML), as a table.

    python hack/test-report.py build/test
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

SLOWEST = 10


def phases(folder: Path) -> list[tuple[str, float, int, bool]]:
    """(phase, seconds, exit status, whether it ran in the background) as they ended; the
    whole run's wall time is the phase "wall"."""
    rows = []
    path = folder / "phases.tsv"
    for line in path.read_text().splitlines() if path.exists() else []:
        name, seconds, status, background = [*line.split("\t"), ""][:4]
        rows.append((name, float(seconds), int(status), background == "background"))
    return rows


def slowest(folder: Path, count: int = SLOWEST) -> list[tuple[float, str]]:
    """The slowest test cases of every JUnit report in the folder: (seconds, node id)."""
    cases = []
    for report in sorted(folder.glob("*.xml")):
        for case in ElementTree.parse(report).iter("testcase"):
            module = case.get("classname", "").replace(".", "/")
            cases.append((float(case.get("time") or 0), f"{module}.py::{case.get('name')}"))
    return sorted(cases, reverse=True)[:count]


def report(folder: Path) -> str:
    ran = phases(folder)
    lines = ["", "make test, phase by phase:"]
    total = None
    for name, seconds, status, background in ran:
        if name == "wall":
            total = seconds
            continue
        verdict = "" if status == 0 else f"  FAILED (exit {status})"
        beside = "  (in the background)" if background else ""
        lines.append(f"  {name:<10} {seconds:7.0f} s{verdict}{beside}")
    if total is not None:
        lines.append(f"  {'in all':<10} {total:7.0f} s ({total / 60:.1f} min, wall clock)")
    cases = slowest(folder)
    if cases:
        lines += ["", f"the {len(cases)} slowest tests (setup, call and teardown):"]
        lines += [f"  {seconds:7.1f} s  {name}" for seconds, name in cases]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1] if len(sys.argv) > 1 else "build/test")))
