"""The bad-input corpus (tests/helpers/bad_input.py) against the real apiserver: every case a
cluster can judge is refused by `kubectl apply --dry-run=server`, naming the field `cxlab plan`
names. Nothing is created (a server dry run stops before storage).

Most cases are one experiment named like the base manifest: those go to the apiserver in one
`kubectl apply` of many documents, each renamed apart (kubectl applies every document and
prints one error per refused object, named), which takes seconds where a kubectl per case
took a minute and a half. The rest (names, whole files, YAML pathologies) run one kubectl
each, four at a time."""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml
from helpers.bad_input import CASES, BadInput, names_the_field
from helpers.cluster import BUILT_KUBECTL, KUBECONFIG
from helpers.rule_cases import NAME

from cxlab.experiments.spec import KIND

CLUSTER_CASES = [case for case in CASES if case.cluster]


def dry_run_apply(case: BadInput, namespace: str) -> subprocess.CompletedProcess[bytes]:
    text = case.text if isinstance(case.text, bytes) else case.text.encode()
    return subprocess.run(
        [str(BUILT_KUBECTL), "apply", "--dry-run=server", "--namespace", namespace, "-f", "-"],
        input=text, capture_output=True, timeout=60,
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
    )  # fmt: skip


def batchable(case: BadInput) -> dict[str, Any] | None:
    """The case's one experiment, if it is one named as the base manifest (its name is not
    what it is about)."""
    if isinstance(case.text, bytes):
        return None
    try:
        documents = list(yaml.safe_load_all(case.text))
    except yaml.YAMLError:
        return None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        return None
    document = documents[0]
    metadata = document.get("metadata")
    if (
        document.get("kind") != KIND
        or not isinstance(metadata, dict)
        or metadata.get("name") != NAME
    ):
        return None
    return document


def dry_run_together(
    cases: list[tuple[BadInput, dict[str, Any]]], namespace: str
) -> dict[str, subprocess.CompletedProcess[bytes]]:
    """One `kubectl apply --dry-run=server` of every case's experiment, each named case-N: its
    verdict is its own line of the output (refused: stderr, status 1; accepted: stdout).
    A refusal that names no object (a document the apiserver cannot decode) has no verdict
    here: that case runs alone."""
    named = [{**doc, "metadata": {**doc["metadata"], "name": f"case-{i}"}} for i, (_, doc) in
             enumerate(cases)]  # fmt: skip
    text = yaml.safe_dump_all(named, sort_keys=False, width=1000).encode()
    applied = subprocess.run(
        [str(BUILT_KUBECTL), "apply", "--dry-run=server", "--namespace", namespace, "-f", "-"],
        input=text, capture_output=True, timeout=300,
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
    )  # fmt: skip

    def by_case(output: bytes, pattern: str) -> dict[str, str]:
        lines = output.decode(errors="replace").splitlines()
        return {m.group(1): line for line in lines if (m := re.search(pattern, line))}

    refused = by_case(applied.stderr, r'"(case-\d+)" is invalid')
    accepted = by_case(applied.stdout, r"/(case-\d+) created")
    verdicts = {}
    for i, (case, _) in enumerate(cases):
        if line := refused.get(f"case-{i}"):
            verdicts[case.id] = subprocess.CompletedProcess(applied.args, 1, b"", line.encode())
        elif line := accepted.get(f"case-{i}"):
            verdicts[case.id] = subprocess.CompletedProcess(applied.args, 0, line.encode(), b"")
    return verdicts


@pytest.fixture(scope="module")
def verdicts(dry_run_namespace: str) -> dict[str, subprocess.CompletedProcess[bytes]]:
    together = [(case, doc) for case in CLUSTER_CASES if (doc := batchable(case)) is not None]
    found = dry_run_together(together, dry_run_namespace)
    alone = [case for case in CLUSTER_CASES if case.id not in found]
    with ThreadPoolExecutor(4) as pool:
        done = pool.map(lambda case: dry_run_apply(case, dry_run_namespace), alone)
        found.update({case.id: result for case, result in zip(alone, done, strict=True)})
    return found


@pytest.mark.parametrize("case", CLUSTER_CASES, ids=lambda c: c.id)
def test_the_apiserver_refuses_it_naming_the_field(
    case: BadInput, verdicts: dict[str, subprocess.CompletedProcess[bytes]]
) -> None:
    applied = verdicts[case.id]
    said = applied.stderr.decode(errors="replace")
    assert applied.returncode != 0, f"accepted:\n{applied.stdout.decode()}"
    field = case.cluster_field or case.field
    assert field is not None
    assert names_the_field(said, field), f"{field} not named:\n{said}"
