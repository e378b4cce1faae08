"""An installed (non-editable) package finds its data files (the Result schema) without the
repository around it, as in the operator image."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

SOURCES = ["pyproject.toml", "operator/cxlab", "workloads/python/cxlab_runner",
           "workloads/python/cxlab_contract"]  # fmt: skip


def test_an_installed_package_validates_results_without_the_repository(tmp_path: Path) -> None:
    # Built from a copy, so that setuptools' build folders stay out of the checkout's build/.
    source = tmp_path / "source"
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        copy(ROOT / name, source / name)
    site = tmp_path / "site"
    # uv (the virtualenv's, make deps) builds with the same backend as pip, in a third of the time
    uv = Path(sys.executable).with_name("uv")
    subprocess.run(
        [str(uv), "pip", "install", "--quiet", "--no-deps", "--python", sys.executable,
         "--target", str(site), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    shutil.rmtree(source)  # nothing may be read from the sources any more
    # Every module of the packages from the installed copy: a subpackage left out of the
    # package would otherwise be found in the checkout (the editable install's finder).
    probe = (
        "import cxlab.crd, cxlab.cli, cxlab.controller.experiment_pass; "
        "from cxlab.analysis import outcome; "
        "mine = [m.__file__ for n, m in sys.modules.items() if n.split('.')[0] in "
        "('cxlab', 'cxlab_runner', 'cxlab_contract')]; "
        "assert all(f.startswith(sys.argv[1]) for f in mine), mine; "
        "outcome._validator(); cxlab.crd.status_schema(); print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; {probe}", str(site)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.stdout.strip() == "ok", done.stderr
