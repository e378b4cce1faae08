"""The end of a running trial Pod's tasks, seen as it happens: a thread long-polls the
runner's GET /done?wait= (workloads/CONTRACT.md) and says so; the Pod index then shows the
Pod Ready, so the pass makes its final read at once. The readiness probe says the same up to
a period (1 s at best) and the kubelet's status update later: most of what separated one
short trial from the next after the kubelet's own teardown (bench-operator).

A few at a time, operator-wide (MAX_WATCHES): a Pod beyond them waits for its probe, as
every Pod did before. A runner that does not answer (still importing, or an address nothing
serves) is tried for a while, then left to its probe.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

# Long polls held at once: enough for the trials a small cluster runs side by side, few
# enough that thousands of trial Pods in flight cost no more than a few threads.
MAX_WATCHES = 16
# A long poll's wait: the runner answers at once when its tasks end, else after this long.
POLL_SECONDS = 20.0
CONNECT_SECONDS = 1.0
# A runner not answering is tried again after 0.05, 0.1, ... 0.5 s (its container is up
# before the runner has imported what it runs and listens: seconds on a loaded node), for
# this long since it last answered, then left to its probe.
GIVE_UP_SECONDS = 30.0

log = logging.getLogger(__name__)


def _done(ip: str, port: int) -> bool | None:
    """GET /done?wait=: True once the tasks ended, False if the wait ended first, None when
    the runner did not answer."""
    connection = http.client.HTTPConnection(ip, port, timeout=CONNECT_SECONDS)
    try:
        connection.connect()
        assert connection.sock is not None
        connection.sock.settimeout(POLL_SECONDS + 5)
        connection.request("GET", f"/done?wait={POLL_SECONDS:g}")
        answer = connection.getresponse()
        answer.read()
        return answer.status == 200
    except OSError:
        return None
    finally:
        connection.close()


class DoneWatches:
    """Up to MAX_WATCHES long polls, one thread each; Pods waiting for a free one are watched
    in the order they asked. `tell(pod_key)` is called from a watch's thread when the tasks
    of that Pod ended."""

    def __init__(self, port: int, tell: Callable[[str], None]) -> None:
        self._port = port
        self._tell = tell
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}  # pod key → its stop
        self._waiting: OrderedDict[str, str] = OrderedDict()  # pod key → address

    def watch(self, pod_key: str, ip: str) -> None:
        """Watch the Pod's runner at ip until its tasks end or forget(pod_key)."""
        with self._lock:
            if pod_key in self._running or pod_key in self._waiting:
                return
            self._waiting[pod_key] = ip
            self._start_waiting()

    def forget(self, pod_key: str) -> None:
        """The Pod is no longer running, or its end is known: no more watching."""
        with self._lock:
            self._waiting.pop(pod_key, None)
            stop = self._running.get(pod_key)
        if stop is not None:
            stop.set()

    def stop(self) -> None:
        with self._lock:
            self._waiting.clear()
            stops = list(self._running.values())
        for stop in stops:
            stop.set()

    def _start_waiting(self) -> None:
        """With the lock held: start the next waiting Pods while there is room."""
        while self._waiting and len(self._running) < MAX_WATCHES:
            pod_key, ip = self._waiting.popitem(last=False)
            stop = self._running[pod_key] = threading.Event()
            threading.Thread(
                target=self._run, args=(pod_key, ip, stop), name=f"done-{pod_key}", daemon=True
            ).start()

    def _run(self, pod_key: str, ip: str, stop: threading.Event) -> None:
        try:
            failures, answered = 0, time.monotonic()
            while not stop.is_set() and time.monotonic() - answered < GIVE_UP_SECONDS:
                done = _done(ip, self._port)
                if done:
                    if not stop.is_set():
                        self._tell(pod_key)
                    return
                if done is None:
                    failures += 1
                    stop.wait(min(0.05 * 2 ** (failures - 1), 0.5))
                else:  # the wait ended with the tasks still running: again
                    failures, answered = 0, time.monotonic()
        except Exception:  # a watch must never take the operator down: the probe remains
            log.exception("watching the end of %s", pod_key)
        finally:
            with self._lock:
                self._running.pop(pod_key, None)
                self._start_waiting()
