"""The operator's JSON client for the apiserver (cxlab.controller.rest), against a local HTTP
server: what it sends (method, path, query, token, body, content type), what it returns, the
apiserver's Status body in the ApiException, and connections kept across answers not read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from kubernetes.client.configuration import Configuration
from kubernetes.client.exceptions import ApiException

from cxlab.controller.rest import JSON_PATCH, Rest, path


class Recorded(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the apiserver
    seen: ClassVar[list[dict[str, Any]]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append({
            "method": self.command, "path": self.path, "body": body,
            "authorization": self.headers.get("Authorization"),
            "type": self.headers.get("Content-Type"),
        })  # fmt: skip
        if "watch" in self.path:
            self._stream()
            return
        if "conflict" in self.path:
            code, answer = 409, {"kind": "Status", "reason": "Conflict", "message": "moved on"}
        else:
            code, answer = 200, {"items": [{"name": "a"}], "path": self.path}
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self) -> None:
        """Watch events as the apiserver sends them, chunked, an event split across two."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in (b'{"type":"ADDED","object":{"a":', b'1}}\n\n{"type":"BOO', b'KMARK"}\n', b""):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()

    do_GET = do_POST = do_PATCH = do_DELETE = _answer

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def rest() -> Iterator[Rest]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    configuration.api_key = {"authorization": "token-1"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    Recorded.seen = []
    sent: list[str] = []
    client = Rest(sent.append, connections=2, configuration=configuration)
    client.sent = sent  # type: ignore[attr-defined]
    yield client
    server.shutdown()


def test_a_request_says_who_it_is_and_returns_the_json(rest: Rest) -> None:
    url = path("api", "v1", "namespaces", "lab", "pods")
    answer = rest.request("GET", url, query={"labelSelector": "cxlab.dev/experiment=x y",
                                             "limit": None})  # fmt: skip
    assert answer["items"] == [{"name": "a"}]
    [seen] = Recorded.seen
    assert seen["path"] == "/api/v1/namespaces/lab/pods?labelSelector=cxlab.dev%2Fexperiment%3Dx+y"
    assert seen["authorization"] == "Bearer token-1"
    assert rest.sent == ["GET"]  # type: ignore[attr-defined]


def test_a_body_goes_as_json_with_its_content_type(rest: Rest) -> None:
    patch = [{"op": "add", "path": "/status", "value": {"gomaxprocs": None}}]
    rest.request("PATCH", "/x", patch, content_type=JSON_PATCH)
    [seen] = Recorded.seen
    assert json.loads(seen["body"]) == patch and seen["type"] == JSON_PATCH


def test_a_refusal_is_an_api_exception_with_the_status_body(rest: Rest) -> None:
    with pytest.raises(ApiException) as refused:
        rest.request("POST", "/conflict", {"a": 1})
    assert refused.value.status == 409
    assert json.loads(refused.value.body)["message"] == "moved on"


def test_answers_not_read_keep_their_connection(rest: Rest) -> None:
    for _ in range(3):
        assert rest.request("DELETE", "/pods/p", read=False) is None
    rest.request("GET", "/pods")
    with pytest.raises(ApiException):
        rest.request("POST", "/conflict", {})
    rest.request("GET", "/pods")
    assert rest.opened() == 1 and len(Recorded.seen) == 6


def test_a_watch_gives_each_line_as_json_and_is_not_counted(rest: Rest) -> None:
    opened: list[Any] = []
    events = list(rest.stream("/api/v1/pods", query={"watch": "true"}, opened=opened.append))
    assert events == [{"type": "ADDED", "object": {"a": 1}}, {"type": "BOOKMARK"}]
    assert len(opened) == 1 and Recorded.seen[0]["path"] == "/api/v1/pods?watch=true"
    assert rest.sent == []  # type: ignore[attr-defined]
