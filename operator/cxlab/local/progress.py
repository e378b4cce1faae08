"""Live progress on stderr: one line per finished trial, and on a terminal a line that
follows the running trial's task count (read from its /metrics, as the operator does)."""

from __future__ import annotations

import sys
from typing import TextIO

from cxlab.analysis.outcome import TrialOutcome
from cxlab.experiments.plan import Trial


class Progress:
    def __init__(self, total_trials: int, stream: TextIO = sys.stderr) -> None:
        self.total = total_trials
        self.stream = stream
        self.live = stream.isatty()
        self._width = len(str(total_trials))

    def _prefix(self, trial: Trial) -> str:
        return f"[{trial.index + 1:>{self._width}}/{self.total}] {trial.name}"

    def running(
        self, trial: Trial, tasks_done: int | None, tasks: int | None, elapsed: float
    ) -> None:
        """tasks: None for a duration run, whose tasks are an output."""
        if not self.live:
            return
        done = "…" if tasks_done is None else f"{tasks_done}/{tasks} tasks"
        if tasks is None and tasks_done is not None:
            done = f"{tasks_done} tasks"
        self.stream.write(f"\r\x1b[2K{self._prefix(trial)}  {done}  {elapsed:.1f} s")
        self.stream.flush()

    def finished(self, outcome: TrialOutcome) -> None:
        result = outcome.result
        if outcome.succeeded and result is not None:
            detail = (
                f"ok  {result['wallSeconds']:.3f} s  {result['cpuPercent']:.0f}% CPU  "
                f"{result['peakRssBytes'] / 2**20:.0f} MiB"
            )
            if result["tasksFailed"]:
                detail += f"  ({result['tasksFailed']} tasks failed)"
        elif outcome.skipped:
            detail = f"skipped: {outcome.skipped}"
        else:
            detail = f"FAILED: {outcome.error}"
        clear = "\r\x1b[2K" if self.live else ""
        self.stream.write(f"{clear}{self._prefix(outcome.trial)}  {detail}\n")
        self.stream.flush()

    def note(self, message: str) -> None:
        self.stream.write(f"{message}\n")
        self.stream.flush()
