"""The operator's own requests to the apiserver: JSON in, plain dicts out, over one pool of
kept-alive connections.

The kubernetes package's typed API classes checked every call's arguments with pydantic,
built typed models of answers the operator reads as JSON, and imported some 250 model
modules: 23 MiB of the operator's RSS and a fifth of its CPU at 5,000 trials (py-spy). Its
configuration (kubeconfig or in-cluster, TLS, proxy, a token that is refreshed) and its
ApiException are kept: the connections come from its RESTClientObject's pool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes.client.configuration import Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTClientObject
from urllib3 import Timeout

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
# The metadata of an object, or of a list's items, without their spec and status (what
# client-go's metadata client asks for): a sweep that needs names and finalizers reads that.
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
MERGE_PATCH = "application/merge-patch+json"
# A watch's read size: the apiserver flushes each event, so a read returns what has come.
STREAM_READ = 1 << 16


def path(*parts: str) -> str:
    """A URL path from its segments, each quoted (names are DNS labels, but say so)."""
    return "/" + "/".join(quote(p, safe="") for p in parts)


def pods_path(namespace: str, *name: str) -> str:
    """The Pods of a namespace ("": of every namespace), or one of them."""
    if not namespace:
        return path("api", "v1", "pods", *name)
    return path("api", "v1", "namespaces", namespace, "pods", *name)


class Rest:
    def __init__(
        self,
        on_request: Callable[[str], None] | None = None,
        connections: int | None = None,
        configuration: Configuration | None = None,
    ) -> None:
        """`on_request(method)` is told of every request sent; `connections`: kept open to
        the apiserver, one per thread that may send at once."""
        self.configuration = configuration or Configuration.get_default_copy()
        if connections is not None:
            self.configuration.connection_pool_maxsize = connections
        self._pool = RESTClientObject(self.configuration).pool_manager
        self._on_request = on_request

    def opened(self) -> int:
        """Connections opened to the apiserver so far (the tests count them)."""
        return int(self._pool.connection_from_url(self.configuration.host).num_connections)

    def _send(
        self,
        method: str,
        url_path: str,
        body: Any,
        query: Mapping[str, Any] | None,
        content_type: str,
        timeout: Any,
        watch: bool = False,
        accept: str = JSON,
    ) -> Any:
        """The answer, unread; ApiException (with the apiserver's Status body) for any
        status but 2xx."""
        url = self.configuration.host + url_path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        headers = {"Accept": accept, "User-Agent": "cxlab-operator"}
        # read per request: an in-cluster token is refreshed by the configuration's hook
        settings: dict[str, Any] = dict(self.configuration.auth_settings())
        for auth in settings.values():
            headers[auth["key"]] = auth["value"]
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body, separators=(",", ":")).encode()
        if self._on_request is not None and not watch:
            self._on_request(method)
        answer = self._pool.request(
            method, url, body=data, headers=headers, timeout=timeout, preload_content=False,
            retries=False,
        )  # fmt: skip
        if not 200 <= answer.status < 300:
            try:
                text = answer.read().decode("utf-8", "replace")
            finally:
                answer.release_conn()
            raise ApiException(status=answer.status, reason=answer.reason, body=text)
        return answer

    def request(
        self,
        method: str,
        url_path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
        read: bool = True,
        accept: str = JSON,
    ) -> Any:
        """The answer's JSON (None with `read=False`: the body is drained, the connection
        pooled). ApiException for any status but 2xx, with the apiserver's Status body."""
        answer = self._send(method, url_path, body, query, content_type, timeout, accept=accept)
        try:
            if not read:
                answer.drain_conn()
                return None
            return json.loads(answer.read())
        finally:
            answer.release_conn()

    def text(self, url_path: str, *, timeout: float | None = None) -> str:
        """A text answer (a Prometheus exposition through the apiserver's node proxy)."""
        answer = self._send("GET", url_path, None, None, JSON, timeout, accept="text/plain")
        try:
            return str(answer.read().decode("utf-8", "replace"))
        finally:
            answer.release_conn()

    def stream(
        self,
        url_path: str,
        *,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        opened: Callable[[Any], None] | None = None,
    ) -> Iterator[Any]:
        """A watch: each line of the answer as JSON, as the apiserver sends it. `opened`
        is given the answer first (its `shutdown()` cuts a read in progress). Not counted
        among the requests: a watch is one per scope, not per trial."""
        answer = self._send(
            "GET", url_path, None, query, JSON, Timeout(connect=10, read=timeout), watch=True
        )
        if opened is not None:
            opened(answer)
        try:
            rest = b""
            for chunk in answer.stream(STREAM_READ):
                *lines, rest = (rest + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        finally:
            answer.close()  # never pooled: it may hold the rest of a stream
