"""When an experiment's reconcile loop runs again (cxlab.controller.wakes): on changes it
can see, not on its own status writes; never from a status older than its last write."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from helpers.pods import pod

from cxlab.controller.wakes import Wakes
from cxlab.experiments.nodes import Request
from cxlab.experiments.queue import Candidate

KEY = ("lab", "demo")
NOW = datetime(2026, 11, 27, tzinfo=UTC)


def body(version: str, trials: int = 0) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "status": {"trials": [{}] * trials}}


def test_a_pod_wakes_its_experiment_only_when_what_the_decision_sees_changes() -> None:
    wakes = Wakes()
    event = wakes.event(KEY)
    view = pod("t1", phase="Pending")
    wakes.pod_changed(KEY, None, view)
    assert event.is_set()
    event.clear()
    wakes.pod_changed(KEY, view, replace(view))  # a resync, an annotation
    assert not event.is_set()
    wakes.pod_changed(KEY, view, replace(view, phase="Succeeded"))
    assert event.is_set()
    event.clear()
    wakes.pod_changed(KEY, view, None)  # deleted
    assert event.is_set()


def test_those_waiting_in_the_queue_look_again_when_a_trial_pod_ends_or_goes() -> None:
    wakes = Wakes()
    waiting, admitted = ("lab", "waiting"), ("lab", "admitted")
    wakes.queue_changed(waiting, candidate(waiting, admitted=False))
    wakes.queue_changed(admitted, candidate(admitted, admitted=True))
    events = {key: wakes.event(key) for key in (waiting, admitted)}
    view = pod("t1", phase="Running")

    def woken(key: tuple[str, str]) -> bool:
        was = events[key].is_set()
        for event in events.values():
            event.clear()
        return was

    woken(waiting)
    wakes.pod_changed(admitted, view, replace(view, ready=False))
    assert not woken(waiting)  # the Pod still holds its room
    for after in (replace(view, phase="Succeeded"), replace(view, deleting=True), None):
        wakes.pod_changed(admitted, view, after)
        assert woken(waiting), after
    wakes.forget(admitted)  # gone: its room is free
    assert woken(waiting)


def test_its_own_status_write_coming_back_does_not_wake_it_other_changes_do() -> None:
    wakes = Wakes()
    event = wakes.event(KEY)
    wakes.wrote(KEY, body("7"))
    wakes.experiment_seen(KEY, "7")
    assert not event.is_set()
    wakes.experiment_seen(KEY, "8")  # someone else's change: a spec edit, a label
    assert event.is_set()


def test_a_pass_decides_from_its_last_write_until_the_watch_delivers_it() -> None:
    wakes = Wakes()
    live = body("6", trials=0)
    written = body("7", trials=1)  # this pass recorded a trial
    wakes.wrote(KEY, written)
    assert wakes.current(KEY, live) is written  # the watch is behind: not the stale status
    wakes.experiment_seen(KEY, "7")
    newer = body("8", trials=1)
    assert wakes.current(KEY, newer) is newer


def test_a_write_the_watch_delivered_before_the_pass_ended_is_not_waited_for() -> None:
    wakes = Wakes()
    wakes.experiment_seen(KEY, "7")  # the write's event came while the pass made Pods
    wakes.wrote(KEY, body("7", trials=1))
    live = body("9", trials=1)
    assert wakes.current(KEY, live) is live


def test_the_queue_changed_only_when_an_experiment_joins_moves_or_leaves_it() -> None:
    wakes = Wakes()
    assert wakes.queue_changed(KEY, candidate(KEY, admitted=False))  # it joins
    # a status write of no consequence
    assert not wakes.queue_changed(KEY, candidate(KEY, admitted=False))
    assert wakes.queue_changed(KEY, candidate(KEY, admitted=True))  # the others move up
    assert wakes.queue_changed(KEY, None)  # finished: it leaves
    assert not wakes.queue_changed(KEY, None)


def candidate(key: tuple[str, str], admitted: bool) -> Candidate:
    request = Request(Decimal(1), Decimal(2**30), {}, (), {})
    return Candidate(*key, NOW, 0, request, slots=1, admitted=admitted)


def test_a_pod_of_a_deleted_experiment_does_not_bring_its_loop_back() -> None:
    wakes = Wakes()
    wakes.event(KEY)
    wakes.forget(KEY)
    view = pod("t1", phase="Succeeded")
    wakes.pod_changed(KEY, view, None)  # its Pods go after it
    assert KEY not in wakes._loops
