"""`cxlab run FILE [--out DIR] [--history DIR]`: the experiments of a file run on this
machine (cxlab.local), each one's summary printed, exiting with the gravest status."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from cxlab.cli.exits import GRAVITY, USAGE_ERROR, exit_status
from cxlab.cli.settings import Settings
from cxlab.cli.specs import experiments_of
from cxlab.experiments.status import ExperimentStatus
from cxlab.local.backend import LocalBackend
from cxlab.local.cores import DoesNotFit
from cxlab.local.history_folder import save_run
from cxlab.local.progress import Progress
from cxlab.table import render_summary
from cxlab_contract.durations import parse_duration


def _exit(signum: int, _: FrameType | None) -> None:
    """SIGTERM or SIGHUP ends cxlab run as Ctrl-C does: through its cleanups, so no runner or
    service process it started outlives it."""
    raise SystemExit(128 + signum)


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit)
    experiments = experiments_of(args.file)
    if args.out and len(experiments) > 1:
        print(
            f"cxlab: {args.file}: --out names one folder but the file holds "
            f"{len(experiments)} experiments; leave it out",
            file=sys.stderr,
        )
        return USAGE_ERROR
    try:
        backends = [
            LocalBackend(
                experiment,
                args.out or settings.results / experiment.name,
                Progress(experiment.spec.trial_count()),
                args.trial_timeout or parse_duration(experiment.spec.trial_timeout),
                allow_remote_target=args.allow_remote_target,
            )
            for experiment in experiments
        ]
    except DoesNotFit as error:
        print(f"cxlab: {args.file}: spec.{error}", file=sys.stderr)
        return USAGE_ERROR
    except FileNotFoundError as error:
        print(f"cxlab: {args.file}: {error}", file=sys.stderr)
        return USAGE_ERROR
    statuses = []
    for backend in backends:
        backend.progress.note(f"{backend.experiment.name}: {len(backend.trials)} trials")
        document = backend.run()
        print(render_summary(document))
        print(f"\nresults: {backend.result_path}\nreport:  {backend.out_dir / 'report.html'}\n")
        if args.history:
            print(f"history: {save_run(document, args.history)} (cxlab history {args.history})\n")
        statuses.append(exit_status(ExperimentStatus.read(document["status"])))
    return max(statuses, key=GRAVITY.index)
