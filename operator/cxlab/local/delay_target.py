"""The HTTP delay target for local http trials: cxlab-delay on a free loopback port, pinned
away from the trial's cores, stopped when the experiment ends."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

START_TIMEOUT_SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def find_program(name: str) -> str:
    """A Go program of the project: on PATH, else beside the interpreter running cxlab (make
    deps links them into the virtualenv's bin/, so `.venv/bin/cxlab` finds them unactivated)."""
    beside = os.path.dirname(sys.executable)
    path = shutil.which(name) or shutil.which(name, path=beside)
    if path is None:
        raise FileNotFoundError(
            f"{name} is neither on PATH nor in {beside}: build the Go programs with `make deps`"
        )
    return path


@contextlib.contextmanager
def delay_target(cores: set[int], response_bytes: int) -> Iterator[str]:
    """Yields the target's URL while it runs."""
    port = free_port()
    process = subprocess.Popen(
        [
            find_program("cxlab-delay"),
            "--listen",
            f"127.0.0.1:{port}",
            "--response-bytes",
            str(response_bytes),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"cxlab-delay exited at start: {stderr.strip()}")
        try:
            with urllib.request.urlopen(url + "healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"cxlab-delay did not answer on {url} within {START_TIMEOUT_SECONDS} s")
