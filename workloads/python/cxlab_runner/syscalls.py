"""--syscalls: the trial run again as a child of `strace -c -f`, its Result given the counts.

strace counts every thread and child of the runner (the seed's futex storm shows up as
futex calls). It stops the tracee at every system call, so the trial is slower: opt-in.
Where strace is missing or may not trace (ptrace refused), the trial runs untraced and its
Result says why ("unavailable"), never a count of 0."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from cxlab_contract.result import MAX_SYSCALL_COUNTS, Syscalls, encode
from cxlab_runner.end import UNDER_STRACE
from cxlab_runner.result import write


def parse_summary(text: str) -> dict[str, Any] | None:
    """strace -c's table → {"total": calls, "counts": {name: calls}}; None if it has no rows
    (strace never got to trace)."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        # Rows: % time, seconds, usecs/call, calls, [errors], syscall; calls is always 4th.
        if len(fields) < 5 or not fields[3].isdigit() or fields[-1] == "total":
            continue
        counts[fields[-1]] = counts.get(fields[-1], 0) + int(fields[3])
    if not counts:
        return None
    top = sorted(counts, key=lambda name: -counts[name])[:MAX_SYSCALL_COUNTS]
    if "futex" in counts and "futex" not in top:
        top[-1] = "futex"
    return {"total": sum(counts.values()), "counts": {name: counts[name] for name in top}}


def unavailable(reason: str) -> Syscalls:
    return {"unavailable": reason[:200]}


def run_traced(argv: list[str], result_path: str | None) -> tuple[int, Syscalls | None]:
    """Run the runner with argv (without --syscalls) under strace. Returns the exit status,
    and None when the traced run did it all; otherwise why strace could not be used, for the
    caller to run the trial untraced."""
    strace = shutil.which("strace")
    if strace is None:
        return 0, unavailable("strace is not installed where the runner runs")
    with tempfile.TemporaryDirectory(prefix="cxlab-strace-") as folder:
        summary, inner = Path(folder, "summary.txt"), Path(folder, "result.json")
        command = [strace, "-f", "-c", "-o", str(summary), "--", sys.executable, "-m"]
        command += ["cxlab_runner", *argv, "--result-path", str(inner)]
        status, last_words = _run(command)
        text = summary.read_text(errors="replace") if summary.exists() else ""
        counted = parse_summary(text)
        if counted is None and not inner.exists():  # strace failed before the trial began
            return 0, unavailable(f"strace could not trace: {last_words or f'exit {status}'}")
        if inner.exists():
            result = json.loads(inner.read_text())
            result["syscalls"] = counted or unavailable("strace wrote no counts")
            write(encode(result), result_path)
        return status, None


def _run(command: list[str]) -> tuple[int, str]:
    """Run strace and its runner; pass SIGTERM on to the runner (strace would detach and
    leave it running); relay stderr, keeping the last line of strace's own."""
    environment = {**os.environ, UNDER_STRACE: "1"}  # its Result is not the trial's
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment
    )
    last: collections.deque[str] = collections.deque(maxlen=1)
    relay = threading.Thread(target=_relay, args=(process.stderr, last), daemon=True)
    relay.start()
    previous = signal.signal(signal.SIGTERM, lambda *_: _terminate_runner(process.pid))
    try:
        status = process.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    relay.join()
    return status, last[0] if last else ""


def _relay(stream: IO[bytes] | None, last: collections.deque[str]) -> None:
    assert stream is not None
    for raw in stream:
        line = raw.decode(errors="replace")
        sys.stderr.write(line)
        if line.startswith("strace:"):
            last.append(line.strip())
    sys.stderr.flush()


def _terminate_runner(strace_pid: int) -> None:
    try:
        children = Path(f"/proc/{strace_pid}/task/{strace_pid}/children").read_text().split()
    except OSError:
        children = []
    for pid in children or [str(strace_pid)]:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGTERM)
