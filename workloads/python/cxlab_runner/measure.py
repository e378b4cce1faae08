"""What the kernel knows about this trial: CPU times, context switches, resident memory and
threads, read from getrusage and /proc, plus a sampler that keeps a short RSS timeline."""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
TIMELINE_SAMPLES = 64
FIRST_INTERVAL_SECONDS = 0.05


@dataclass(frozen=True)
class Usage:
    """Cumulative CPU and scheduling counters of this process and its reaped children."""

    user_seconds: float
    system_seconds: float
    voluntary_switches: int
    involuntary_switches: int

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.user_seconds + other.user_seconds,
            self.system_seconds + other.system_seconds,
            self.voluntary_switches + other.voluntary_switches,
            self.involuntary_switches + other.involuntary_switches,
        )

    def __sub__(self, earlier: Usage) -> Usage:
        return Usage(
            self.user_seconds - earlier.user_seconds,
            self.system_seconds - earlier.system_seconds,
            self.voluntary_switches - earlier.voluntary_switches,
            self.involuntary_switches - earlier.involuntary_switches,
        )


def usage() -> Usage:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Usage(
        own.ru_utime + kids.ru_utime,
        own.ru_stime + kids.ru_stime,
        own.ru_nvcsw + kids.ru_nvcsw,
        own.ru_nivcsw + kids.ru_nivcsw,
    )


_ZERO = Usage(0.0, 0.0, 0, 0)
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def live_child_usage(pid: int) -> Usage:
    """CPU and switches of a child that has not been reaped yet (getrusage misses it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # Fields after the parenthesised command name; utime and stime are 14 and 15.
            fields = stat.read().rsplit(b")", 1)[1].split()
        voluntary = involuntary = 0
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"voluntary_ctxt_switches:"):
                    voluntary = int(line.split()[1])
                elif line.startswith(b"nonvoluntary_ctxt_switches:"):
                    involuntary = int(line.split()[1])
        return Usage(
            int(fields[11]) / _CLOCK_TICKS, int(fields[12]) / _CLOCK_TICKS, voluntary, involuntary
        )
    except (OSError, IndexError, ValueError):
        return _ZERO


def peak_rss_bytes_of_self() -> int:
    """The kernel's high-water mark of this process's resident memory (VmHWM). Not
    getrusage's ru_maxrss: that survives exec, so a runner started from a bigger parent
    would report the parent's peak."""
    return _status_field(b"VmHWM:") * 1024


def _status_field(name: bytes, pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(name):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def rss_bytes(pid: int | str = "self") -> int:
    """Resident bytes of one process; 0 once it has gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def pss_bytes(pid: int | str = "self") -> int:
    """Proportional resident bytes: pages shared after fork count once in a sum over processes,
    where plain RSS would count them in every child."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def thread_count(pid: int | str = "self") -> int:
    return _status_field(b"Threads:", pid)


def raise_open_files_limit() -> int:
    """Lift the soft open-files limit to the hard one: many sockets need many descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class Sampler:
    """Samples RSS and thread count of this process (plus any child pids it is told about:
    then the sum is of proportional set sizes, so memory shared after fork counts once).

    The timeline starts at FIRST_INTERVAL_SECONDS and keeps at most TIMELINE_SAMPLES values:
    when full, every other sample is dropped and the interval doubles, so the timeline always
    spans the whole task phase with evenly spaced points, whatever its length.
    """

    def __init__(self, child_pids: Callable[[], Iterable[int]] = tuple) -> None:
        self.child_pids = child_pids
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self.interval = FIRST_INTERVAL_SECONDS
        self.timeline: list[int] = []
        self.peak_rss = 0
        self.peak_threads = 0
        self.current_rss = 0
        self.current_threads = 0

    def sample(self) -> int:
        pids = list(self.child_pids())
        rss = pss_bytes() + sum(pss_bytes(pid) for pid in pids) if pids else rss_bytes()
        threads = thread_count() + sum(thread_count(pid) for pid in pids)
        self.current_rss = rss
        self.current_threads = threads
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_threads = max(self.peak_threads, threads)
        return rss

    def cpu_usage(self) -> Usage:
        """usage() plus the children still running, for live metrics."""
        total = usage()
        for pid in self.child_pids():
            total = total + live_child_usage(pid)
        return total

    def start(self) -> None:
        self._started = time.monotonic()
        self.timeline.append(self.sample())
        self._thread = threading.Thread(target=self._run, name="cxlab-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Sample k is due at k x interval from the start, whatever downsampling did before.
        while not self._stop.wait(self._due() - time.monotonic()):
            self.timeline.append(self.sample())
            if len(self.timeline) >= TIMELINE_SAMPLES:
                del self.timeline[1::2]
                self.interval *= 2

    def _due(self) -> float:
        return self._started + len(self.timeline) * self.interval

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()  # the peaks include the very end of the task phase
