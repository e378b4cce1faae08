"""Each trial's window over the running variant's copy (pure; cxlab.controller.copy_meter
reads the counters): opened by the pass that makes the trial's Pods, with the copy as read
then, kept in status while the trial runs (its variant's serviceVariants entry) and closed
by the pass that records it, whose own reading of the copy ends it. So an operator killed
mid-trial leaves the start in status, and the next one measures the same window; the peak
working set, which only samples give, is absent for a window this process did not sample
from its start (cxlab.analysis.copy_counters)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cxlab.analysis.copy_counters import CopyReading, ServiceWindow, window_figures
from cxlab.analysis.service_figures import completed_requests
from cxlab.experiments.status import TrialEntry


@dataclass(frozen=True)
class CopyMeasure:
    """What a pass knows to measure the running variant's trials that end in it."""

    windows: Mapping[str, ServiceWindow]  # the open windows, by trial
    reading: CopyReading | None  # the copy now (None: not read, the read failed)
    # (peak working set, samples) of the windows this process sampled from their start
    peaks: Mapping[str, tuple[int | None, int]] = field(default_factory=dict)
    ended: Mapping[str, datetime] = field(default_factory=dict)  # trial → its Pods' end

    def attach(self, entries: Iterable[TrialEntry]) -> None:
        """Each ended trial's figures into its entry; none where its window has no start, was
        shared with another trial, or the copy could not be read now."""
        for entry in entries:
            window = self.windows.get(entry.name)
            if window is None or window.start is None or window.shared or self.reading is None:
                continue
            if entry.attempts is not None and entry.attempts != window.attempt:
                continue  # the window of another attempt
            requests = completed_requests(entry.result) if entry.result else 0
            peak, samples = self.peaks.get(entry.name, (None, 0))
            entry.service = window_figures(
                window.start, self.reading, peak, samples + 2, requests, self.ended.get(entry.name)
            )


def windows_after(
    old: Sequence[ServiceWindow],
    created: Iterable[tuple[str, int]],
    ended: Collection[str],
    reading: CopyReading | None,
) -> list[ServiceWindow]:
    """The open windows once a pass has ended the trials in `ended` and made the Pods of
    `created` (trial, attempt): a window opens with the copy as read now, an attempt made
    again keeps its window, another attempt has a new one. Two windows open at once (trials
    run side by side: spec.parallelism) are both shared."""
    windows = {w.trial: w for w in old if w.trial not in ended}
    for trial, attempt in created:
        if trial in ended:
            continue
        kept = windows.get(trial)
        if kept is None or kept.attempt != attempt:
            windows[trial] = ServiceWindow(trial=trial, attempt=attempt, start=reading)
    if len(windows) > 1:
        return [w.model_copy(update={"shared": True}) for w in windows.values()]
    return list(windows.values())
