"""The periodic sampler, in a process of its own: `python -S sampler_process.py PID FD`.

A sampler thread inside the runner would take the GIL at every sample, and each hand-over
is a context switch of the task thread: a sequential count loop on two cores showed 40-190
voluntary switches where a bare program shows 1 (the GIL seed). Out here it costs the
runner nothing but the kernel's work for /proc reads.

It samples the runner's resident memory and threads (children summed, proportional sizes
then, so memory shared after fork counts once) into a small int64 array the runner maps
(layout in SLOTS; FD is a memfd it passed down), until its stdin closes; then it samples
once more and exits. Only the standard library: it starts in a few milliseconds.
"""

from __future__ import annotations

import mmap
import os
import select
import struct
import sys
import time

TIMELINE_SAMPLES = 64
FIRST_INTERVAL_SECONDS = 0.05
LIVE_SECONDS = 1.0  # current values are at most this old, however sparse the timeline gets
# count, interval (ns), current rss, current threads, peak rss, peak threads, then timeline
SLOTS = 6 + TIMELINE_SAMPLES
SIZE = 8 * SLOTS
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return b""


def _field(status: bytes, name: bytes) -> int:
    for line in status.splitlines():
        if line.startswith(name):
            return int(line.split()[1])
    return 0


def _pss(pid: int) -> int:
    return _field(_read(f"/proc/{pid}/smaps_rollup"), b"Pss:") * 1024


def sample(pid: int, me: int) -> tuple[int, int]:
    """Resident bytes and threads of pid and its children (this sampler left out)."""
    children = [int(c) for c in _read(f"/proc/{pid}/task/{pid}/children").split()]
    children = [c for c in children if c != me]
    threads = sum(_field(_read(f"/proc/{p}/status"), b"Threads:") for p in [pid, *children])
    if children:
        return _pss(pid) + sum(_pss(c) for c in children), threads
    statm = _read(f"/proc/{pid}/statm").split()
    return (int(statm[1]) * PAGE_SIZE if len(statm) > 1 else 0), threads


def main(pid: int, fd: int) -> None:
    shared = mmap.mmap(fd, SIZE)
    me, started = os.getpid(), time.monotonic()
    interval, timeline = FIRST_INTERVAL_SECONDS, list[int]()
    peak_rss = peak_threads = 0
    ready = closed = False
    while True:
        rss, threads = sample(pid, me)
        peak_rss, peak_threads = max(peak_rss, rss), max(peak_threads, threads)
        # Sample k stands for k x interval from the start, whatever downsampling did before;
        # those this process was not scheduled for (a busy machine, up to the end of the
        # tasks) take this one's value, so the timeline spans the time it stands for.
        while time.monotonic() >= started + len(timeline) * interval:
            timeline.append(rss)
            if len(timeline) >= TIMELINE_SAMPLES:
                del timeline[1::2]
                interval *= 2
        values = [len(timeline), int(interval * 1e9), rss, threads, peak_rss, peak_threads]
        shared[:] = struct.pack(f"{SLOTS}q", *values, *timeline, *[0] * (64 - len(timeline)))
        if closed:  # the sample after the task phase: the last
            return
        if not ready:  # the runner waits for the first sample: its baseline
            os.write(1, b"1")
            ready = True
        next_at = started + len(timeline) * interval
        wait = max(0.0, min(next_at - time.monotonic(), LIVE_SECONDS))
        closed = bool(select.select([0], [], [], wait)[0])  # stdin closed: the tasks ended


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
