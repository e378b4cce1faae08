"""Per-task bookkeeping kept cheap enough not to disturb what it measures.

A task costs one `next()` on a C counter when it starts and one `list.append` when it ends;
both are atomic under the GIL, so threads need no lock. Histograms and percentiles are
computed later, at scrape time and at the end, from the recorded latencies.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Mapping
from typing import cast

from cxlab_contract.result import FailureKinds
from cxlab_runner.failures import KINDS, kind_of

MAX_ERROR_LENGTH = 200


class TaskRecorder:
    def __init__(self) -> None:
        self._started = itertools.count()
        self.latencies: list[float] = []  # seconds, one per successful task
        self.errors: Counter[str] = Counter()
        self._errors_lock = threading.Lock()
        self._failed = 0
        self._kinds = dict.fromkeys(KINDS, 0)  # failed tasks by kind (failures.py): _failed
        # Set while children count in shared memory (processes): scrapes read that instead.
        self.live_view: TaskRecorder | None = None
        # How many of `latencies` are failed tasks': a distributed Locust master's view,
        # where Locust logs a response time for every request, failed or not.
        self.failed_latencies = 0
        # Arrival runs: arrivals issued and dropped, and each started arrival's wait.
        self._issued = itertools.count()
        self._dropped = itertools.count()
        self.waits: list[float] = []
        self.max_queue = 0

    def started(self) -> None:
        next(self._started)

    def issued(self) -> None:
        next(self._issued)

    def dropped(self) -> None:
        next(self._dropped)

    def ok(self, seconds: float) -> None:
        self.latencies.append(seconds)

    def failed(self, error: BaseException | str, kind: str | None = None) -> None:
        """A failed task: its message, and its kind (the error's, unless given)."""
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        kind = kind or kind_of(error)
        with self._errors_lock:
            self.errors[message[:MAX_ERROR_LENGTH]] += 1
            self._failed += 1
            self._kinds[kind] += 1

    def note(self, message: str) -> None:
        """A runner problem that is not a failed task (for example fewer workers started)."""
        with self._errors_lock:
            self.errors[message[:MAX_ERROR_LENGTH]] += 1

    def merge(self, latencies: list[float], errors: Counter[str], kinds: Mapping[str, int]) -> None:
        """Take in what a child process recorded: its failed tasks by message and by kind."""
        self.latencies.extend(latencies)
        with self._errors_lock:
            self.errors.update(errors)
            self._failed += sum(kinds.values())
            for kind, count in kinds.items():
                self._kinds[kind] += count

    def current(self) -> TaskRecorder:
        return self.live_view or self

    # What a scrape or the Result reads. Subclasses may count elsewhere (shared memory).
    def started_count(self) -> int:
        return _value(self._started)

    def issued_count(self) -> int:
        return _value(self._issued)

    def dropped_count(self) -> int:
        return _value(self._dropped)

    def queue_length(self) -> int:
        """Arrivals issued and waiting for a worker."""
        return max(0, self.issued_count() - self.dropped_count() - self.started_count())

    def ok_count(self) -> int:
        return len(self.latencies) - self.failed_latencies

    def failed_count(self) -> int:
        return self._failed

    def failure_kinds(self) -> FailureKinds:
        """Failed tasks by kind, every kind present (0 if none)."""
        with self._errors_lock:
            return cast(FailureKinds, self._kinds.copy())

    def in_flight(self) -> int:
        return max(0, self.started_count() - self.ok_count() - self.failed_count())


def _value(counter: itertools.count[int]) -> int:
    # itertools.count exposes its next value only through __reduce__; reading it this way does
    # not advance it.
    state: tuple[int] = counter.__reduce__()[1]  # type: ignore[assignment]
    return state[0]
