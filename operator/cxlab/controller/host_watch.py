"""The trials a trial host runs (isolation: process), as the operator sees them: a thread
per host long-polls its GET /trials and hands each trial to the Pod index as a PodView, as
if it were a trial Pod; the passes decide from it as from a Pod. Starting a trial is a POST
of its Pod's manifest to the host, letting it go a DELETE (cxlab_runner.trial_host).

A host's trials are "listed" once it has answered once: until then a trial counted in status
and not seen may be running there (after a restart of the operator), and is not taken for
lost. A host that does not answer for UNREACHABLE_SECONDS is lost, with its trial.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cxlab.experiments.pod_view import PodView, view_pod

# A long poll's wait: the host answers at once on a change, else after this long.
POLL_SECONDS = 10.0
# A host that has not answered for this long since it last did, or since its Pod turned
# Ready, is taken as lost.
UNREACHABLE_SECONDS = 30.0
# Until it first answers (its container starting), a host is tried this often: its first
# trial goes as soon as it listens.
FIRST_TRY_SECONDS = 0.05
# POST and DELETE: the host answers a start within its own wait for the previous process
# to end (5 s at most).
REQUEST_SECONDS = 10.0

log = logging.getLogger(__name__)

# The host's trials by name (None: the host was not reachable for too long).
Deliver = Callable[[dict[str, PodView] | None], None]


class HostUnavailable(Exception):
    """The host did not take the request (not reachable, or busy with another trial)."""


def _request(
    host: PodView, port: int, method: str, path: str, body: Any = None,
    timeout: float = REQUEST_SECONDS,
) -> tuple[int, Any]:  # fmt: skip
    ip = host.ip or ""
    connection = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if host.host_token is not None:
            headers["Authorization"] = f"Bearer {host.host_token}"
        connection.request(method, path, body=data, headers=headers)
        answer = connection.getresponse()
        text = answer.read()
        try:
            document = json.loads(text) if text else None
        except ValueError:
            document = text.decode(errors="replace")
        return answer.status, document
    except OSError as error:
        raise HostUnavailable(f"{ip}:{port}: {error}") from error
    finally:
        connection.close()


def start_trial(host: PodView, port: int, manifest: dict[str, Any]) -> PodView:
    """Post the trial Pod's manifest to the host: it runs its command as a process (at once,
    or once the previous trial's process has ended). Returns the trial's view."""
    status, document = _request(host, port, "POST", "/trials", manifest)
    if status not in (200, 201) or not isinstance(document, dict):
        raise HostUnavailable(f"{host.name} answered {status}: {document}")
    return hosted_view(host, document)


def forget_trial(host: PodView, port: int, name: str) -> None:
    """Let a trial go: its process stops if it still runs, and the host forgets it."""
    status, document = _request(host, port, "DELETE", f"/trials/{name}")
    if status not in (200, 404):
        raise HostUnavailable(f"{host.name} answered {status}: {document}")


def hosted_view(host: PodView, document: dict[str, Any]) -> PodView:
    """A trial the host runs, as the view of a Pod on the host's node, at its address."""
    view = view_pod(document)
    return replace(
        view, ip=host.ip, node=host.node, image_id=host.image_id, host=host.name,
        created=view.created or view.started,
    )  # fmt: skip


class HostWatch:
    """One host's long poll, on a thread of its own, until stop()."""

    def __init__(self, host: PodView, port: int, deliver: Deliver) -> None:
        self.host = host
        self._port = port
        self._deliver = deliver
        self._stop = threading.Event()
        self._ready_at: float | None = None  # when its Pod was first seen Ready
        self._thread = threading.Thread(target=self._run, name=f"host-{host.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def ready(self) -> None:
        """Its Pod is Ready (it serves, the kubelet says): silence counts from now on."""
        if self._ready_at is None:
            self._ready_at = time.monotonic()

    def _run(self) -> None:
        version: int | None = None
        answered: float | None = None  # when it last answered
        failures = 0
        while not self._stop.is_set():
            query = "" if version is None else f"?version={version}&wait={POLL_SECONDS:g}"
            try:
                status, document = _request(
                    self.host, self._port, "GET", f"/trials{query}",
                    timeout=POLL_SECONDS + REQUEST_SECONDS,
                )  # fmt: skip
                if status != 200 or not isinstance(document, dict):
                    raise HostUnavailable(f"answered {status}: {document}")
            except HostUnavailable as error:
                if self._stop.is_set():
                    return
                failures += 1
                since = answered if answered is not None else self._ready_at
                if since is not None and time.monotonic() - since > UNREACHABLE_SECONDS:
                    log.warning("trial host %s lost: %s", self.host.name, error)
                    self._deliver(None)
                    return
                first = answered is None and self._ready_at is None  # still starting
                self._stop.wait(FIRST_TRY_SECONDS if first else min(0.1 * 2**failures, 2.0))
                continue
            failures = 0
            answered = time.monotonic()
            if document.get("version") == version:
                continue  # the wait ended with nothing new
            version = document.get("version")
            trials = [hosted_view(self.host, d) for d in document.get("items") or []]
            if not self._stop.is_set():
                self._deliver({t.name: t for t in trials})
