"""/proc/PID/stat as cxlab reads it, against the kernel's own answers for this process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cxlab_contract.proc_stat import parse_stat, read_stat


def test_a_command_with_spaces_and_parentheses_leaves_the_fields_after_it_in_place() -> None:
    fields = ["R", "7", "8", "9"] + ["0"] * 7 + ["11", "12", "13", "14"] + ["0"] * 30
    line = f"42 (a) (b c) {' '.join(fields)}\n"
    stat = parse_stat(line.encode())
    assert (stat.pid, stat.state, stat.ppid, stat.session) == (42, "R", 7, 9)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (11, 12, 13, 14)
    assert stat.ticks == 50


def test_this_process_reads_as_the_kernel_says() -> None:
    stat = read_stat(os.getpid())
    assert stat is not None
    assert (stat.pid, stat.ppid, stat.session) == (os.getpid(), os.getppid(), os.getsid(0))
    assert stat.state in "RS"


def test_a_process_gone_reads_as_none_and_a_line_that_is_not_one_is_refused() -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert read_stat(int(child.stdout)) is None
    with pytest.raises(ValueError, match="not a /proc/PID/stat line"):
        parse_stat("42 (w) S 1")
