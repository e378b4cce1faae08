"""When an experiment's reconcile loop runs again: the event-driven part of the operator.

Each experiment has one loop (a kopf daemon, cxlab.controller.handlers) that sleeps until
something it decides from has changed, or until the time it asked to look again:
- one of its Pods changed in a way its decision can see (the PodView differs, or it is gone:
  cxlab.controller.pod_watch tells);
- the experiment itself changed, other than by the status write its own loop just made;
- capacity may have freed up (a trial Pod ended or went, an experiment left the queue or was
  admitted), for experiments waiting in the queue.

It also knows which experiment versions the watch has delivered. A pass must not decide
from a status older than the one its previous pass wrote: a trial recorded there would look
unrecorded, its deleted Pod lost. Until the watch delivers that write, the pass reads the
object the write returned.

Everything here runs on the operator's event loop (async handlers and the daemons), so it
needs no locks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from cxlab.experiments.pod_view import PodPhase, PodView
from cxlab.experiments.queue import Candidate

Key = tuple[str, str]  # (namespace, name) of an experiment
# Versions of one experiment the watch delivered, newest last; a pass's own write is found
# here within a few events of it, long before this many.
SEEN_VERSIONS = 32


@dataclass
class _Loop:
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    seen: deque[str] = field(default_factory=lambda: deque(maxlen=SEEN_VERSIONS))
    written: dict[str, Any] | None = None  # the object as its last status write returned it


class Wakes:
    def __init__(self) -> None:
        self._loops: dict[Key, _Loop] = {}
        self._queue: dict[Key, Candidate] = {}  # each experiment as the queue last saw it

    def _loop(self, key: Key) -> _Loop:
        return self._loops.setdefault(key, _Loop())

    def event(self, key: Key) -> asyncio.Event:
        """Set when the experiment's loop has something new to look at."""
        return self._loop(key).wake

    def forget(self, key: Key) -> None:
        """The experiment is gone: those waiting may take its room."""
        self._loops.pop(key, None)
        if self._queue.pop(key, None) is not None:
            self._wake_waiting()

    def wake(self, key: Key) -> None:
        """Only a loop that runs: a Pod of a deleted experiment must not bring its entry back
        (a loop's first pass needs no wake)."""
        loop = self._loops.get(key)
        if loop is not None:
            loop.wake.set()

    def pod_changed(self, key: Key, before: PodView | None, after: PodView | None) -> None:
        """What experiment `key`'s decision sees of one of its Pods changed (None: not there
        before, or gone now): it looks again. A trial Pod that ended or goes frees room,
        so every experiment waiting in the queue looks again too."""
        if before == after:
            return
        self.wake(key)
        if after is None or PodPhase(after.phase).ended or after.deleting:
            self._wake_waiting()

    def queue_changed(self, key: Key, candidate: Candidate | None) -> bool:
        """The experiment as the queue sees it now (None: not in it). Whether that changed
        (it joined, was admitted, holds fewer slots, left): those waiting look again."""
        if self._queue.get(key) == candidate:
            return False
        if candidate is None:
            self._queue.pop(key, None)
        else:
            self._queue[key] = candidate
        self._wake_waiting()
        return True

    def _wake_waiting(self) -> None:
        """Room may have come free: every experiment waiting in the queue looks again."""
        for key, candidate in self._queue.items():
            if not candidate.admitted:
                self.wake(key)

    def experiment_seen(self, key: Key, version: str) -> None:
        """The watch delivered this version of the experiment. It wakes the loop unless it is
        the loop's own last status write coming back."""
        loop = self._loop(key)
        loop.seen.append(version)
        if loop.written is not None and loop.written["metadata"]["resourceVersion"] == version:
            loop.written = None  # the watch has caught up with the write
            return
        loop.wake.set()

    def wrote(self, key: Key, written: dict[str, Any]) -> None:
        """The loop's pass wrote the status; `written` is the object the apiserver returned."""
        loop = self._loop(key)
        if written["metadata"]["resourceVersion"] not in loop.seen:
            loop.written = written

    def current(self, key: Key, live: dict[str, Any]) -> dict[str, Any]:
        """The body a pass decides from: the watch's (`live`), unless the watch has not yet
        delivered the pass's own last write — then the object that write returned."""
        written = self._loop(key).written
        return written if written is not None else live
