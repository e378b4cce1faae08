"""What the operator's Kube costs the apiserver per request: its connections are kept.

Every trial creates and deletes a Pod. An answer left unread closes its connection instead
of pooling it, so the next request opens another and pays a TLS handshake (the operator's
and the apiserver's CPU, and a TLS context's memory in the operator): at 5,000 trials that
was 10,000 handshakes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kubernetes
import pytest

from cxlab.controller.kube import Kube

pytestmark = pytest.mark.cluster


@pytest.fixture
def namespace(cluster: None) -> Iterator[str]:
    name = f"cxlab-test-conn-{uuid.uuid4().hex[:6]}"
    core = kubernetes.client.CoreV1Api()
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def opened(kube: Kube) -> int:
    """Connections the client has opened to the apiserver so far."""
    client = kube.core.api_client
    pool = client.rest_client.pool_manager.connection_from_url(client.configuration.host)
    return int(pool.num_connections)


def test_creating_and_deleting_pods_reuses_one_connection(namespace: str) -> None:
    kube = Kube()
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
    assert opened(kube) == 1
