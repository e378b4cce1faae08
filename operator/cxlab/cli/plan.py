"""`cxlab plan FILE`: each experiment's trials and floor-time estimate, nothing run; `cxlab
plan --capacity SOURCE`: a measured experiment's capacity plan, its choice as a Deployment
fragment."""

from __future__ import annotations

import argparse

from cxlab.cli.exits import usage
from cxlab.cli.plan_text import plan_text
from cxlab.cli.settings import Settings
from cxlab.cli.sources import read_document
from cxlab.cli.specs import experiments_of
from cxlab.experiments.status import ExperimentStatus
from cxlab.local.cores import DoesNotFit, check_fits
from cxlab.table import capacity_text


def plan_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.capacity is not None:
        return capacity_command(args, settings)
    if args.file is None:
        raise usage("cxlab plan", "give an experiment FILE, or --capacity SOURCE")
    experiments = experiments_of(args.file)
    for experiment in experiments:  # the trials' cores, as `cxlab run` would pin them
        try:
            check_fits(experiment.spec.resources)
        except DoesNotFit as error:
            raise usage(str(args.file), f"spec.{error}") from None
    for experiment in experiments:
        print(plan_text(experiment))
    return 0


def capacity_command(args: argparse.Namespace, settings: Settings) -> int:
    """A measured experiment's capacity plan, and its choice as a Deployment fragment."""
    document = read_document(settings, args.capacity, args.namespace)
    plan = ExperimentStatus.read(document["status"]).capacity_plan
    print(capacity_text(plan))
    if plan is not None and plan.manifest:
        print(f"\n{plan.manifest}", end="")
    return 0
