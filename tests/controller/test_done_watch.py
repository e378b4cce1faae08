"""The end of a trial Pod's tasks seen as it happens (cxlab.controller.done_watch): the Pod
index long-polls real runners' GET /done?wait= and shows their Pods Ready as their Results
are written, before any probe says so and whatever the apiserver says of them meanwhile;
Pods beyond the watches held at once are watched as others end; a Pod without the /done
probe (unprobed: its watch reserved at its creation) is watched at once and for as long as it
runs, and shows Ready only when its tasks end, whatever the kubelet says. The apiserver's
side is scripted; the Pod watch's own protocol is tests/controller/test_pod_watch.py's."""

from __future__ import annotations

import asyncio
import http.server
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import runner_argv, until

from cxlab.controller import done_watch
from cxlab.controller.pod_watch import PodIndex
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import LABEL_EXPERIMENT
from cxlab.local.delay_target import free_port
from cxlab.scrape import final_read

KEY = ("lab", "exp")


def trial_pod(name: str, version: str, ready: bool = False, probe: bool = True) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "runner"}
    if probe:
        container["readinessProbe"] = {"httpGet": {"path": "/done"}}
    return {
        "metadata": {
            "name": name, "namespace": "lab", "resourceVersion": version,
            "labels": {LABEL_EXPERIMENT: "exp", "app.kubernetes.io/component": "trial"},
        },
        "spec": {"nodeName": "node-1", "containers": [container]},
        "status": {"phase": "Running", "podIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": str(ready)}]},
    }  # fmt: skip


class Apiserver:
    """Lists the given Pods, then streams the events a test puts in `events`."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def request(self, method: str, path: str, query: dict[str, Any]) -> dict[str, Any]:
        return {"items": self.pods, "metadata": {"resourceVersion": "5"}}

    def stream(
        self, path: str, *, query: dict[str, Any], timeout: float, opened: Any
    ) -> Iterator[Any]:
        opened(self)
        while (event := self.events.get(timeout=60)) is not None:
            yield event

    def shutdown(self) -> None:
        self.events.put(None)


def test_a_trial_pod_shows_ready_as_its_tasks_end() -> None:
    port = free_port()
    apiserver = Apiserver([trial_pod("exp-a", "3")])
    told: list[tuple[str, bool]] = []

    def on_change(key: tuple[str, str], before: PodView | None, after: PodView | None) -> None:
        if after is not None:
            told.append((after.name, after.ready))

    def ready() -> bool:
        return any(p.name == "exp-a" and p.ready for p in index.pods(KEY))

    argv = runner_argv("asyncio", "--workload", "sleep", "--tasks", "2", "--workers", "1",
                       "--rtt", "1s", "--metrics-port", str(port),
                       "--final-read", "30s")  # fmt: skip
    index = PodIndex(apiserver, on_change, clusterwide=False, done_port=port)  # type: ignore[arg-type]
    runner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    async def main() -> None:
        await index.ready("lab")
        assert not ready()  # its tasks run (2 s): not Ready, the apiserver says so too
        assert runner.stdout is not None
        line = await asyncio.to_thread(runner.stdout.readline)  # the Result is written
        written = time.monotonic()
        # No probe, no event: only the long poll can tell (it may have, before this thread
        # read the line, on a busy machine)
        assert line
        await until(ready)
        assert time.monotonic() - written < 5  # not a poll's 20 s
        # the apiserver still says not Ready (the probe's period): Ready all the same
        apiserver.events.put({"type": "MODIFIED", "object": trial_pod("exp-a", "6")})
        marker = trial_pod("exp-z", "7") | {"status": {"phase": "Pending"}}  # after it
        apiserver.events.put({"type": "ADDED", "object": marker})
        await until(lambda: any(p.name == "exp-z" for p in index.pods(KEY)))
        assert ready(), told
        assert await asyncio.to_thread(final_read, "127.0.0.1", port, 2.0)
        assert await asyncio.to_thread(runner.wait, 10) == 0

    try:
        asyncio.run(main())
    finally:
        index.stop()
        if runner.poll() is None:
            runner.kill()
    # (the index tells every view it sets: the MODIFIED one, Ready, is the third)
    assert told == [("exp-a", False), ("exp-a", True), ("exp-a", True), ("exp-z", False)]


class Runner(http.server.ThreadingHTTPServer):
    """GET /done?wait= as a runner answers it, its tasks ending when `ended` is set."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.ended = threading.Event()
        ended = self.ended

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                done = ended.wait(float(self.path.partition("wait=")[2] or 0))
                self.send_response(200 if done else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        super().__init__(address, Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_pods_beyond_the_watches_held_at_once_are_watched_as_others_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(done_watch, "MAX_WATCHES", 1)
    monkeypatch.setattr(done_watch, "POLL_SECONDS", 0.2)
    port = free_port()
    first, second = Runner(("127.0.0.1", port)), Runner(("127.0.0.2", port))
    second.ended.set()  # its tasks have ended: a watch would tell at once
    told: queue.Queue[str] = queue.Queue()
    watches = done_watch.DoneWatches(port, told.put)
    try:
        watches.watch("lab/exp-a", "127.0.0.1")
        watches.watch("lab/exp-b", "127.0.0.2")
        with pytest.raises(queue.Empty):
            told.get(timeout=1.0)  # exp-a's polls go on; exp-b waits for their end
        first.ended.set()
        assert [told.get(timeout=5), told.get(timeout=5)] == ["lab/exp-a", "lab/exp-b"]
    finally:
        watches.stop()
        for server in (first, second):
            server.shutdown()
            server.server_close()


def test_a_runner_that_never_answers_is_left_to_its_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(done_watch, "GIVE_UP_SECONDS", 1.0)
    ended = threading.Event()
    watches = done_watch.DoneWatches(free_port(), lambda key: ended.set())  # nothing listens
    watches.watch("lab/exp-a", "127.0.0.1")
    deadline = time.monotonic() + 10
    while watches._running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not watches._running and not ended.is_set()


def test_an_unprobed_pod_is_watched_beside_the_others_and_never_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(done_watch, "MAX_WATCHES", 1)
    monkeypatch.setattr(done_watch, "MAX_UNPROBED", 1)
    monkeypatch.setattr(done_watch, "POLL_SECONDS", 0.2)
    monkeypatch.setattr(done_watch, "GIVE_UP_SECONDS", 0.5)
    port = free_port()
    busy = Runner(("127.0.0.1", port))  # a probed Pod's, holding the one watch
    told: queue.Queue[str] = queue.Queue()
    watches = done_watch.DoneWatches(port, told.put)
    late: Runner | None = None
    try:
        watches.watch("lab/exp-a", "127.0.0.1")
        assert watches.reserve("lab/exp-b") and not watches.reserve("lab/exp-c")
        watches.watch("lab/exp-b", "127.0.0.2", unprobed=True)  # nothing answers there yet
        with pytest.raises(queue.Empty):
            told.get(timeout=1.5)  # three times the give-up: still asked
        assert "lab/exp-b" in watches._running
        late = Runner(("127.0.0.2", port))  # the runner listens at last, its tasks ended
        late.ended.set()
        assert told.get(timeout=5) == "lab/exp-b"
        assert not watches.reserve("lab/exp-c")  # held until its end is known
        watches.forget("lab/exp-b")
        assert watches.reserve("lab/exp-c")
    finally:
        watches.stop()
        for server in (busy, late):
            if server is not None:
                server.shutdown()
                server.server_close()


def test_an_unprobed_pod_the_kubelet_calls_ready_waits_for_its_tasks_end() -> None:
    port = free_port()
    runner = Runner(("127.0.0.1", port))
    apiserver = Apiserver([trial_pod("exp-a", "3", ready=True, probe=False)])
    index = PodIndex(apiserver, lambda *_: None, clusterwide=False, done_port=port)  # type: ignore[arg-type]

    def ready() -> bool:
        return any(p.name == "exp-a" and p.ready for p in index.pods(KEY))

    async def main() -> None:
        await index.ready("lab")
        await asyncio.sleep(0.5)
        assert index.pods(KEY) and not ready()  # Ready to the kubelet: it merely runs
        runner.ended.set()
        await until(ready)

    try:
        asyncio.run(main())
    finally:
        index.stop()
        runner.shutdown()
        runner.server_close()
