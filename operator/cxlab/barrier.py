"""Releasing a trial's runners from the start barrier (workloads/CONTRACT.md), the same way
for the local backend's processes and the operator's Pods: wait until every runner answers
GET /ready, then POST /start to all of them at once, one thread each, lined up behind a
barrier of their own so that no release waits for another's connection."""

from __future__ import annotations

import contextlib
import http.client
import threading


def is_ready(address: str, timeout: float = 1.0) -> bool:
    """Whether the runner at host:port waits at (or has left) the barrier."""
    return _call("GET", "/ready", address, timeout) == 200


def release(addresses: list[str], timeout: float = 5.0) -> list[str]:
    """POST /start to every runner at once; the addresses that did not answer 200."""
    lined_up = threading.Barrier(len(addresses))
    failed: list[str] = []

    def one(address: str) -> None:
        connection = _connect(address, timeout)  # connected before the line-up: only the
        try:  # request itself is timed against the others
            lined_up.wait(timeout)
            connection.request("POST", "/start", body=b"")
            if connection.getresponse().status != 200:
                failed.append(address)
        except (OSError, http.client.HTTPException, threading.BrokenBarrierError):
            failed.append(address)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(a,), daemon=True) for a in addresses]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(2 * timeout)
    return failed


def _connect(address: str, timeout: float) -> http.client.HTTPConnection:
    host, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    with contextlib.suppress(OSError):  # request() then connects again and fails with why
        connection.connect()
    return connection


def _call(method: str, path: str, address: str, timeout: float) -> int | None:
    connection = _connect(address, timeout)
    try:
        connection.request(method, path)
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()
