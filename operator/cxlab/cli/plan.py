"""`cxlab plan FILE`: each experiment's trials and floor-time estimate, each schedule's next
firings and its runs' trials, nothing run; `cxlab plan --capacity SOURCE`: a measured
experiment's capacity plan, its choice as a Deployment fragment (of a service: its replicas,
a patch of its Deployment and a HorizontalPodAutoscaler)."""

from __future__ import annotations

import argparse

from cxlab.cli.exits import usage
from cxlab.cli.plan_schedule import schedule_text
from cxlab.cli.plan_text import plan_text
from cxlab.cli.settings import Settings
from cxlab.cli.sources import read_document
from cxlab.cli.specs import Resource, resources_of
from cxlab.experiments.resource import ConcurrencyExperiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ExperimentStatus
from cxlab.local.cores import DoesNotFit, check_fits
from cxlab.table import capacity_text, service_plan_text


def plan_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.capacity is not None:
        return capacity_command(args, settings)
    if args.file is None:
        raise usage("cxlab plan", "give an experiment FILE, or --capacity SOURCE")
    resources = resources_of(args.file)
    for resource in resources:  # the trials' cores, as `cxlab run` would pin them
        where, spec = _trials_spec(resource)
        try:
            check_fits(spec.resources)
        except DoesNotFit as error:
            raise usage(str(args.file), f"{where}.{error}") from None
    now = settings.clock()
    for resource in resources:
        if isinstance(resource, ConcurrencyExperiment):
            print(plan_text(resource))
        else:
            print(schedule_text(resource, now))
    return 0


def _trials_spec(resource: Resource) -> tuple[str, ExperimentSpec]:
    """The spec whose trials run, and where it is in the file."""
    if isinstance(resource, ConcurrencyExperiment):
        return "spec", resource.spec
    return "spec.experimentTemplate.spec", resource.spec.experiment_template.spec


def capacity_command(args: argparse.Namespace, settings: Settings) -> int:
    """A measured experiment's capacity plan, and its choice as a Deployment fragment."""
    document = read_document(settings, args.capacity, args.namespace)
    status = ExperimentStatus.read(document["status"])
    if status.service_plan is not None:
        served = status.service_plan
        print(service_plan_text(served))
        for title, manifest in (
            ("a strategic merge patch of your Deployment (kubectl patch --type strategic)",
             served.deployment_patch),
            ("its HorizontalPodAutoscaler (kubectl apply -f)", served.autoscaler),
        ):  # fmt: skip
            if manifest:
                print(f"\n# {title}\n{manifest}", end="")
        return 0
    plan = status.capacity_plan
    print(capacity_text(plan))
    if plan is not None and plan.manifest:
        print(f"\n{plan.manifest}", end="")
    return 0
