"""A trial's window over the copy: opened by the pass that makes its Pods, kept across
passes (and restarts: it is in status), closed by the pass that records it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cxlab.analysis.copy_counters import ContainerCount, CopyReading, PodCount, ServiceWindow
from cxlab.experiments.service_window import CopyMeasure, windows_after
from cxlab.experiments.status import Phase, TrialEntry

T0 = datetime(2026, 12, 2, 4, 5, 0, tzinfo=UTC)


def _reading(seconds: float, cpu_ns: int) -> CopyReading:
    container = ContainerCount(name="httpbin", cpu_nanoseconds=cpu_ns, working_set_bytes=5)
    return CopyReading(
        read_at=T0 + timedelta(seconds=seconds), pods=[PodCount(pod="p", containers=[container])]
    )


def test_a_window_opens_with_the_reading_keeps_it_and_closes_when_recorded() -> None:
    first = windows_after([], [("t1", 1)], set(), _reading(0, 10))
    assert first == [ServiceWindow(trial="t1", attempt=1, start=_reading(0, 10))]
    # made again (a restart between the status write and the create): the first start stays
    assert windows_after(first, [("t1", 1)], set(), _reading(3, 99)) == first
    # another attempt (its Pod was lost): a window of its own
    (again,) = windows_after(first, [("t1", 2)], set(), _reading(5, 50))
    assert (again.attempt, again.start) == (2, _reading(5, 50))
    assert windows_after(first, [], {"t1"}, _reading(9, 70)) == []


def test_two_trials_at_once_share_the_copy_and_neither_has_figures() -> None:
    both = windows_after([], [("t1", 1), ("t2", 1)], set(), _reading(0, 10))
    assert [w.shared for w in both] == [True, True]
    entries = [_entry("t1"), _entry("t2")]
    CopyMeasure({w.trial: w for w in both}, _reading(9, 10**9)).attach(entries)
    assert [e.service for e in entries] == [None, None]


def _entry(name: str, attempts: int = 1) -> TrialEntry:
    return TrialEntry(
        name=name, model="asyncio", workers=64, rtt_seconds=None, repetition=1,
        phase=Phase.SUCCEEDED, attempts=attempts,
    )  # fmt: skip


def test_the_measure_gives_an_ended_trial_its_figures_from_its_own_window() -> None:
    (window,) = windows_after([], [("t1", 1)], set(), _reading(0, 10**9))
    measure = CopyMeasure({"t1": window}, _reading(10, 3 * 10**9), peaks={"t1": (7, 10)})
    entries = [_entry("t1"), _entry("t2"), _entry("t1", attempts=2)]
    measure.attach(entries)
    figures = entries[0].service
    assert figures is not None and figures.cpu_seconds == 2.0
    assert (figures.peak_memory_bytes, figures.samples) == (7, 12)  # with both readings
    assert entries[1].service is None  # no window
    assert entries[2].service is None  # another attempt's window


def test_without_this_processs_samples_or_a_reading_now_the_figures_say_so() -> None:
    (window,) = windows_after([], [("t1", 1)], set(), _reading(0, 10**9))
    restarted = [_entry("t1")]
    CopyMeasure({"t1": window}, _reading(10, 3 * 10**9)).attach(restarted)
    figures = restarted[0].service
    assert figures is not None and figures.cpu_seconds == 2.0
    assert figures.peak_memory_bytes is None  # sampled by an operator no longer running
    unread = [_entry("t1")]
    CopyMeasure({"t1": window}, None).attach(unread)
    assert unread[0].service is None
    unstarted = ServiceWindow(trial="t1", attempt=1)  # the read failed as it opened
    CopyMeasure({"t1": unstarted}, _reading(10, 1)).attach(unread)
    assert unread[0].service is None
