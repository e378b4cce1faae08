"""The pass threads (cxlab.controller.passes): a pass with a trial to record runs before
those with only progress to write, first come first served within each; a pass cancelled
while it waits never runs; an error reaches whoever waits."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from cxlab.controller.passes import Passes


def hold(passes: Passes) -> tuple[threading.Event, Future[None]]:
    """Occupy the one thread until the event is set (it has started when this returns)."""
    started, gate = threading.Event(), threading.Event()

    def wait() -> None:
        started.set()
        gate.wait()

    future = passes.submit(False, wait)
    assert started.wait(10)
    return gate, future


def test_urgent_passes_go_first_then_in_order_of_asking() -> None:
    passes, ran = Passes(1), []
    gate, blocker = hold(passes)  # the rest queue meanwhile
    futures = [
        passes.submit(urgent, lambda name=name: ran.append(name))
        for name, urgent in [("a", False), ("b", True), ("c", False), ("d", True)]
    ]
    assert passes.waiting() == 4
    gate.set()
    for future in [blocker, *futures]:
        future.result(timeout=10)
    assert ran == ["b", "d", "a", "c"]
    passes.shutdown()


def test_a_cancelled_pass_never_runs_and_an_error_reaches_the_caller() -> None:
    passes, ran = Passes(1), []
    gate, _ = hold(passes)
    cancelled = passes.submit(True, lambda: ran.append("cancelled"))
    failing = passes.submit(False, lambda: 1 / 0)
    assert cancelled.cancel()
    gate.set()
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)
    assert ran == []
    passes.shutdown()
    with pytest.raises(RuntimeError):
        passes.submit(True, lambda: None)


def test_several_threads_run_passes_at_once() -> None:
    passes, together = Passes(3), threading.Barrier(3, timeout=10)
    futures = [passes.submit(False, together.wait) for _ in range(3)]
    assert sorted(f.result(timeout=10) for f in futures) == [0, 1, 2]
    passes.shutdown()
