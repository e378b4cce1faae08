"""The experiment documents the commands read: a result.json, `-` for stdin (kubectl get cx
NAME -o json), or cx/NAME from the cluster; each checked before anything is shown, a problem
told as `cxlab: LABEL: ...` and exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cxlab.cli.cluster import connect
from cxlab.cli.exits import usage
from cxlab.cli.settings import Settings
from cxlab.experiments.fields import SpecError
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.status import ExperimentStatus
from cxlab.inputs import InputError, load_json_document


def read_document(
    settings: Settings, source: str, namespace: str, label: str | None = None
) -> dict[str, Any]:
    """A ConcurrencyExperiment with a status, from SOURCE (the label names it unless given)."""
    label = label or source
    if source.startswith("cx/"):
        document = _from_cluster(settings, source.removeprefix("cx/"), namespace, label)
    else:
        try:
            document = load_json_document(None if source == "-" else Path(source))
        except InputError as error:
            raise usage(label, str(error)) from None
    return checked_document(document, label)


def _from_cluster(settings: Settings, name: str, namespace: str, label: str) -> dict[str, Any]:
    from kubernetes.client.exceptions import ApiException

    from cxlab.controller.kube import read_experiment

    connect(settings, label)
    try:
        return read_experiment(namespace, name)
    except ApiException as error:
        if error.status != 404:
            raise
        problem = f"no ConcurrencyExperiment {name} in namespace {namespace}"
        raise usage(label, problem) from None


def checked_document(document: dict[str, Any], label: str) -> dict[str, Any]:
    """An experiment document with a status cxlab wrote, or exit 2 saying which field is not."""
    try:
        parse_experiment(document)
    except SpecError as error:
        raise usage(label, error.problems[0]) from None
    if not document.get("status"):
        raise usage(label, "has no status yet: the experiment has not started")
    try:
        ExperimentStatus.read(document["status"])
    except ValidationError as error:
        raise usage(label, first_problem(error, "status", "a status")) from None
    return document


def first_problem(error: ValidationError, prefix: str, what: str) -> str:
    """e.g. "status.phase: Input should be ... (not a status cxlab wrote)"."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in (prefix, *first["loc"]) if part != "")
    return f"{where}: {first['msg']} (not {what} cxlab wrote)"
