"""Fixtures for the tests of this folder (tests/cluster has its own)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from helpers import BIN

from cxlab.local.delay_target import delay_target, free_port


@pytest.fixture(scope="session")
def target_url() -> Iterator[str]:
    """A real cxlab-delay on loopback for http trials."""
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    with delay_target(set(os.sched_getaffinity(0)), 128) as url:
        yield url


@pytest.fixture
def metrics_port() -> int:
    return free_port()
