"""What the kernel knows about this trial: CPU times, context switches, resident memory and
threads, read from getrusage and /proc, plus a sampler that keeps a short RSS timeline."""

from __future__ import annotations

import mmap
import os
import resource
import struct
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cxlab_contract.proc_stat import CLOCK_TICKS, read_stat
from cxlab_runner import sampler_process

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


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


@dataclass(frozen=True)
class Switches:
    """Context switches of one thread (or a sum over threads)."""

    voluntary: int = 0
    involuntary: int = 0

    def __add__(self, other: Switches) -> Switches:
        return Switches(self.voluntary + other.voluntary, self.involuntary + other.involuntary)

    def __sub__(self, earlier: Switches) -> Switches:
        return Switches(self.voluntary - earlier.voluntary, self.involuntary - earlier.involuntary)


def thread_switches() -> Switches:
    """The calling thread's own context switches: what /proc/self/task/TID/status says of it,
    without the runner's sampler and metrics threads that RUSAGE_SELF also counts."""
    own = resource.getrusage(resource.RUSAGE_THREAD)
    return Switches(own.ru_nvcsw, own.ru_nivcsw)


def live_child_usage(pid: int) -> Usage:
    """CPU and switches of a child that has not been reaped yet (getrusage misses it)."""
    stat = read_stat(pid)
    if stat is None:
        return _ZERO
    try:
        voluntary = involuntary = 0
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"voluntary_ctxt_switches:"):
                    voluntary = int(line.split()[1])
                elif line.startswith(b"nonvoluntary_ctxt_switches:"):
                    involuntary = int(line.split()[1])
        return Usage(stat.utime / CLOCK_TICKS, stat.stime / CLOCK_TICKS, voluntary, involuntary)
    except (OSError, IndexError, ValueError):
        return _ZERO


def peak_rss_bytes_of_self() -> int:
    """The kernel's high-water mark of this process's resident memory (VmHWM). Not
    getrusage's ru_maxrss: that survives exec, so a runner started from a bigger parent
    would report the parent's peak."""
    return _status_field(b"VmHWM:") * 1024


def peak_vm_bytes(pid: int | str = "self") -> int:
    """The kernel's high-water mark of the process's virtual memory (VmPeak): address space
    reserved, thread stacks included, whether or not it was ever touched."""
    return _status_field(b"VmPeak:", pid) * 1024


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
    """Resident memory and threads of this process (children summed: proportional sizes
    then, so memory shared after fork counts once).

    During the task phase a sampler process (sampler_process.py) keeps the peaks and a
    timeline that starts at FIRST_INTERVAL_SECONDS and keeps at most TIMELINE_SAMPLES values:
    when full, every other sample is dropped and the interval doubles, so the timeline always
    spans the whole task phase with evenly spaced points, whatever its length. sample() is
    the scrape's own reading, in this process.
    """

    def __init__(self, child_pids: Callable[[], Iterable[int]] = tuple) -> None:
        self.child_pids = child_pids
        self._process: subprocess.Popen[bytes] | None = None
        self._shared: mmap.mmap | None = None
        self._values: tuple[int, ...] = (0,) * sampler_process.SLOTS
        self.current_rss = 0
        self.current_threads = 0
        self._peak_rss = 0
        self._peak_threads = 0

    def sample(self) -> int:
        pids = list(self.child_pids())
        rss = pss_bytes() + sum(pss_bytes(pid) for pid in pids) if pids else rss_bytes()
        threads = thread_count() + sum(thread_count(pid) for pid in pids)
        self.current_rss = rss
        self.current_threads = threads
        self._peak_rss = max(self._peak_rss, rss)
        self._peak_threads = max(self._peak_threads, threads)
        return rss

    def _shared_values(self) -> tuple[int, ...]:
        if self._shared is not None:
            self._values = struct.unpack(f"{sampler_process.SLOTS}q", self._shared[:])
        return self._values

    @property
    def peak_rss(self) -> int:
        return max(self._peak_rss, self._shared_values()[4])

    @property
    def peak_threads(self) -> int:
        return max(self._peak_threads, self._shared_values()[5])

    @property
    def interval(self) -> float:
        return self._shared_values()[1] / 1e9 or sampler_process.FIRST_INTERVAL_SECONDS

    @property
    def timeline(self) -> list[int]:
        values = self._shared_values()
        return list(values[6 : 6 + values[0]])

    def cpu_usage(self) -> Usage:
        """usage() plus the children still running, for live metrics."""
        total = usage()
        for pid in self.child_pids():
            total = total + live_child_usage(pid)
        return total

    def start(self) -> None:
        """Start the sampler process; back once it has taken the first sample."""
        # A memfd: shared with the child by descriptor, no file system needed (a Pod's
        # root may be read-only).
        fd = os.memfd_create("cxlab-sampler")
        try:
            os.ftruncate(fd, sampler_process.SIZE)
            self._shared = mmap.mmap(fd, sampler_process.SIZE)
            self._process = subprocess.Popen(
                [sys.executable, "-S", sampler_process.__file__, str(os.getpid()), str(fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=(fd,),
            )
        finally:
            os.close(fd)
        assert self._process.stdout is not None
        if self._process.stdout.read(1) != b"1":
            raise RuntimeError(f"the sampler process failed (exit {self._process.wait()})")

    def stop(self) -> None:
        """The last sample (the peaks include the very end of the task phase), then its
        values are kept here."""
        if self._process is None:
            return
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait()
        self._shared_values()
        self._shared = None
        self._process = None
