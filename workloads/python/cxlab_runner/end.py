"""The end of the task phase, told to whoever drives the runner (workloads/CONTRACT.md):
GET /done answers 200 once the Result is written (a trial Pod's readiness probe, so a Ready
trial Pod has final values to read; with ?wait=S it waits up to S for that, the operator's
long poll), GET /result answers the Result itself from then on (the
operator records a trial without waiting for the container's exit), and the first GET
/metrics?final=1 after that is the final read the runner waits for with --final-read."""

from __future__ import annotations

import signal
import sys
import threading
import time

from cxlab_contract.durations import format_duration

# Set in the environment of a trial run under strace (--syscalls, syscalls.py): its Result is
# not the trial's, which the outer runner writes with the counts once this one has exited.
UNDER_STRACE = "CXLAB_RUNNER_UNDER_STRACE"


# GET /done?wait=S answers within this whatever S asks.
MAX_DONE_WAIT_SECONDS = 30.0


class EndOfTasks:
    def __init__(self) -> None:
        self.done = False
        self.result: bytes | None = None  # the Result as written, newline included
        self._finished = threading.Event()  # set with done: the long polls of /done return
        self._read = threading.Event()  # the final read, or a SIGTERM
        self._stopped = threading.Event()  # a SIGTERM after the tasks

    def finish(self, result: bytes | None) -> None:
        """result: the bytes written as the Result, which GET /result answers; None where they
        are not the trial's Result (a run under strace: the outer runner adds the counts)."""
        self.result = result
        self.done = True
        self._finished.set()

    def wait_done(self, seconds: float) -> bool:
        """GET /done?wait=S, the driver's long poll: whether the tasks ended within S (at
        most MAX_DONE_WAIT_SECONDS), answered as soon as they do rather than at a probe's
        next period."""
        return self._finished.wait(min(seconds, MAX_DONE_WAIT_SECONDS))

    def answered(self, final: bool, done_before: bool) -> None:
        """A GET /metrics was answered whole; final: it asked final=1, done_before: the
        tasks had ended when it came (a read before the end is not final: values move)."""
        if final and done_before:
            self._read.set()

    def sigterm_ends_the_wait(self) -> None:
        """From the end of the tasks a SIGTERM no longer stops the trial (its Result is being
        written): it only ends the wait after it, and the runner exits 0, as the Go runner
        does (the contract). Python runs signal handlers in the main thread, whichever thread
        the signal reached (the metrics server's, say), and this one only sets an event: an
        exception raised from it would land in whichever greenlet runs under gevent."""

        def stop(_signum: int, _frame: object) -> None:
            self._stopped.set()
            self._read.set()

        signal.signal(signal.SIGTERM, stop)

    def after_tasks(self, linger: float, final_read: float) -> None:
        """Serve the endpoint for linger (a scraper sees the final values) and, with
        final_read, until the final read, at most final_read: whichever ends later, or a
        SIGTERM."""
        linger_end = time.monotonic() + linger
        missed = final_read and not self._read.wait(final_read)
        if missed and not self._stopped.is_set():
            print(
                f"cxlab-runner: no final read of /metrics within {format_duration(final_read)}",
                file=sys.stderr,
            )
        self._stopped.wait(max(0.0, linger_end - time.monotonic()))
