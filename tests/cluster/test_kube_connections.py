"""What the operator's Kube costs the apiserver per request: its connections are kept.

Every trial creates and deletes a Pod. An answer left unread closes its connection instead
of pooling it, so the next request opens another and pays a TLS handshake (the operator's
and the apiserver's CPU, and a TLS context's memory in the operator): at 5,000 trials that
was 10,000 handshakes.
"""

from __future__ import annotations

import pytest
from helpers.cluster import Lab

from cxlab.controller.kube import Kube

pytestmark = pytest.mark.cluster


def test_creating_and_deleting_pods_reuses_one_connection(lab: Lab) -> None:
    kube, namespace = Kube(), lab.namespace
    for i in range(5):
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"conn-{i}", "namespace": namespace},
            # never scheduled: only the apiserver's side of a trial Pod is wanted here
            "spec": {
                "nodeSelector": {"cxlab.dev/no-such-node": "true"},
                "containers": [{"name": "pause", "image": "cxlab.dev/pause:dev"}],
            },
        }
        assert kube.create_pod(manifest)
        kube.delete_pod(namespace, f"conn-{i}")
    assert kube.rest.opened() == 1
