"""The Pod watch's protocol (cxlab.controller.pod_watch) against a scripted apiserver: a resume
point that expired (410 Gone, as an ERROR event or as the answer) lists again, and a Pod the
new list lacks is told gone; bookmarks move the resume point on. The real apiserver's side is
in tests/cluster/test_cluster_pod_watch.py."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from cxlab.controller.pod_watch import PodIndex
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import LABEL_EXPERIMENT


def pod(name: str, version: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "namespace": "lab", "resourceVersion": version,
            "labels": {LABEL_EXPERIMENT: "exp", "app.kubernetes.io/component": "trial"},
        },
        "status": {"phase": phase},
    }  # fmt: skip


class Scripted:
    """Answers lists and watches from a script; records the versions watched from."""

    def __init__(self, lists: list[list[dict[str, Any]]], watches: list[Any]) -> None:
        self.lists, self.watches = lists, watches
        self.watched_from: list[str] = []
        self.cut = threading.Event()

    def request(self, method: str, path: str, query: dict[str, Any]) -> dict[str, Any]:
        items = self.lists.pop(0)
        version = max((p["metadata"]["resourceVersion"] for p in items), default="1")
        return {"items": items, "metadata": {"resourceVersion": version}}

    def stream(
        self, path: str, *, query: dict[str, Any], timeout: float, opened: Any
    ) -> Iterator[Any]:
        self.watched_from.append(query["resourceVersion"])
        opened(self)
        if not self.watches:  # nothing more: wait until the index stops
            self.cut.wait(30)
            return
        script = self.watches.pop(0)
        if isinstance(script, Exception):
            raise script
        yield from script

    def shutdown(self) -> None:
        self.cut.set()


@pytest.mark.parametrize("gone", ["event", "answer"])
def test_an_expired_resume_point_lists_again_and_a_pod_it_lacks_is_gone(gone: str) -> None:
    expired = (
        [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}]
        if gone == "event" else ApiException(status=410, reason="Gone")
    )  # fmt: skip
    rest = Scripted(
        lists=[[pod("a", "5"), pod("b", "6")], [pod("b", "9")]],
        watches=[
            [{"type": "MODIFIED", "object": pod("b", "7", phase="Succeeded")},
             {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}],
            expired,
        ],
    )  # fmt: skip
    told: list[tuple[str | None, str | None]] = []

    def on_change(key: tuple[str, str], before: PodView | None, after: PodView | None) -> None:
        assert key == ("lab", "exp")
        told.append((before and before.phase, after and after.name))

    async def main() -> list[PodView]:
        index = PodIndex(rest, on_change, clusterwide=False)  # type: ignore[arg-type]
        try:
            await index.ready("lab")
            deadline = time.monotonic() + 10
            while len(rest.lists) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # the second list's changes, delivered
            return index.pods(("lab", "exp"))
        finally:
            index.stop()

    left = asyncio.run(main())
    assert [p.name for p in left] == ["b"] and left[0].phase == "Running"
    # a went while the watch was gone; b was seen ended, then as the new list has it
    assert told == [
        (None, "a"),
        (None, "b"),
        ("Running", "b"),
        ("Running", None),
        ("Succeeded", "b"),
    ]
    # from the first list, from the bookmark, from the second list
    assert rest.watched_from == ["6", "8", "9"]
