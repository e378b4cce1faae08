"""An experiment's reconcile loop, as its kopf daemon runs it: a pass whenever it is woken
(cxlab.controller.wakes), when the pass's own deadline falls due, and at least every
reconcile interval. The pass runs in a worker thread; the loop only waits. Errors are retried
with a backoff, never by sleeping in a handler."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable
from typing import Any

from cxlab.controller.experiment_pass import Reconciler
from cxlab.controller.pass_state import EventSink, PassReport
from cxlab.controller.passes import Passes
from cxlab.controller.wakes import Key, Wakes
from cxlab.experiments.pod_view import PodPhase, PodView
from cxlab.experiments.pods import COMPONENT_TRIAL
from cxlab.experiments.queue import Candidate
from cxlab.experiments.status import Phase

# A failed pass is tried again after 2, 4, 8 ... seconds, at most this long.
MAX_BACKOFF_SECONDS = 60.0


async def run_loop(
    key: Key,
    body: Callable[[], dict[str, Any]],
    reconciler: Reconciler,
    wakes: Wakes,
    passes: Passes,
    stopped: Any,  # kopf.DaemonStopped: a flag, true once stopped, with an awaitable wait()
    pods: Callable[[], list[PodView]],
    queue: Callable[[], list[Candidate]],
    event: EventSink,
    reconcile_interval: float,
    status_interval: float = 0.0,
    pods_listed: Awaitable[None] | None = None,
) -> None:
    """Until `stopped`: pass, then sleep until woken or due. `body()` (kopf's live view of the
    object), `pods()` and `queue()` (its indexes) are read at the start of each pass. A pass
    comes at least `status_interval` after the last one that wrote status (what changes
    meanwhile is taken in by that one pass), while several trials run. The first pass waits
    for `pods_listed`: one that saw none of the Pods there are would make them again."""
    wake = wakes.event(key)
    loop = asyncio.get_running_loop()
    stopping = asyncio.ensure_future(_until(stopped))
    failures = 0
    wrote = -math.inf  # loop.time() of the last status write
    try:
        if pods_listed is not None:
            await _first_of(asyncio.ensure_future(pods_listed), stopping)
        while not stopped:
            if (spacing := wrote + status_interval - loop.time()) > 0:
                await asyncio.wait({stopping}, timeout=spacing)
                if stopped:
                    break
            wake.clear()  # a change from here on brings another pass after this one
            current = wakes.current(key, body())
            waiting = Phase.of((current.get("status") or {}).get("phase")) == Phase.PENDING
            seen = pods()
            try:
                done = await _pass(
                    reconciler, passes, current, seen, event, queue() if waiting else [], stopping
                )
            except Exception:
                failures += 1
                logging.getLogger(__name__).exception("%s/%s: reconcile failed", *key)
                await asyncio.wait({stopping}, timeout=min(2.0**failures, MAX_BACKOFF_SECONDS))
                continue
            if done is None:  # stopped: what it would create goes with the object
                break
            failures = 0
            if done.written is not None:
                wakes.wrote(key, done.written)
                wrote = loop.time() if done.space else -math.inf
            timeout = _sleep_for(done, reconcile_interval)
            # Nothing of the pass is kept while the loop sleeps: its report holds the object
            # its status write returned (and, with `later`, the whole pass), `current` an
            # object kopf may have replaced since: kept, they are whole copies of the
            # experiment, one more per sleeping loop (docs/benchmarks.md, where the memory went).
            del done, current, seen
            await _first_of(asyncio.ensure_future(wake.wait()), stopping, timeout)
    finally:
        stopping.cancel()


def _sleep_for(done: PassReport, reconcile_interval: float) -> float | None:
    """How long the loop sleeps unless woken (None: until woken). A finished experiment
    sleeps until a change or its TTL: no safety timer for the thousands a busy cluster
    keeps."""
    recheck = math.inf if done.recheck_seconds is None else done.recheck_seconds
    timeout = recheck if done.idle else min(recheck, reconcile_interval)
    return None if timeout == math.inf else timeout


async def _first_of(
    awaited: asyncio.Future[Any], stopping: asyncio.Future[Any], timeout: float | None = None
) -> None:
    """Until `awaited` is done, the loop is stopped, or `timeout` passes; `awaited` is then
    cancelled."""
    await asyncio.wait({awaited, stopping}, timeout=timeout, return_when=FIRST_COMPLETED)
    awaited.cancel()


async def _pass(
    reconciler: Reconciler,
    passes: Passes,
    current: dict[str, Any],
    seen: list[PodView],
    event: EventSink,
    queue: list[Candidate],
    stopping: asyncio.Future[Any],
) -> PassReport | None:
    """One pass in a worker thread, and what it left for later after the passes waiting
    (None: stopped meanwhile)."""
    loop = asyncio.get_running_loop()
    run = functools.partial(reconciler.reconcile, current, seen, event, queue)
    # kopf.event needs the handler's context (its event queue) in the thread
    work = functools.partial(contextvars.copy_context().run, run)
    done: PassReport = await asyncio.wrap_future(passes.submit(_ended(seen), work), loop=loop)
    if done.later is not None:  # after the passes waiting; before the next
        later = functools.partial(contextvars.copy_context().run, done.later)
        rest: asyncio.Future[Any] = asyncio.wrap_future(passes.submit(False, later), loop=loop)
        await asyncio.wait({rest, stopping}, return_when=FIRST_COMPLETED)
        if not rest.done():
            rest.cancel()
            return None
        if (due := rest.result()) is not None:  # sooner than the pass said: a refused Pod
            recheck = done.recheck_seconds
            done.recheck_seconds = due if recheck is None else min(recheck, due)
    return done


def _ended(pods: list[PodView]) -> bool:
    """A trial Pod has ended and is not let go yet: its trial waits to be recorded."""
    return any(
        p.component == COMPONENT_TRIAL and PodPhase(p.phase).ended and not p.deleting for p in pods
    )


async def _until(stopped: Any) -> None:
    await stopped.wait()
