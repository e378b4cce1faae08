"""The start barrier (workloads/CONTRACT.md): a trial's runners get ready, wait, and are
released together by whoever drives them, so that N Pods (or processes) start as one trial."""

from __future__ import annotations

import sys
import threading
import time

from cxlab_contract import runner_contract
from cxlab_contract.durations import format_duration

NOT_RELEASED = runner_contract().exit_status["notReleased"]


class StartBarrier:
    """timeout 0: no barrier, the task phase begins at once."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.arrived = False  # GET /ready answers 200 from here on
        self.waited: float | None = None  # seconds at the barrier; None without one
        self._released = threading.Event()

    def release(self) -> None:
        """POST /start: idempotent, and remembered if it comes before the runner arrives."""
        self._released.set()

    def wait(self) -> None:
        if not self.timeout:
            return
        self.arrived = True
        began = time.monotonic()
        if not self._released.wait(self.timeout):
            print(
                "cxlab-runner: not released from the start barrier within "
                f"{format_duration(self.timeout)}",
                file=sys.stderr,
            )
            raise SystemExit(NOT_RELEASED)
        self.waited = time.monotonic() - began
