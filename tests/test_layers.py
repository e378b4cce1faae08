"""Who may import whom. The runner contract (cxlab_contract) is the shared kernel: the runner
and the operator both depend on it, it depends on neither, and neither depends on the other
(the operator image carries no runner). Inside the operator, the experiment and schedule
kinds and the analysis are pure: Kubernetes I/O, kopf and the operator's shell
(cxlab.controller) stay out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "cxlab_contract": ROOT / "workloads/python/cxlab_contract",
    "cxlab_runner": ROOT / "workloads/python/cxlab_runner",
    "cxlab": ROOT / "operator/cxlab",
    "workloads/bench": ROOT / "workloads/bench",  # the runners' benchmarks: no operator either
}


def imports(folder: Path) -> dict[str, set[str]]:
    """Every module under the folder (path relative to it) → the top names it imports, and
    the dotted modules (both), at any depth of its code, lazy imports included."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
        found[str(path.relative_to(folder))] = names
    return found


def offenders(folder: Path, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{module} imports {name}"
        for module, names in imports(folder).items()
        for name in sorted(names)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("cxlab_contract", ("cxlab", "cxlab_runner")),
        ("cxlab_runner", ("cxlab",)),
        ("cxlab", ("cxlab_runner",)),
        ("workloads/bench", ("cxlab",)),
    ],
)
def test_the_contract_is_the_only_shared_code(package: str, forbidden: tuple[str, ...]) -> None:
    assert offenders(PACKAGES[package], forbidden) == []


# The kinds decide and build, the analysis reckons; talking to Kubernetes, Prometheus or a
# runner is the shell's.
# urllib.parse only parses text (a target's URL): the rest of urllib does I/O.
SHELL = ("cxlab.controller", "cxlab.local", "kopf", "kubernetes", "prometheus_client",
         "urllib.request", "urllib.error", "urllib.response", "http", "socket",
         "subprocess")  # fmt: skip


@pytest.mark.parametrize("kind", ["experiments", "analysis", "schedules"])
def test_the_kinds_are_pure(kind: str) -> None:
    assert offenders(PACKAGES["cxlab"] / kind, SHELL) == []


def test_the_check_sees_an_import_it_forbids(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    from cxlab_runner.x import y\n")
    assert offenders(tmp_path, ("cxlab_runner",)) == ["a.py imports cxlab_runner.x"]
