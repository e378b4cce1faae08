"""A service's start-up is over when its tree goes idle: settle() on real processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from cxlab.local.service_meter import settle


@pytest.fixture
def process(request: pytest.FixtureRequest) -> Iterator[int]:
    """The program running (past the interpreter's start-up, whose CPU is the machine's to
    give: on a busy one it was slow enough to look idle)."""
    code = f"print('running', flush=True)\n{request.param}"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "running\n"
    yield child.pid
    child.kill()
    child.wait()


@pytest.mark.parametrize("process", ["import time; time.sleep(30)"], indirect=True)
def test_an_idle_tree_has_settled(process: int) -> None:
    assert settle(process, timeout=5) is True


@pytest.mark.parametrize("process", ["while True: pass"], indirect=True)
def test_a_busy_tree_has_not(process: int) -> None:
    assert settle(process, timeout=0.6) is False
