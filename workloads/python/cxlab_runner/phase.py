"""The task phase: the only span a trial measures. Imports, start-up and the lingering
metrics endpoint stay outside it. Each model calls begin() right before it starts its first
worker and end() once the last one has been joined (children reaped, so their CPU counts)."""

from __future__ import annotations

import time

from cxlab_runner import measure


class TaskPhase:
    def __init__(self, sampler: measure.Sampler) -> None:
        self.sampler = sampler
        self.started: float | None = None
        self.finished: float | None = None
        self.baseline_rss = 0
        self._usage_at_start = measure.usage()
        self.used = measure.Usage(0.0, 0.0, 0, 0)

    def begin(self) -> None:
        self.sampler.start()
        self.baseline_rss = self.sampler.timeline[0]
        self._usage_at_start = measure.usage()
        self.started = time.monotonic()

    def end(self) -> None:
        self.finished = time.monotonic()
        self.used = measure.usage() - self._usage_at_start
        self.sampler.stop()

    def elapsed(self) -> float:
        """Seconds since begin(); frozen at end()."""
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started
