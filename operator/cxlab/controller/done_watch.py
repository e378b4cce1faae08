"""The end of a running trial Pod's tasks, seen as it happens: a thread long-polls the
runner's GET /done?wait= (workloads/CONTRACT.md) and says so; the Pod index then shows the
Pod Ready, so the pass makes its final read at once. The readiness probe says the same up to
a period (1 s at best) and the kubelet's status update later: most of what separated one
short trial from the next after the kubelet's own teardown (bench-operator).

A few at a time, operator-wide (MAX_WATCHES): a Pod beyond them waits for its probe, as
every Pod did before. A runner that does not answer (still importing, or an address nothing
serves) is tried for a while, then left to its probe.

A trial Pod can also go without the probe (an unprobed Pod): the kubelet then tears it down
in half the time (bench-operator: the Pod's end 1.1 s after its deletion, 2.2 s with a
probe), but only its watch tells when its tasks end. Its creator reserves its watch first
(`reserve`), up to MAX_UNPROBED at once, and an unprobed Pod is watched as soon as it has an
address, beside the probed ones' MAX_WATCHES, for as long as it runs. If even then the
runner never answers, nothing is lost: it exits after its final-read wait, and the trial is
recorded from its Result, without the final metrics.
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
# Unprobed trial Pods at once (each a watch of its own while it runs): a small cluster's
# side-by-side trials; past that, a trial Pod has its probe.
MAX_UNPROBED = 8
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
    """Up to MAX_WATCHES long polls of probed Pods, one thread each, and one for each
    unprobed Pod; probed Pods waiting for a free one are watched in the order they asked.
    `tell(pod_key)` is called from a watch's thread when the tasks of that Pod ended."""

    def __init__(self, port: int, tell: Callable[[str], None]) -> None:
        self._port = port
        self._tell = tell
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}  # pod key → its stop
        self._waiting: OrderedDict[str, str] = OrderedDict()  # pod key → address
        # Unprobed Pods, from their creation (or first sight) to their end
        self._unprobed: set[str] = set()

    def reserve(self, pod_key: str) -> bool:
        """Whether the Pod about to be created may go without its probe: its watch is kept
        for it until forget(pod_key)."""
        with self._lock:
            if len(self._unprobed) >= MAX_UNPROBED:
                return False
            self._unprobed.add(pod_key)
            return True

    def watch(self, pod_key: str, ip: str, unprobed: bool = False) -> None:
        """Watch the Pod's runner at ip until its tasks end or forget(pod_key); an unprobed
        Pod at once (one seen after a restart is counted from now on)."""
        with self._lock:
            if unprobed:
                self._unprobed.add(pod_key)
                self._waiting.pop(pod_key, None)  # (a waiting Pod is not running)
                if pod_key not in self._running:
                    self._start(pod_key, ip)
                return
            if pod_key in self._running or pod_key in self._waiting:
                return
            self._waiting[pod_key] = ip
            self._start_waiting()

    def forget(self, pod_key: str) -> None:
        """The Pod is no longer running (or was not created), or its end is known: no more
        watching, and its reservation is free."""
        with self._lock:
            self._waiting.pop(pod_key, None)
            self._unprobed.discard(pod_key)
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
        while self._waiting and len(self._running.keys() - self._unprobed) < MAX_WATCHES:
            self._start(*self._waiting.popitem(last=False))

    def _start(self, pod_key: str, ip: str) -> None:
        """With the lock held."""
        stop = self._running[pod_key] = threading.Event()
        threading.Thread(
            target=self._run, args=(pod_key, ip, stop), name=f"done-{pod_key}", daemon=True
        ).start()

    def _trying(self, pod_key: str, answered: float) -> bool:
        """Whether to go on asking a runner that last answered at `answered`: an unprobed
        Pod's for as long as it runs (nothing else will say its tasks ended)."""
        with self._lock:
            unprobed = pod_key in self._unprobed
        return unprobed or time.monotonic() - answered < GIVE_UP_SECONDS

    def _run(self, pod_key: str, ip: str, stop: threading.Event) -> None:
        try:
            failures, answered = 0, time.monotonic()
            while not stop.is_set() and self._trying(pod_key, answered):
                done = _done(ip, self._port)
                if done:
                    if not stop.is_set():
                        self._tell(pod_key)
                    return
                if done is None:
                    failures += 1
                    stop.wait(min(0.05 * 2 ** (failures - 1), 0.5 if failures < 60 else 2.0))
                else:  # the wait ended with the tasks still running: again
                    failures, answered = 0, time.monotonic()
        except Exception:  # never the operator's end: a probe, or the runner's own wait, remains
            log.exception("watching the end of %s", pod_key)
        finally:
            with self._lock:
                self._running.pop(pod_key, None)
                self._start_waiting()
