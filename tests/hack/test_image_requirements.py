"""The images' Python packages have one source: the lists under [tool.cxlab.images] in
pyproject.toml at the pins of [project] dependencies, printed by hack/image-requirements.py.
hack/images.sh (the local builder) and the Containerfiles must all install from it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "image-requirements.py"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
IMAGES = PYPROJECT["tool"]["cxlab"]["images"]
CONTAINERFILES = {
    "operator": ROOT / "operator/Containerfile",
    "runner": ROOT / "workloads/Containerfile",
}


def requirements(image: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), image], check=True, capture_output=True, text=True
    ).stdout
    return out.split()


def package_names() -> set[str]:
    return {name.lower() for names in IMAGES.values() for name in names}


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_requirements_are_the_pins_of_pyproject(image: str) -> None:
    pins = set(PYPROJECT["project"]["dependencies"])
    printed = requirements(image)
    assert len(printed) == len(IMAGES[image])
    assert set(printed) <= pins
    assert all("==" in line for line in printed)


def test_an_unknown_image_is_refused() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "nope"], capture_output=True, text=True)
    assert run.returncode != 0 and "no image 'nope'" in run.stderr


@pytest.mark.parametrize("image", sorted(CONTAINERFILES))
def test_containerfile_installs_from_the_one_list(image: str) -> None:
    text = CONTAINERFILES[image].read_text()
    assert f"image-requirements.py {image} " in text
    assert "pip install" in text and "-r /src/requirements.txt" in text
    assert "COPY pyproject.toml hack/image-requirements.py" in text
    run_lines = " ".join(line for line in text.splitlines() if not line.startswith("#"))
    assert not re.search(r"[\w.-]+==[0-9]", run_lines), "versions belong to pyproject.toml"
    for name in package_names():
        assert not re.search(rf"\b{re.escape(name)}\b", run_lines.lower()), (
            f"{CONTAINERFILES[image].name} names the package {name}: it belongs to pyproject.toml"
        )


def test_images_sh_installs_from_the_one_list() -> None:
    text = (ROOT / "hack" / "images.sh").read_text()
    assert "hack/image-requirements.py" in text
    assert "read_pins runner" in text and "read_pins operator" in text
    code = " ".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"[\w.-]+==[0-9]", code), "versions belong to pyproject.toml"
    for name in package_names():
        assert not re.search(rf"\b{re.escape(name)}\b", code.lower()), (
            f"hack/images.sh names the package {name}: it belongs to pyproject.toml"
        )


def _third_party_imports(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return (
        found
        - set(sys.stdlib_module_names)
        - {"cxlab", "cxlab_runner", "cxlab_contract", "__future__"}
    )


def test_operator_image_has_what_the_operator_imports() -> None:
    # import name -> distribution; the runner's gevent and locust load only in their models
    # (pydantic_core comes with pydantic; urllib3 with kubernetes, whose connection pool the
    # operator's client uses)
    distributions = {"yaml": "pyyaml", "prometheus_client": "prometheus-client"}
    distributions["pydantic_core"] = "pydantic"
    distributions["urllib3"] = "kubernetes"
    needed = {
        distributions.get(name, name) for name in _third_party_imports(ROOT / "operator/cxlab")
    }
    assert needed <= {name.lower() for name in IMAGES["operator"]}
