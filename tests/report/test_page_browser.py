"""The HTML report as a person sees it: a real local run's report opened in headless
Chromium, whose screenshot must show the plots' lines in the series colours."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import BIN
from PIL import Image

from cxlab.report.svg import PALETTE

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # root in a container
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def screenshot(page: Path, out: Path, profile: Path) -> Image.Image:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: run `make deps`")
    subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}",
         "--window-size=1200,2600", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return Image.open(out).convert("RGB")


def colour_pixels(image: Image.Image, colour: str) -> int:
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return sum(count for count, pixel in image.getcolors(maxcolors=2**24) or [] if pixel == rgb)


def test_the_report_of_a_real_run_draws_its_plots(tmp_path: Path) -> None:
    experiment = {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": "seen"},
        "spec": {
            "workload": {"type": "sleep", "tasks": 40, "rtt": "20ms"},
            "models": [{"model": "threads", "workers": [2, 8, 0]}, {"model": "asyncio"}],
        },
    }
    path = tmp_path / "seen.yaml"
    path.write_text(yaml.safe_dump(experiment))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "cxlab.cli", "run", str(path), "--out", str(tmp_path / "out")]
    subprocess.run(command, check=True, capture_output=True, env=env)
    image = screenshot(
        tmp_path / "out" / "report.html", tmp_path / "shot.png", tmp_path / "profile"
    )
    assert image.size == (1200, 2600)
    # Lines and markers of the two series, in their own colours, drawn by the browser.
    threads, asyncio = colour_pixels(image, PALETTE[0]), colour_pixels(image, PALETTE[1])
    assert threads > 300, f"only {threads} pixels of the threads series' colour"
    assert asyncio > 30, f"only {asyncio} pixels of the asyncio series' colour"
