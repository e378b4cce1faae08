"""`cxlab operator`: the Kubernetes operator (kopf), its handlers handed one start-up object
(cxlab.controller.start) in kopf's memo; with --leader-elect, only while it holds the Lease."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from cxlab.cli.cluster import connect
from cxlab.cli.settings import Settings

if TYPE_CHECKING:
    from cxlab.controller.leader import LeaderElection
    from cxlab.controller.metrics import OperatorMetrics


def operator_command(args: argparse.Namespace, settings: Settings) -> int:
    import kopf

    import cxlab.controller.handlers  # noqa: F401  (registers the handlers with kopf)
    from cxlab.controller.metrics import OperatorMetrics
    from cxlab.controller.start import MEMO_KEY, OperatorStart

    kopf.configure(verbose=args.verbose)  # kopf's log format, as `kopf run` sets it up
    if not args.verbose:  # "Handler 'experiment_changed' succeeded", for every event: noise
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    connect(settings, "operator")
    metrics = OperatorMetrics()
    start = OperatorStart(
        config=replace(settings.config, operator_metrics_port=args.metrics_port),
        metrics=metrics,
        namespaces=tuple(args.namespace or ()),
    )
    if args.metrics_port:  # a standby's too: Prometheus sees both replicas, and which leads
        metrics.serve(args.metrics_port)
    election = _lead(args, settings, metrics) if args.leader_elect else None
    if election is None:
        metrics.leader.set(1)
    try:
        kopf.run(
            # Replicas take turns through the Lease (--leader-elect), not kopf's peering,
            # which pauses every replica of the same priority when it sees another.
            standalone=True,
            clusterwide=not args.namespace,
            namespaces=args.namespace or (),
            liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz"
            if args.health_port
            else None,
            memo=kopf.Memo({MEMO_KEY: start}),
        )
    finally:
        if election is not None:
            election.release()  # a clean stop hands over at once
    return 0


def _lead(args: argparse.Namespace, settings: Settings, metrics: OperatorMetrics) -> LeaderElection:
    """Stand by (alive on the health port) until this replica holds the Lease, then keep it."""
    from cxlab.controller.leader import LeaderElection, LeaseTimes, StandbyHealth, identity

    namespace = args.lease_namespace or settings.pod_namespace or "default"
    times = LeaseTimes(duration=args.lease_duration, renew_deadline=args.lease_duration * 2 / 3)
    election = LeaderElection(namespace, args.lease_name, identity(), times)
    standing_by = StandbyHealth(args.health_port)  # alive while it waits
    try:
        election.acquire(threading.Event())
    finally:
        standing_by.close()
    metrics.leader.set(1)
    election.keep(lost=_lease_lost, stop=threading.Event())
    return election


def _lease_lost() -> None:
    """Another replica may take over now: stop acting at once, mid-pass or not (every pass
    is safe to cut short); the restarted process stands by."""
    print("cxlab operator: lost the leader Lease; exiting", file=sys.stderr, flush=True)
    os._exit(1)
