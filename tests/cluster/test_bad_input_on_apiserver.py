"""The bad-input corpus (tests/bad_input.py) against the real apiserver: every case a cluster
can judge is refused by `kubectl apply --dry-run=server`, naming the field `cxlab plan` names.
Nothing is created (a server dry run stops before storage). The cases run four at a time."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from bad_input import CASES, BadInput, names_the_field
from harness import KUBECONFIG
from test_crd_rules_on_apiserver import BUILT_KUBECTL

CLUSTER_CASES = [case for case in CASES if case.cluster]


def dry_run_apply(case: BadInput, namespace: str) -> subprocess.CompletedProcess[bytes]:
    text = case.text if isinstance(case.text, bytes) else case.text.encode()
    return subprocess.run(
        [str(BUILT_KUBECTL), "apply", "--dry-run=server", "--namespace", namespace, "-f", "-"],
        input=text, capture_output=True, timeout=60,
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
    )  # fmt: skip


@pytest.fixture(scope="module")
def verdicts(dry_run_namespace: str) -> dict[str, subprocess.CompletedProcess[bytes]]:
    with ThreadPoolExecutor(4) as pool:
        done = pool.map(lambda case: dry_run_apply(case, dry_run_namespace), CLUSTER_CASES)
        return {case.id: result for case, result in zip(CLUSTER_CASES, done, strict=True)}


@pytest.mark.parametrize("case", CLUSTER_CASES, ids=lambda c: c.id)
def test_the_apiserver_refuses_it_naming_the_field(
    case: BadInput, verdicts: dict[str, subprocess.CompletedProcess[bytes]]
) -> None:
    applied = verdicts[case.id]
    said = applied.stderr.decode(errors="replace")
    assert applied.returncode != 0, f"accepted:\n{applied.stdout.decode()}"
    assert case.field is not None
    assert names_the_field(said, case.field), f"{case.field} not named:\n{said}"
