"""Measured points → Pods and cores for a target load (status.capacityPlan): per model the plan
cxlab.analysis.sizing makes, the cheapest model that meets the latency objective, the plan's
verification (cxlab.analysis.verification) folded in, and the choice as a Deployment fragment.
Pure: the operator and the local backend plan alike. docs/capacity-plan.md explains it with a
worked example.

The choice: of the models that meet the objective, the fewest cores, then the least memory,
then the spec's order."""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from cxlab.analysis.capacity_plan import CapacityPlan, ModelPlan, PlanTarget
from cxlab.analysis.labels import rate_text
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.rate_search import bounds
from cxlab.analysis.sizing import Planner, at_rtt, plan_rtt, variants
from cxlab.analysis.summary import PointRuns, group_points
from cxlab.analysis.verification import fold_verdict, probe_of, verification_of
from cxlab.experiments.spec import ExperimentSpec
from cxlab_contract.durations import format_duration
from cxlab_contract.figures import significant

# The multiplication sign of "12 Pods x 1 CPU", escaped: ruff takes it written out for an x.
TIMES = "\u00d7"


def capacity_plan(
    spec: ExperimentSpec, outcomes: Sequence[TrialOutcome], unverified: str | None = None
) -> CapacityPlan | None:
    """status.capacityPlan; None when the spec asks for no capacity plan, or one of its
    service (cxlab.analysis.service_plan). The sweep's
    outcomes plan; a verification's (trial.verify) say whether the plan held, and the plan
    shown is the last one run. `unverified`: why the plan was not run, when it was asked to
    be."""
    if spec.capacity is None or spec.service is not None:  # a service's: service_plan
        return None
    # the matrix and the rate search plan; calibrations measure the environment
    sweep = [o for o in outcomes if not (o.trial.verify or o.trial.calibrate)]
    checks = sorted((o for o in outcomes if o.trial.verify), key=lambda o: o.trial.verify)
    plan = _plan(spec, sweep)
    if plan.choice is None:
        return plan
    if not checks:
        if unverified:
            plan.message += f"; not verified: {unverified}"
            plan.unverified = unverified
        return plan
    verification = [verification_of(spec, o) for o in checks]
    last = verification[-1]
    tried = f" after {len(checks)} attempts" if len(checks) > 1 else ""
    verify = spec.capacity.verify
    if verify and (verify.pods or verify.workers_per_pod):
        # A sizing of the user's was run, not the plan: the plan stands as made.
        plan.verification = verification
        verdict = (
            f"held{tried}: {last.summary}" if last.holds else f"fell short{tried}: {last.shortfall}"
        )
        plan.message += f"; the sizing spec.capacity.verify gives {verdict}"
        return plan
    # The plan as last run: the first choice with the Pods of the last attempt.
    plan = _plan(spec, sweep, forced=(plan.choice, checks[-1].trial.pods))
    plan.verification = verification
    fold_verdict(plan, verification, unverified)
    for model in plan.models:
        if model.variant == plan.choice:
            model.basis = plan.basis
    return plan


def first_choice(spec: ExperimentSpec, sweep: Sequence[TrialOutcome]) -> ModelPlan | None:
    """The plan a verification runs first: the chosen model's, from the sweep alone."""
    plan = _plan(spec, sweep)
    return next((m for m in plan.models if m.variant == plan.choice), None)


def attempt_plan(
    spec: ExperimentSpec, sweep: Sequence[TrialOutcome], attempt: int
) -> ModelPlan | None:
    """The plan the verification's attempt runs: the first choice with attempt - 1 more Pods
    (each re-sized for its share of the rate); None when there is no choice."""
    first = first_choice(spec, sweep)
    if first is None or first.pods is None:
        return None
    plan = _plan(spec, sweep, forced=(first.variant, first.pods + attempt - 1))
    return next((m for m in plan.models if m.variant == plan.choice), None)


def _searched_or_all(
    spec: ExperimentSpec, groups: list[PointRuns], sweep: Sequence[TrialOutcome], variant: str
) -> list[PointRuns]:
    """A model's rate search's point at its searched rate (the interval's lower end: every
    probe of it held), the rate its plan rests on, when it has one with a Result; else its
    search's points with a Result (the rates it probed as arrivals, not a closed burst's
    throughput); else all its points."""
    probes = [o for o in sweep if o.trial.probe and o.trial.variant == variant]
    low = bounds((p.rate_per_second, p.holds) for p in (probe_of(spec, o) for o in probes)).low
    searched = [g for g in groups if g.trial.probe and g.results]
    held = [g for g in searched if g.trial.rate_per_second == low]
    return held or searched or groups


def _plan(
    spec: ExperimentSpec, sweep: Sequence[TrialOutcome], forced: tuple[str, int] | None = None
) -> CapacityPlan:
    """The plan from the sweep; `forced`: this variant is the choice, with at least these
    Pods (a verification's later attempt)."""
    assert spec.capacity is not None
    target = spec.capacity.target
    planner = Planner(spec, target)
    rtt = plan_rtt(spec)
    models = _model_plans(spec, sweep, planner, rtt, forced)
    plan = CapacityPlan(
        target=PlanTarget(
            rate_per_second=round(target.rate_per_second, 3),
            percentile=target.latency.percentile,
            latency_seconds=significant(planner.objective),
            cpu_utilization=round(target.cpu_utilization, 3),
            max_wait_probability=round(target.max_wait_probability, 4),
        ),
        rtt_seconds=rtt, models=models, display="", message="",
    )  # fmt: skip
    meeting = [(index, m) for index, m in enumerate(models) if m.meets]
    if forced:
        meeting = [(index, m) for index, m in meeting if m.variant == forced[0]]
    if not meeting:
        plan.display = f"no model meets {planner.objective_text}"
        reasons = "; ".join(f"{m.variant}: {m.reason}" for m in models)
        rate = rate_text(planner.rate_per_second)
        plan.message = f"{plan.display} for {rate} tasks/s{_where(rtt)}: {reasons}"
        return plan
    _, choice = min(meeting, key=lambda im: (im[1].cores or 0, im[1].memory_bytes or 0, im[0]))
    return _chosen(spec, plan, planner, choice)


def _where(rtt: float | None) -> str:
    return f" at RTT {format_duration(rtt)}" if rtt is not None else ""


def _model_plans(
    spec: ExperimentSpec, sweep: Sequence[TrialOutcome], planner: Planner, rtt: float | None,
    forced: tuple[str, int] | None,
) -> list[ModelPlan]:  # fmt: skip
    """Every model's plan in the spec's order, with its rate search's probes."""
    groups = [g for g in group_points(sweep, spec.pinning) if at_rtt(g.trial, rtt)]
    models = [
        planner.model_plan(
            variant, model,
            _searched_or_all(spec, [g for g in groups if g.trial.variant == variant], sweep,
                             variant),
            _where(rtt), min_pods=forced[1] if forced and forced[0] == variant else 1,
        )
        for variant, model in variants(spec)
    ]  # fmt: skip
    for model_plan in models:
        probes = [o for o in sweep if o.trial.probe and o.trial.variant == model_plan.variant]
        if probes:
            found = [probe_of(spec, o) for o in sorted(probes, key=lambda o: o.trial.probe)]
            model_plan.search = found
            model_plan.searched_rate_per_second = bounds(
                (p.rate_per_second, p.holds) for p in found
            ).low
    return models


def _chosen(
    spec: ExperimentSpec, plan: CapacityPlan, planner: Planner, choice: ModelPlan
) -> CapacityPlan:
    """The plan with its choice: in short, in one line with what it rests on, as a manifest."""
    pods, cpu, variant = choice.pods or 0, planner.cores_per_pod, choice.variant
    shown = f"{pods} Pod{'s' if pods != 1 else ''} {TIMES} {cpu} CPU"
    workers = choice.workers_per_pod or 0
    rtt = plan.rtt_seconds
    rtt_text = f" (RTT {format_duration(rtt)})" if rtt is not None else ""
    message = (
        f"{variant}: {shown} ({workers} worker{'s' if workers != 1 else ''} per Pod) for "
        f"{rate_text(planner.rate_per_second)} tasks/s at {planner.objective_text}{rtt_text}, "
        f"expected {planner.percentile} "
        f"{format_duration(choice.expected_latency_seconds or 0.0)} with "
        f"{choice.expected_wait_probability or 0:.0%} of tasks waiting "
        f"{format_duration(choice.expected_mean_wait_seconds or 0.0)} on average at "
        f"{choice.expected_occupancy or 0:.0%} occupancy; "
        f"{choice.basis}: {choice.note}"
    )
    target = f"{rate_text(planner.rate_per_second)} tasks/s at {planner.objective_text}"
    return plan.model_copy(
        update={
            "choice": variant, "pods": pods, "cores": choice.cores,
            "memory_bytes": choice.memory_bytes, "basis": choice.basis,
            "display": f"{shown}, {variant}", "message": message,
            "manifest": _manifest(spec, choice, target),
        }
    )  # fmt: skip


def _manifest(spec: ExperimentSpec, choice: ModelPlan, target: str) -> str:
    """A Deployment fragment of the choice: the Pod as measured (requests = limits, the trial's
    Guaranteed QoS), so many of them, each with the planned workers."""
    pod_resources = {"cpu": str(spec.resources.cpu), "memory": spec.resources.memory}
    fragment = {
        "spec": {
            "replicas": choice.pods,
            "template": {"spec": {"containers": [{
                "name": "app",
                "resources": {"requests": pod_resources, "limits": dict(pod_resources)},
                "env": [{"name": "CONCURRENCY", "value": str(choice.workers_per_pod)}],
            }]}},
        }
    }  # fmt: skip
    head = (
        f"# cxlab capacity plan: {choice.variant}, {choice.pods} Pod"
        f"{'s' if choice.pods != 1 else ''} for {target}.\n"
        f"# Paste into your Deployment (rename the container); CONCURRENCY is the workers (or\n"
        f"# threads, or connections) each Pod should run: {choice.workers_per_pod}.\n"
    )
    return head + yaml.safe_dump(fragment, sort_keys=False)
