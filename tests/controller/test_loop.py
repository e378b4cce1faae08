"""An experiment's reconcile loop (cxlab.controller.loop): after a pass that wrote status the
next waits `status_interval`, so the trials that end meanwhile are recorded by one pass; a
pass that wrote nothing brings no wait; a stop ends the wait at once; and a sleeping loop
keeps nothing of its last pass."""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import time
import weakref
from typing import Any

from helpers import until
from helpers.pods import pod

from cxlab.controller.loop import run_loop
from cxlab.controller.pass_state import PassReport
from cxlab.controller.passes import Passes
from cxlab.controller.wakes import Wakes

KEY = ("lab", "x")


class Stopped:
    """kopf's DaemonStopped as the loop uses it: a flag with an awaitable wait()."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


class Reconciler:
    """Writes status on the passes in `writing` (by number); notes when each pass began."""

    def __init__(
        self, writing: set[int], loop: asyncio.AbstractEventLoop, space: bool = True
    ) -> None:
        self.writing, self.loop, self.began = writing, loop, []  # type: ignore[var-annotated]
        self.version = 0
        self.space = space  # several trials run after each pass

    def reconcile(self, body: Any, pods: Any, event: Any, queue: Any) -> PassReport:
        self.began.append(self.loop.time())
        if len(self.began) - 1 in self.writing:
            self.version += 1
            written = {"metadata": {"resourceVersion": str(self.version)}}
            return PassReport(written=written, space=self.space)
        return PassReport()


async def passes_of(
    writing: set[int], interval: float, count: int, space: bool = True
) -> list[float]:
    """When each of `count` passes began, woken again as soon as each ends."""
    loop, wakes, stopped = asyncio.get_running_loop(), Wakes(), Stopped()
    reconciler, threads = Reconciler(writing, loop, space), Passes(1)

    async def keep_waking() -> None:
        while len(reconciler.began) < count:
            wakes.wake(KEY)
            await asyncio.sleep(0.01)
        stopped.event.set()

    body = {"metadata": {"name": "x", "resourceVersion": "0"}, "status": {"phase": "Running"}}
    waker = asyncio.ensure_future(keep_waking())
    await run_loop(
        KEY, lambda: body, reconciler, wakes, threads, stopped,  # type: ignore[arg-type]
        pods=list, queue=list, event=lambda *_: None, reconcile_interval=60.0,
        status_interval=interval,
    )  # fmt: skip
    await waker
    threads.shutdown()
    return reconciler.began


def test_a_pass_after_a_status_write_waits_the_interval() -> None:
    began = asyncio.run(passes_of({0, 2}, interval=0.6, count=4))
    gaps = [b - a for a, b in itertools.pairwise(began)]
    assert gaps[0] >= 0.6 and gaps[2] >= 0.6  # after the writes
    assert gaps[1] < 0.6  # nothing written: no wait (woken 10 ms later)


def test_one_trial_alone_brings_no_wait_after_a_write() -> None:
    """A pass that leaves one trial running: its end is the only one to come, and nothing
    would be taken in with it (trial hosts run trial after trial milliseconds apart)."""
    began = asyncio.run(passes_of({0, 1, 2}, interval=30.0, count=4, space=False))
    gaps = [b - a for a, b in itertools.pairwise(began)]
    assert all(gap < 20 for gap in gaps)  # not the 30 s interval


def test_a_stop_ends_the_wait() -> None:
    async def stop_soon() -> float:
        loop, wakes, stopped = asyncio.get_running_loop(), Wakes(), Stopped()
        reconciler, threads = Reconciler({0}, loop), Passes(1)
        wakes.wake(KEY)
        loop.call_later(0.1, wakes.wake, KEY)  # a change after the write: the loop spaces
        loop.call_later(0.3, stopped.event.set)
        began = loop.time()
        await run_loop(
            KEY, lambda: {"metadata": {"name": "x"}, "status": {}}, reconciler,  # type: ignore[arg-type]
            wakes, threads, stopped, pods=list, queue=list, event=lambda *_: None,
            reconcile_interval=60.0, status_interval=30.0,
        )  # fmt: skip
        threads.shutdown()
        return loop.time() - began

    assert asyncio.run(stop_soon()) < 20  # not the 30 s interval


def test_the_rest_of_a_crowded_pass_runs_after_the_passes_waiting_and_before_its_next() -> None:
    async def order() -> list[str]:
        loop, wakes, stopped = asyncio.get_running_loop(), Wakes(), Stopped()
        threads, seen = Passes(1), []

        class Crowded:
            def reconcile(self, body: Any, pods: Any, event: Any, queue: Any) -> PassReport:
                seen.append(f"pass {len([s for s in seen if s.startswith('pass')]) + 1}")
                if len(seen) > 1:
                    loop.call_soon_threadsafe(stopped.event.set)
                    return PassReport()
                # another experiment's pass, waiting for the one thread (kept busy meanwhile)
                threads.submit(False, lambda: time.sleep(0.3))
                threads.submit(False, lambda: seen.append("another's pass"))
                return PassReport(later=lambda: seen.append("the rest") or None)

        wakes.wake(KEY)
        loop.call_later(0.2, wakes.wake, KEY)
        ended = [pod("t1", phase="Succeeded")]  # its passes are urgent: the next too
        await run_loop(
            KEY, lambda: {"metadata": {"name": "x"}, "status": {}}, Crowded(),  # type: ignore[arg-type]
            wakes, threads, stopped, pods=lambda: ended, queue=list, event=lambda *_: None,
            reconcile_interval=60.0,
        )  # fmt: skip
        threads.shutdown()
        return seen

    assert asyncio.run(order()) == ["pass 1", "another's pass", "the rest", "pass 2"]


def test_a_pod_refused_in_the_rest_of_a_crowded_pass_brings_the_next_pass_at_once() -> None:
    """The rest of a crowded pass writes nothing; a Pod refused there is for the next pass to
    decide on, which its `later` asks for (0 s) over the pass's own minute."""

    async def gap(due: float | None) -> float:
        loop, wakes, stopped = asyncio.get_running_loop(), Wakes(), Stopped()
        threads, began = Passes(1), []

        class Refused:
            def reconcile(self, body: Any, pods: Any, event: Any, queue: Any) -> PassReport:
                began.append(loop.time())
                if len(began) > 1:
                    loop.call_soon_threadsafe(stopped.event.set)
                return PassReport(recheck_seconds=60.0, later=lambda: due)

        wakes.wake(KEY)
        loop.call_later(2.0, stopped.event.set)  # no refusal: no second pass before this
        await run_loop(
            KEY, lambda: {"metadata": {"name": "x"}, "status": {}}, Refused(),  # type: ignore[arg-type]
            wakes, threads, stopped, pods=list, queue=list, event=lambda *_: None,
            reconcile_interval=60.0,
        )  # fmt: skip
        threads.shutdown()
        return began[1] - began[0] if len(began) > 1 else math.inf

    assert asyncio.run(gap(0.0)) < 1.0
    assert asyncio.run(gap(None)) == math.inf


class Doc(dict[str, Any]):
    """An object as a loop may hold one (a plain dict takes no weak reference)."""


def test_a_sleeping_loop_keeps_nothing_of_its_last_pass() -> None:
    """At 200 experiments every copy of each one's object the loops held while asleep was
    another 30 MiB: the object a pass decided from once kopf has a newer one, the object
    its status write returned once the watch has it, what its `later` held."""

    async def alive_while_asleep() -> list[str]:
        wakes, stopped = Wakes(), Stopped()
        threads, held = Passes(1), {}
        objects = {"latest": Doc(metadata={"name": "x", "resourceVersion": "1"}, status={})}

        class Writes:
            def reconcile(self, body: Any, pods: Any, event: Any, queue: Any) -> PassReport:
                written = Doc(metadata={"name": "x", "resourceVersion": "2"}, status={})
                pass_state = Doc()
                held.update(decided=weakref.ref(body), written=weakref.ref(written),
                            later=weakref.ref(pass_state))  # fmt: skip
                return PassReport(written=written, later=lambda: pass_state.get("x"))

        wakes.wake(KEY)
        running = asyncio.ensure_future(run_loop(
            KEY, lambda: objects["latest"], Writes(), wakes, threads, stopped,  # type: ignore[arg-type]
            pods=list, queue=list, event=lambda *_: None, reconcile_interval=60.0,
        ))  # fmt: skip
        await until(lambda: held)
        await asyncio.sleep(0.3)  # its `later` has run; it sleeps for the minute
        objects["latest"] = Doc(metadata={"name": "x", "resourceVersion": "2"}, status={})
        wakes.experiment_seen(KEY, "2")  # the watch has its write: kopf's object from now on
        gc.collect()
        alive = [name for name, ref in held.items() if ref() is not None]
        stopped.event.set()
        await running
        threads.shutdown()
        return alive

    assert asyncio.run(alive_while_asleep()) == []
