"""The operator's own watch of cxlab's Pods (cxlab.controller.pod_watch), against the real
apiserver: what is there before the first pass, each change once, and nothing lost while the
watch was cut. (A resume point expired, 410 Gone, is in tests/controller/test_pod_watch.py: a fresh
cluster's watch cache still holds every version.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers import until
from helpers.cluster import Lab

from cxlab.controller.kube import Kube
from cxlab.controller.pod_watch import PodIndex
from cxlab.controller.rest import Rest
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.pods import LABEL_EXPERIMENT

pytestmark = pytest.mark.cluster

Change = tuple[tuple[str, str], PodView | None, PodView | None]


def manifest(namespace: str, name: str, experiment: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "labels": {LABEL_EXPERIMENT: experiment},
        },
        # never scheduled: only the apiserver's side of a trial Pod is wanted here
        "spec": {
            "nodeSelector": {"cxlab.dev/no-such-node": "true"},
            "containers": [{"name": "pause", "image": "cxlab.dev/pause:dev"}],
        },
    }  # fmt: skip


def test_the_index_holds_each_experiments_pods_and_tells_each_change(lab: Lab) -> None:
    kube, namespace = Kube(), lab.namespace
    kube.create_pod(manifest(namespace, "before", "exp-a"))
    changes: list[Change] = []
    lists: list[str] = []

    async def main() -> None:
        rest = Rest(on_request=lists.append)
        index = PodIndex(rest, lambda *change: changes.append(change), clusterwide=False)
        try:
            await asyncio.wait_for(index.ready(namespace), 30)
            # the first pass sees what was there before the watch
            assert [p.name for p in index.pods((namespace, "exp-a"))] == ["before"]
            kube.create_pod(manifest(namespace, "after", "exp-b"))
            await until(lambda: bool(index.pods((namespace, "exp-b"))))
            kube.delete_pod(namespace, "before")
            await until(lambda: not index.pods((namespace, "exp-a")))
            # the watch is cut, and a Pod goes while it waits to resume (a second)
            scope = index._scopes[namespace]
            scope.answer.shutdown()
            await until(lambda: scope.answer is None)
            kube.delete_pod(namespace, "after")
            await until(lambda: not index.pods((namespace, "exp-b")))
            assert lists == ["GET"]  # resumed where it was: no second list
        finally:
            index.stop()

    asyncio.run(main())
    told = [
        (key[1], before and before.name, after and after.name) for key, before, after in changes
    ]
    # each Pod told once when it came and once when it went; "before" may change while it
    # is pending (the apiserver marks it deleting first)
    assert told[0] == ("exp-a", None, "before")
    assert ("exp-b", None, "after") in told
    assert told.count(("exp-a", "before", None)) == 1
    assert told.count(("exp-b", "after", None)) == 1
    assert told[-1] == ("exp-b", "after", None)
