"""The threads experiments' passes run in, the urgent ones first.

A pass is urgent when one of its experiment's trial Pods has ended and waits to be
recorded: its Result is ready, the next trial waits for its slot, and whoever watches the
experiment waits for the entry. After a restart every experiment's loop asks for a pass at
once (50 at bench-scale), and in arrival order the trials that ended while no operator ran
waited behind every experiment that had only progress to write (p99 ended → recorded: two
minutes). Within a priority, first come first served.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

URGENT, ROUTINE = 0, 1


class Passes:
    def __init__(self, workers: int, name: str = "reconcile") -> None:
        self._workers, self._name = workers, name
        self._queue: list[tuple[int, int, Future[Any], Callable[[], Any]]] = []
        self._order = itertools.count()
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, urgent: bool, work: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the pass threads are shut down")
            priority = URGENT if urgent else ROUTINE
            heapq.heappush(self._queue, (priority, next(self._order), future, work))
            if len(self._threads) < self._workers:  # one more thread while any is missing
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._ready.notify()
        return future

    def waiting(self) -> int:
        """Passes asked for and not started yet."""
        with self._ready:
            return len(self._queue)

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:  # closed, nothing left
                    return
                _, _, future, work = heapq.heappop(self._queue)
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while it waited (its experiment was deleted)
            try:
                result = work()
            except BaseException as error:  # handed to whoever waits on the future
                future.set_exception(error)
            else:
                future.set_result(result)
                del result
            # not kept while this thread waits for the next: the pass's object and report
            del future, work

    def shutdown(self, cancel: bool = True) -> None:
        """No more passes; those waiting are cancelled (`cancel`) or run; the running ones
        finish."""
        with self._ready:
            self._closed = True
            if cancel:
                for _, _, future, _ in self._queue:
                    future.cancel()
                self._queue.clear()
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()
