"""Every CEL rule of both CRDs on the real apiserver: each case of tests/helpers/rule_cases.py
applied with `kubectl apply --dry-run=server`. The valid manifest is accepted; the invalid one is
rejected with exactly one error, naming the field `cxlab plan` names (tests/test_crd_rules.py) and
carrying the rule's message. Nothing is created: a server dry run stops before storage."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from helpers.cluster import BUILT_KUBECTL, KUBECONFIG
from helpers.rule_cases import CASES, Case, apiserver_problem


def dry_run_apply(document: dict[str, Any], namespace: str) -> subprocess.CompletedProcess[str]:
    kubectl = str(BUILT_KUBECTL) if BUILT_KUBECTL.exists() else shutil.which("kubectl")
    assert kubectl, "no kubectl: run `make cluster-bin`"
    return subprocess.run(
        [kubectl, "apply", "--dry-run=server", "--namespace", namespace, "-f", "-"],
        input=yaml.safe_dump(document),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
    )


# A rule cxlab alone checks (no CEL) has nothing for the apiserver to refuse.
ON_THE_APISERVER = [case for case in CASES if not case.local_only]


@pytest.mark.parametrize("case", ON_THE_APISERVER, ids=lambda c: c.id)
def test_the_apiserver_accepts_the_valid_manifest(case: Case, dry_run_namespace: str) -> None:
    applied = dry_run_apply(case.valid, dry_run_namespace)
    assert applied.returncode == 0, applied.stderr
    assert "(server dry run)" in applied.stdout


@pytest.mark.parametrize("case", ON_THE_APISERVER, ids=lambda c: c.id)
def test_the_apiserver_rejects_the_invalid_manifest_naming_the_field(
    case: Case, dry_run_namespace: str
) -> None:
    applied = dry_run_apply(case.invalid, dry_run_namespace)
    assert applied.returncode != 0, f"accepted: the rule is never enforced\n{applied.stdout}"
    assert apiserver_problem(applied.stderr) == (case.apiserver_field, case.message), applied.stderr
