"""Fixtures for the tests of this folder (tests/cluster has its own)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import BIN, run_runner

from cxlab.local.delay_target import delay_target, free_port

# Under `--dist loadgroup` (make test's cluster phase), the tests of these modules stay on one
# pytest-xdist worker: their module fixtures (a Helm release of cluster-scoped objects, the
# verdicts of every bad input) are made once. Every other test goes to whichever worker is
# free. (pytest-xdist 3.8 marks a group by rewriting Item._nodeid, which pytest 9 no longer
# reads: the same schedule here, with one scope per group and one per other test.)
GROUPED = ("tests/cluster/test_chart.py", "tests/cluster/test_bad_input_on_apiserver.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in GROUPED else nodeid

    return Grouped(config, log)


@pytest.fixture(scope="session")
def target_url() -> Iterator[str]:
    """A real cxlab-delay on loopback for http trials."""
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    with delay_target(set(os.sched_getaffinity(0)), 128) as url:
        yield url


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def result_text() -> str:
    """A real Result, as a trial Pod's termination message carries it (the deciding tests')."""
    return json.dumps(run_runner("asyncio", "--workload", "sleep", "--tasks", "5", "--rtt", "1ms"))
