"""What the host does to a trial's process and files, as the kubelet and the container
runtime would: signals to its group, the reaping of what it leaves behind, its cgroup's OOM
kills, and the kernel's word (inotify) that its Result is written."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cxlab_contract.proc_stat import read_stat

if TYPE_CHECKING:
    from cxlab_runner.trial_host.manifest import TrialSpec

READY_POLL_SECONDS = 0.05  # only where inotify is unavailable
_IN_CLOSE_WRITE, _IN_MOVED_TO, _IN_Q_OVERFLOW = 0x8, 0x80, 0x4000
_EVENT = struct.Struct("iIII")  # struct inotify_event, before its name
_PR_SET_CHILD_SUBREAPER = 36


def watch_result(
    path: str, watch: int | None, wake: int, exited: threading.Event, ready: Callable[[], None]
) -> None:
    """Calls ready once the runner has written its Result (which it does before its /done
    answers 200): woken by the kernel, not by polling, since the trial runs on the same
    cores and the host must not take CPU from it. Returns without a call once the process
    has ended (wake, a pipe's end, is closed; exited is set). Closes watch and wake."""
    try:
        if watch is None:
            while not exited.wait(READY_POLL_SECONDS):
                if written(path):
                    ready()
                    return
            return
        name = os.fsencode(os.path.basename(path))
        poller = select.poll()
        poller.register(watch, select.POLLIN)
        poller.register(wake, select.POLLIN)
        while True:
            if wake in {fd for fd, _ in poller.poll()}:
                return  # the process has ended
            if _concerns(os.read(watch, 65536), name) and written(path):
                ready()
                return
    finally:
        if watch is not None:
            os.close(watch)
        os.close(wake)


def remove_files(spec: TrialSpec) -> None:
    for path in (spec.result_path, f"{spec.result_path}.partial", spec.log_path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def written(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def signal_process(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # not yet its group's leader (a forked child starting)
        signal_process(pid, signal.SIGKILL)


def end_session(session: int) -> None:
    """After a trial's process has ended: kill what it left running (the kubelet ends every
    process of a container with its main one) and reap those left to the host, which is PID 1
    in its container (a subreaper elsewhere): each would stay a zombie otherwise."""
    try:
        os.killpg(session, signal.SIGKILL)
    except ProcessLookupError:
        return  # nothing left
    for _ in range(20):
        if not _reap(session):
            return
        time.sleep(0.05)  # SIGKILL is delivered, and the zombies made, asynchronously


def _reap(session: int) -> int:
    """Reap the host's zombie children of the session; how many of its processes are left."""
    left, me = 0, os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read_stat(entry)
        if stat is None or stat.session != session:  # None: it exited meanwhile
            continue
        if stat.state == "Z" and stat.ppid == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry), os.WNOHANG)
        else:
            left += 1
    return left


def oom_kills() -> int | None:
    """The host's cgroup's count of OOM kills (cgroup v2); None where it cannot be read."""
    try:
        with open("/proc/self/cgroup") as cgroup:
            path = next(line[3:].strip() for line in cgroup if line.startswith("0::"))
        with open(f"/sys/fs/cgroup{path.rstrip('/')}/memory.events") as events:
            for line in events:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, StopIteration, ValueError):
        pass
    return None


_libc: ctypes.CDLL | None = None


def inotify(folder: str) -> int | None:
    """An inotify descriptor watching the folder for files written and closed, or renamed
    into it; None where inotify is unavailable (then the host checks every 50 ms)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.inotify_init1.argtypes = [ctypes.c_int]
            _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = int(_libc.inotify_init1(os.O_CLOEXEC))  # IN_CLOEXEC is O_CLOEXEC
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if int(_libc.inotify_add_watch(fd, os.fsencode(folder), _IN_CLOSE_WRITE | _IN_MOVED_TO)) < 0:
        os.close(fd)
        return None
    return fd


def _concerns(events: bytes, name: bytes) -> bool:
    """Whether the inotify events read name the file (or were too many to tell)."""
    offset = 0
    while offset + _EVENT.size <= len(events):
        _, mask, _, length = _EVENT.unpack_from(events, offset)
        start = offset + _EVENT.size
        if mask & _IN_Q_OVERFLOW or events[start : start + length].rstrip(b"\0") == name:
            return True
        offset = start + length
    return False


def become_subreaper() -> None:
    """Outside a container too, what a trial leaves behind comes to the host to reap, as it
    does to PID 1 in one."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
