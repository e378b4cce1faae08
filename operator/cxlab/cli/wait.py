"""`cxlab wait cx/NAME`: wait for an applied experiment to finish, then exit as `cxlab run`
would have (a pipeline's gate, docs/objectives.md); 124 when --timeout passes first."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from cxlab.cli.cluster import connect
from cxlab.cli.exits import TIMED_OUT, exit_status, usage
from cxlab.cli.settings import Settings
from cxlab.cli.sources import read_document
from cxlab.conditions import condition_of
from cxlab.experiments.status import ExperimentStatus
from cxlab.table import render_summary
from cxlab_contract.durations import format_duration

# How often `cxlab wait` reads the experiment: a status written by a pass is seen within it.
WAIT_POLL_SECONDS = 2.0


def wait_command(args: argparse.Namespace, settings: Settings) -> int:
    """Wait for an applied experiment to finish, then exit as `cxlab run` would have."""
    if not args.source.startswith("cx/"):
        raise usage(args.source, "name an applied experiment: cx/NAME")
    from kubernetes.client.exceptions import ApiException

    stored = _finished(settings, args.source, args.namespace, args.timeout)
    if stored is None:
        return TIMED_OUT
    status = ExperimentStatus.read(stored["status"])
    refused = condition_of(status.conditions, "Failed")
    if refused is not None and refused.reason == "InvalidSpec":
        raise usage(args.source, refused.message or "the operator refused its spec")
    try:  # the whole summary: its points are in ConfigMaps
        document = read_document(settings, args.source, args.namespace)
    except ApiException as error:
        if error.status not in (401, 403):
            raise
        print(
            f"cxlab: {args.source}: may not list its ConfigMaps ({error.status}), so no points: "
            f"the verdict alone",
            file=sys.stderr,
        )
        document = stored
    print(render_summary(document))
    return exit_status(status)


def _finished(
    settings: Settings, source: str, namespace: str, timeout: float
) -> dict[str, Any] | None:
    """The experiment as stored once it has finished; None if it has not within `timeout`.
    A passing apiserver error is tried again; no such experiment, or no right to read it,
    ends the wait at once (exit 2)."""
    from kubernetes.client.exceptions import ApiException

    from cxlab.controller.kube import Kube

    name = source.removeprefix("cx/")
    connect(settings, source)
    kube, deadline = Kube(), time.monotonic() + timeout
    while True:
        try:
            document = kube.get_experiment(namespace, name)
        except ApiException as error:
            if error.status in (401, 403):
                raise usage(source, f"may not read it: {error.status} {error.reason}") from None
            print(f"cxlab: {source}: {error.status} {error.reason}; trying again", file=sys.stderr)
            document = {}
        if document is None:
            raise usage(source, f"no ConcurrencyExperiment {name} in namespace {namespace}")
        status = ExperimentStatus.read((document or {}).get("status"))
        if document and status.finished:
            return document
        left = deadline - time.monotonic()
        if left <= 0:
            shown = status.progress.display if status.progress else ""
            print(
                f"cxlab: {source}: not finished after {format_duration(timeout)} "
                f"({status.phase or 'Pending'}, {shown})",
                file=sys.stderr,
            )
            return None
        time.sleep(min(WAIT_POLL_SECONDS, left))  # the last look at the deadline, not after
