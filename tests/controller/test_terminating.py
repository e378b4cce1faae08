"""Which experiments the sweep of terminating namespaces releases (pure parts of
cxlab.controller.terminating; tests/cluster/test_cluster_terminating.py runs the whole)."""

from __future__ import annotations

from typing import Any

from cxlab.controller.kube import _items
from cxlab.controller.terminating import held, matches, terminating

FINALIZER = "cxlab.dev/finalizer"


def namespace(name: str, deleting: bool) -> dict[str, Any]:
    stamp = {"deletionTimestamp": "2026-11-25T10:00:00Z"} if deleting else {}
    return {"metadata": {"name": name, **stamp}}


def test_patterns_are_read_as_kopf_reads_them() -> None:
    assert matches("cxlab-test-ab12", ["cxlab-test-*"])
    assert not matches("kube-system", ["cxlab-test-*"])
    # kopf's own examples (match_namespace's docstring): within one pattern the first glob
    # includes, "!" excludes, a later glob re-includes only what the first one matched
    pattern = ["myapp-*, !*-pr-*, *pr-123"]
    assert matches("myapp-test", pattern) and matches("myapp-pr-123", pattern)
    assert not matches("myapp-pr-456", pattern) and not matches("otherapp-pr-123", pattern)
    assert matches("otherapp-pr-123", ["!*-pr-*, *pr-123"])
    # several --namespace patterns: served if any one matches
    assert matches("team-b", ["team-*", "!team-b"]) and matches("team-a", ["x", "team-*"])


def test_only_our_terminating_namespaces_are_swept() -> None:
    found = [namespace("cxlab-test-1", True), namespace("cxlab-test-2", False),
             namespace("other", True)]  # fmt: skip
    assert terminating(found, ["cxlab-test-*"]) == ["cxlab-test-1"]


def test_only_deleted_experiments_holding_our_finalizer_are_released() -> None:
    def experiment(name: str, deleting: bool, finalizers: list[str]) -> dict[str, Any]:
        return {"metadata": namespace(name, deleting)["metadata"] | {"finalizers": finalizers}}

    found = [
        experiment("held", True, [FINALIZER]),
        experiment("running", False, [FINALIZER]),
        experiment("someone-elses", True, ["example.com/keep"]),
    ]
    assert held(found, FINALIZER) == ["held"]


def test_an_empty_metadata_list_is_no_experiments() -> None:
    """The apiserver answers an empty PartialObjectMetadataList with "items": null."""
    assert _items({"kind": "PartialObjectMetadataList", "items": None}) == []
    assert _items({"items": [{"metadata": {"name": "a"}}]}) == [{"metadata": {"name": "a"}}]
