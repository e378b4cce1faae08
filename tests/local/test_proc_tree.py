"""The process tree's CPU and memory arithmetic from /proc-like stat lines."""

from __future__ import annotations

import os

from cxlab.local.proc_tree import cpu_ticks, died, pss_bytes, read_stats, tree, window_cpu_seconds
from cxlab_contract.proc_stat import CLOCK_TICKS, ProcStat, parse_stat


def _line(pid: int, ppid: int, times: tuple[int, int, int, int], comm: str = "w") -> str:
    """A /proc/PID/stat line: fields 3 … 24 with the ones parse_stat reads set."""
    fields = ["S", str(ppid)] + ["0"] * 9 + [str(t) for t in times] + ["0"] * 6 + ["99"]
    return f"{pid} ({comm}) {' '.join(fields)} 0 0 0\n"


def _stat(
    pid: int, ppid: int, ticks: tuple[int, int, int, int] = (0, 0, 0, 0), state: str = "S"
) -> ProcStat:
    return ProcStat(pid, ppid, state, *ticks)


def test_a_command_with_spaces_and_parentheses_is_skipped_whole() -> None:
    stat = parse_stat(_line(41, 7, (11, 12, 13, 14), comm="gunicorn: worker (x) [a]"))
    assert stat == ProcStat(41, 7, "S", 11, 12, 13, 14)
    assert stat.ticks == 11 + 12 + 13 + 14


def test_this_process_reads_as_itself() -> None:
    me = read_stats()[os.getpid()]
    assert me.ppid == os.getppid() and me.utime + me.stime > 0


def test_the_tree_is_the_root_and_its_descendants_only() -> None:
    stats = {s.pid: s for s in [_stat(1, 0), _stat(10, 1), _stat(11, 10), _stat(12, 11),
                                _stat(20, 1), _stat(13, 10)]}  # fmt: skip
    assert set(tree(10, stats)) == {10, 11, 12, 13}
    assert tree(99, stats) == {}


def test_a_worker_that_died_in_the_window_still_counts_through_its_reaper() -> None:
    # start: master 10 (5 ticks), workers 11 (40) and 12 (30)
    start = [_stat(10, 1, (3, 2, 0, 0)), _stat(11, 10, (30, 10, 0, 0)),
             _stat(12, 10, (20, 10, 0, 0))]  # fmt: skip
    # end: 12 died after 50 ticks in all, reaped by the master (its cutime/cstime); a new 13
    end = [_stat(10, 1, (4, 2, 40, 10)), _stat(11, 10, (60, 20, 0, 0)),
           _stat(13, 10, (7, 1, 0, 0))]  # fmt: skip
    cpu = window_cpu_seconds(cpu_ticks(start), cpu_ticks(end))
    # the master 1 tick, worker 11: 40, worker 12: 20 more before it died, the new 13: 8
    assert cpu * CLOCK_TICKS == 1 + 40 + 20 + 8
    assert died({10: 9, 11: 9, 12: 4, 13: 2}, 10, {s.pid: s for s in end}) == 1


def test_a_zombie_has_died() -> None:
    now = {10: _stat(10, 1), 11: _stat(11, 10, state="Z"), 12: _stat(12, 10)}
    assert died({10: 2, 11: 2, 12: 2}, 10, now) == 1


def test_a_process_seen_in_one_sample_only_is_no_restart() -> None:
    assert died({10: 5, 11: 1, 12: 2}, 10, {10: _stat(10, 1)}) == 1


def test_pss_is_read_from_smaps_rollup_in_kib() -> None:
    rollup = "55d0-7ffd ---p 00000000 00:00 0  [rollup]\nRss:  1780 kB\nPss:  279 kB\n"
    assert pss_bytes(rollup) == 279 * 1024


def test_the_root_is_never_a_restart() -> None:
    assert died({10: 3}, 10, {}) == 0
