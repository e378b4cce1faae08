"""What the host knows of one trial: its manifest's spec, its phase as a Pod's, its process
and how it ended."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cxlab_runner.trial_host.manifest import TrialSpec

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"


class Process(Protocol):
    """A trial's process, forked from the fork server or exec'd (fork_server.py)."""

    pid: int

    def wait(self, timeout: float | None) -> int | None:
        """The exit status (negative: the signal that killed it), None while it runs."""


@dataclass(eq=False)
class Trial:
    spec: TrialSpec
    accepted_at: float  # wall clock: the Pod's startTime
    phase: str = PENDING
    reason: str | None = None  # the Pod's: DeadlineExceeded
    process: Process | None = None
    forked: bool = False
    started_at: float | None = None  # wall clock
    started_monotonic: float = 0.0
    written: bool = False  # the Result is in the termination message file
    exit_code: int | None = None
    termination_reason: str | None = None
    message: str = ""
    finished_at: float | None = None
    killed_by_host: bool = False
    deadline_exceeded: bool = False
    stop_asked: bool = False  # DELETE or shutdown before the process was started
    forgotten: bool = False
    finalized: bool = False  # its end recorded: its files are no longer written
    exited: threading.Event = field(default_factory=threading.Event)  # the process ended
    ended: threading.Event = field(default_factory=threading.Event)  # ... and is recorded
