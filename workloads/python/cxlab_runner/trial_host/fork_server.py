"""How a trial's process starts: a Python runner of a model that does not monkey-patch the
standard library comes from a warm fork server, whose imports are done once (the first tens
of milliseconds of a trial are otherwise spent importing); everything else is exec'd."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import re
import subprocess
import sys
import threading
from multiprocessing.process import BaseProcess
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from cxlab_runner.trial_host.manifest import TrialSpec
    from cxlab_runner.trial_host.trial_record import Process

WARM_WAIT_SECONDS = 60.0  # a forked trial's wait for the fork server to be warm
# These monkey-patch the standard library before their imports (cxlab_runner.__main__): a
# process that already imported it unpatched cannot run them, so they are exec'd fresh.
EXEC_MODELS = frozenset({"gevent", "locust"})
# What a runner imports before its tasks start (python -X importtime -m cxlab_runner ...):
# the trial and the models dominate (prometheus_client, ssl, asyncio, http.client under them).
PRELOAD = [
    "cxlab_runner.__main__",
    "cxlab_runner.config",
    "cxlab_runner.trial",
    "cxlab_runner.models",
    "cxlab_runner.models.asyncio_model",
    "cxlab_runner.models.sequential_model",
    "cxlab_runner.models.threads_model",
    "cxlab_runner.models.processes_model",
    # what the processes model imports as it starts its pool
    "multiprocessing.heap",
    "multiprocessing.popen_fork",
    "multiprocessing.sharedctypes",
    "multiprocessing.synchronize",
    # the forked child's target (run_forked) is unpickled from here: imported here, that
    # costs no imports
    "cxlab_runner.trial_host.fork_server",
]
_PYTHON = re.compile(r"python3?(\.\d+)?")


class ForkServer:
    """multiprocessing's fork server, its imports done before the first trial."""

    def __init__(self) -> None:
        self.warm = threading.Event()
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)

    def warm_up(self) -> None:
        """Start the fork server and wait for its imports, so no trial pays for them; raises
        what kept it from starting."""
        multiprocessing.forkserver.ensure_running()
        process = self._context.Process(target=_warm, name="warm-up")
        process.start()
        process.join()
        self.warm.set()

    def start(self, spec: TrialSpec, log: IO[bytes]) -> Process:
        """The trial's process, forked when forks() says it can be, else exec'd; its output
        goes to the log."""
        if not forks(spec.argv):
            popen = subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group, killed whole at its end
            )
            return Exec(popen)
        # a trial posted as the host starts (the operator does not wait for the readiness
        # probe) waits for the fork server's imports, not the probe
        self.warm.wait(WARM_WAIT_SECONDS)
        forked = self._context.Process(
            target=run_forked, args=(spec.argv, spec.log_path), name=spec.name
        )
        forked.start()
        return Forked(forked)


def forks(argv: list[str]) -> bool:
    """Whether the command is the Python runner for a model the fork server can run: only
    when the model is known for sure (an exec is always right, only slower)."""
    if len(argv) < 3 or argv[1:3] != ["-m", "cxlab_runner"]:
        return False
    if not _PYTHON.fullmatch(os.path.basename(argv[0])):
        return False
    model = None
    flags = argv[3:]
    for index, flag in enumerate(flags):
        name, equals, value = flag.partition("=")
        # argparse takes the last --model, and takes it abbreviated (--mod gevent)
        if len(name) >= 4 and "--model".startswith(name):
            model = value if equals else (flags[index + 1] if index + 1 < len(flags) else None)
    return model is not None and model not in EXEC_MODELS


class Exec:
    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.pid, self._popen = popen.pid, popen

    def wait(self, timeout: float | None) -> int | None:
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class Forked:
    def __init__(self, process: BaseProcess) -> None:
        assert process.pid is not None
        self.pid, self._process = process.pid, process

    def wait(self, timeout: float | None) -> int | None:
        # Through its sentinel: the fork server reports the exit once it has reaped it.
        self._process.join(timeout)
        return self._process.exitcode


def run_forked(argv: list[str], log_path: str) -> None:
    """In the fork server's child: the runner, as `python3 -m cxlab_runner` runs it."""
    os.setsid()  # its own process group, which the host can kill whole, as exec'd trials
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    from cxlab_runner import __main__ as runner

    sys.argv = [runner.__file__, *argv[3:]]
    # SystemExit's code is the process's exit status (multiprocessing's bootstrap), as it is
    # for an exec'd interpreter.
    sys.exit(runner.main(argv[3:]))


def _warm() -> None:
    """Forked once at start-up: back only when the fork server has done its imports."""
