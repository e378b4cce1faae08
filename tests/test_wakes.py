"""When an experiment's reconcile loop runs again (cxlab.controller.wakes): on changes it
can see, not on its own status writes; never from a status older than its last write."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from test_decide import pod

from cxlab.controller.wakes import Wakes

KEY = ("lab", "demo")


def body(version: str, trials: int = 0) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "status": {"trials": [{}] * trials}}


def test_a_pod_wakes_its_experiment_only_when_what_the_decision_sees_changes() -> None:
    wakes = Wakes()
    event = wakes.event(KEY)
    view = pod("t1", phase="Pending")
    assert wakes.pod_changed(KEY, "lab", view, view.name) and event.is_set()
    event.clear()
    assert not wakes.pod_changed(KEY, "lab", view, view.name)  # a resync, an annotation
    assert not event.is_set()
    assert wakes.pod_changed(KEY, "lab", replace(view, phase="Succeeded"), view.name)
    event.clear()
    assert wakes.pod_changed(KEY, "lab", None, view.name) and event.is_set()  # deleted


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
    waiting = ("Pending", False)
    assert wakes.queue_changed(KEY, waiting)  # it joins
    assert not wakes.queue_changed(KEY, ("Pending", False))  # a status write of no consequence
    assert wakes.queue_changed(KEY, ("Running", True))  # admitted: the others move up
    assert wakes.queue_changed(KEY, None)  # finished: it leaves
    assert not wakes.queue_changed(KEY, None)
