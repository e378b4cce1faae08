"""One active operator among replicas: leader election on a coordination.k8s.io Lease, as
client-go's leaderelection does it.

A replica runs the operator only while it holds the Lease. The holder renews it every
`retry` seconds; a standby tries as often, and takes the Lease once it has seen no renewal
for `duration` seconds — measured on its own clock from when it saw the Lease last change,
so clocks that disagree between nodes do not matter. A holder that could not renew for
`renew_deadline` (< duration) seconds stops at once (the process exits and restarts as a
standby): by the time a standby may take over, the old holder has stopped acting.

Two active replicas would still not record a trial twice: status writes carry the version
they were decided from, and Pod names carry the attempt (cxlab.controller.experiment_pass). The
Lease keeps them from wasting passes on each other's conflicts.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseTimes:
    # A standby takes the Lease after seeing no renewal for this long (the takeover time
    # after a crash); client-go's default is 15 s.
    duration: float = 15.0
    # The holder gives up (exits) when it could not renew for this long.
    renew_deadline: float = 10.0
    # How often the holder renews and a standby tries.
    retry: float = 2.0


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElection:
    def __init__(
        self,
        namespace: str,
        name: str,
        identity: str,
        times: LeaseTimes = LeaseTimes(),
        api: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.namespace, self.name, self.identity, self.times = namespace, name, identity, times
        # Any: the unit tests give a fake; the client takes plain dicts as well as models
        self.api: Any = api or kubernetes.client.CoordinationV1Api()
        self.clock = clock
        self._seen: tuple[str, float] | None = None  # (resourceVersion, when we saw it change)
        self._renewed = 0.0  # when this replica last renewed (clock)
        self.leading = False
        # Every call bounded: a request hung on a dead connection (the apiserver restarting)
        # would hold the renewal loop past its deadline, a leader that cannot renew leading on.
        self._timeout = {"_request_timeout": times.retry}

    def _record(self, transitions: int) -> dict[str, Any]:
        now = _rfc3339(datetime.now(UTC))
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.times.duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt: True while this replica holds the Lease."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, **self._timeout)
        except ApiException as error:
            if error.status != 404:
                raise
            body = {"metadata": {"name": self.name}, "spec": self._record(0)}
            try:
                self.api.create_namespaced_lease(self.namespace, body, **self._timeout)
            except ApiException as conflict:
                if conflict.status == 409:  # another replica created it first
                    return False
                raise
            return self._became(True)
        spec = lease.spec
        version = lease.metadata.resource_version
        if self._seen is None or self._seen[0] != version:
            self._seen = (version, self.clock())
        holder = spec.holder_identity
        mine = holder == self.identity
        expired = self.clock() - self._seen[1] >= float(spec.lease_duration_seconds or 0)
        if not (mine or not holder or expired):
            return self._became(False)
        record = self._record((spec.lease_transitions or 0) + (0 if mine else 1))
        if mine and spec.acquire_time is not None:
            record["acquireTime"] = _rfc3339(spec.acquire_time)
        body = {"metadata": {"name": self.name, "resourceVersion": version}, "spec": record}
        try:
            # replace, with the version read: of two standbys only one wins a takeover
            self.api.replace_namespaced_lease(self.name, self.namespace, body, **self._timeout)
        except ApiException as conflict:
            if conflict.status == 409:
                return self._became(False)
            raise
        return self._became(True)

    def _became(self, leading: bool) -> bool:
        if leading:
            self._renewed = self.clock()
        if leading != self.leading:
            log.info(
                "%s the Lease %s/%s as %s",
                "acquired" if leading else "lost",
                self.namespace,
                self.name,
                self.identity,
            )
        self.leading = leading
        return leading

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this replica holds the Lease (True) or `stop` is set (False)."""
        while not stop.is_set():
            try:
                if self.try_acquire_or_renew():
                    return True
            except Exception:  # the apiserver unreachable: a standby just tries again
                log.exception("leader election: could not read or take the Lease")
            stop.wait(self.times.retry)
        return False

    def keep(self, lost: Callable[[], None], stop: threading.Event) -> threading.Thread:
        """Renew in a daemon thread; call `lost` once a renewal is renew_deadline late."""

        def renew() -> None:
            while not stop.wait(self.times.retry):
                try:
                    if self.try_acquire_or_renew():
                        continue
                except Exception:
                    log.exception("leader election: could not renew the Lease")
                if self.clock() - self._renewed >= self.times.renew_deadline or not self.leading:
                    lost()
                    return

        thread = threading.Thread(target=renew, name="lease", daemon=True)
        thread.start()
        return thread

    def release(self) -> None:
        """Hand the Lease over now (a clean shutdown): a standby takes it on its next try."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, **self._timeout)
            if lease.spec.holder_identity != self.identity:
                return
            body = {
                "metadata": {"name": self.name, "resourceVersion": lease.metadata.resource_version},
                "spec": {
                    "holderIdentity": None,
                    "leaseDurationSeconds": 1,
                    "leaseTransitions": lease.spec.lease_transitions or 0,
                },
            }
            self.api.replace_namespaced_lease(self.name, self.namespace, body, **self._timeout)
            log.info("released the Lease %s/%s", self.namespace, self.name)
        except Exception:  # the standby takes it after `duration` instead
            log.exception("leader election: could not release the Lease")


def identity() -> str:
    """This replica: its Pod's name (the hostname in a Pod), unique per process."""
    return f"{os.environ.get('HOSTNAME') or os.uname().nodename}-{os.getpid()}"


class _Alive(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()
        self.wfile.write(b"standing by\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every few seconds is not news


class StandbyHealth:
    """/healthz on the liveness port while a replica stands by (kopf serves it once the
    replica leads): a standby is alive, not to be restarted."""

    def __init__(self, port: int) -> None:
        self._server = ThreadingHTTPServer(("0.0.0.0", port), _Alive) if port else None
        if self._server is not None:
            threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
