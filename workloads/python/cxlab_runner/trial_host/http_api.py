"""The trial host's HTTP API (its package's docstring says what each path answers): JSON
bodies, the operator's token checked on every request but the kubelet's probe."""

from __future__ import annotations

import hmac
import json
import math
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cxlab_runner.trial_host.host import Conflict, TrialHost, Unavailable
from cxlab_runner.trial_host.manifest import BadRequest

MAX_POLL_SECONDS = 60.0


def serve(host: TrialHost, address: str, port: int, token: str | None) -> ThreadingHTTPServer:
    """The API's server for the host (not yet serving): token None answers every request."""
    handler = type("Handler", (_Handler,), {"host": host, "token": token})
    server = ThreadingHTTPServer((address, port), handler)
    server.daemon_threads = True
    return server


class _Handler(BaseHTTPRequestHandler):
    host: TrialHost
    token: str | None  # None: every request is answered (a host run by hand, the tests)
    protocol_version = "HTTP/1.1"  # the operator's polls keep their connection

    def _allowed(self) -> bool:
        """Whether the request shows the host's token; if not, it is answered 401."""
        if self.token is None:
            return True
        shown = self.headers.get("Authorization") or ""
        if hmac.compare_digest(shown.encode(), f"Bearer {self.token}".encode()):
            return True
        self.close_connection = True  # a body it did not read must not be taken for a request
        self._send(HTTPStatus.UNAUTHORIZED, {"error": "this trial host answers its operator only"})
        return False

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/healthz":  # the kubelet's probe
            if self.host.warm.is_set():
                self._send(HTTPStatus.OK, "ok")
            else:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, "warming")
        elif not self._allowed():
            return
        elif url.path == "/trials":
            query = parse_qs(url.query)
            try:
                version = int(query["version"][0]) if "version" in query else None
                wait = float(query["wait"][0]) if "wait" in query else 0.0
                if math.isnan(wait):
                    raise ValueError(wait)
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, {"error": "version and wait must be numbers"})
                return
            wait = min(max(wait, 0.0), MAX_POLL_SECONDS)
            self._send(HTTPStatus.OK, self.host.list(version, wait))
        elif url.path.startswith("/trials/"):
            document = self.host.get(url.path.removeprefix("/trials/"))
            if document is None:
                self._send(HTTPStatus.NOT_FOUND, {"error": "no such trial"})
            else:
                self._send(HTTPStatus.OK, document)
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": "no such path"})

    def do_POST(self) -> None:
        if not self._allowed():
            return
        if urlsplit(self.path).path != "/trials":
            self._send(HTTPStatus.NOT_FOUND, {"error": "no such path"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._send(HTTPStatus.BAD_REQUEST, {"error": "body: not a JSON document"})
            return
        try:
            status, document = self.host.start(body)
        except BadRequest as error:
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(error)})
        except Conflict as error:
            self._send(HTTPStatus.CONFLICT, {"error": str(error)})
        except Unavailable as error:
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(error)})
        else:
            self._send(status, document)

    def do_DELETE(self) -> None:
        if not self._allowed():
            return
        path = urlsplit(self.path).path
        if path.startswith("/trials/") and self.host.delete(path.removeprefix("/trials/")):
            self._send(HTTPStatus.OK, {"deleted": path.removeprefix("/trials/")})
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": "no such trial"})

    def _send(self, status: int, body: str | dict[str, Any]) -> None:
        if isinstance(body, str):
            data, kind = f"{body}\n".encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(body).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a long poll every few seconds: the log keeps the trials' starts and ends
