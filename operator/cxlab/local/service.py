"""spec.service on this machine (cxlab run): a variant's command started in a session of its
own, pinned to cores apart from the generator's (its forked workers inherit them), ready when
the target answers HTTP, stopped (SIGTERM to its group, then SIGKILL) before the next variant
and on any exit of cxlab run; it also dies if cxlab run is killed (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.spec.service import ServiceSubject, Variant
from cxlab.local.cores import DoesNotFit

READY_POLL_SECONDS = 0.05
# SIGTERM lets gunicorn stop its workers (it waits its own graceful timeout for them); what
# is still there after this is killed.
STOP_GRACE_SECONDS = 5.0
STDERR_LINES = 5
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child after fork only calls it


class ServiceRefused(DoesNotFit):
    """A service cxlab run cannot start as asked: one line naming the field (exit 2)."""


def check_local_service(spec: ExperimentSpec) -> None:
    """What cxlab run cannot honour for a process: a Deployment to copy, another image,
    replicas and a memory or CPU limit of a variant."""
    service = spec.service
    if service is None:
        return
    if service.command is None:
        raise ServiceRefused(
            "service.deployment: cxlab run has no Deployment to copy: give service.command "
            "(the service's command line), or apply the experiment to a cluster"
        )
    variants = service.variants
    if variants is None:
        return
    if variants.replicas is not None and variants.replicas != [1]:
        raise ServiceRefused(
            f"service.variants.replicas: cxlab run starts one process per variant, not "
            f"{variants.replicas} replicas: leave it out (or [1]), or run on a cluster"
        )
    if variants.resources is not None:
        raise ServiceRefused(
            "service.variants.resources: cxlab run cannot give a process a CPU or memory "
            "limit: leave it out (the service gets cores of its own), or run on a cluster"
        )
    for index, named in enumerate(variants.named or ()):
        if named.image is not None:
            raise ServiceRefused(
                f"service.variants.named[{index}].image: cxlab run starts a command, not an "
                f"image: give the variant's command instead, or run on a cluster"
            )


def service_argv(service: ServiceSubject, variant: Variant) -> list[str]:
    """The variant's command (a named variant's own, else service.command), its args appended."""
    command = variant.command if variant.command is not None else service.command
    assert command is not None  # check_local_service
    return [*command, *(variant.args or ())]


def service_environment(environ: Mapping[str, str], variant: Variant) -> dict[str, str]:
    """cxlab run's environment, the named variant's env over it, then the env axes' values
    (Variant.env holds both, in that order)."""
    return {**environ, **dict(variant.env)}


def _in_own_session(cores: set[int]) -> None:
    """In the child before exec: a session (and group) of its own, so Ctrl-C at the terminal
    does not reach it and its group can be signalled whole; its cores; death with cxlab run."""
    os.setsid()
    os.sched_setaffinity(0, cores)
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass
class RunningService:
    variant: Variant
    process: subprocess.Popen[bytes]
    errors: IO[bytes]

    @classmethod
    def start(
        cls, argv: list[str], env: dict[str, str], cores: set[int], variant: Variant
    ) -> RunningService:
        errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop(), a variant later)
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            env=env,
            preexec_fn=lambda: _in_own_session(cores),
        )
        return cls(variant, process, errors)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, url: str, timeout: float) -> str | None:
        """Until the target gets any HTTP answer; why not, if the service exited or did not
        answer within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return self.failure("exited before it was ready")
            if answers(url):
                return None
            time.sleep(READY_POLL_SECONDS)
        return self.failure(f"was not ready (no HTTP answer at {url}) within {timeout:g} s")

    def failure(self, what: str) -> str:
        """A message naming the variant, the process's state and its last stderr lines."""
        code = self.process.poll()
        state = "running" if code is None else exit_text(code)
        return f"service variant {self.variant.name} {what} ({state}); stderr: {self.last_errors()}"

    def last_errors(self) -> str:
        self.errors.seek(0)
        lines = self.errors.read().decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-STDERR_LINES:]) or "(nothing)"

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM to the whole group, SIGKILL to what is left after `grace`; then reaped."""
        _signal_group(self.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(self.process.pid):
            self.process.poll()
            time.sleep(0.02)
        _signal_group(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.errors.close()


def exit_text(code: int) -> str:
    """A Popen return code as a reader wants it: "exit status 3" or "killed by SIGKILL"."""
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


def answers(url: str, timeout: float = 1.0) -> bool:
    """Whether an HTTP request to url gets any HTTP answer (an error status is one)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
