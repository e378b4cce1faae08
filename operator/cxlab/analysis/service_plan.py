"""The service's capacity plan (status.servicePlan): for spec.capacity.target beside
spec.service, per variant the replicas that carry the target rate within the objective, from
the capacities its rate searches measured at one or more replica counts; what they cost; the
cheapest variant; and the plan ready to apply, as a patch of the user's Deployment and an
autoscaling/v2 HorizontalPodAutoscaler. Pure: the operator and cxlab run plan alike.
docs/service.md#the-services-capacity-plan works an example by hand.

A variant's replica counts are its `variants.replicas` axis: `sync-4-r1` and `sync-4-r2` are
the variant `sync-4` at 1 and 2 replicas. Per replica count N, from its rate searches (the
highest searched rate over the client models, which only offer the load):

    X(N) = the searched rate of the copy of N replicas, tasks/s through its Service
    S    = the time a request held the service (the probes' serviceHistogram, at the lowest
           rate that held: the least queueing), T = E[S]
    c    = round(X(N) / N * T / g): the requests one replica serves at once, by Little's law
           at its searched rate (2 for two gunicorn sync workers); g = 1 + (L - T) / D is what
           a probe of D seconds at the search's objective L may hold over c / T while its
           backlog grows (1.05 at 250 ms over 4 s). Rounded up, S is stretched to a mean of
           c * g / X(N) * N, so that a replica of the model carries no more than it held
    CPU per request, the peak memory of one replica (the copy's over N)

Scaling is measured, not assumed: with two or more replica counts the Universal Scalability Law
(cxlab.analysis.scalability) is fitted to the X(N); with one, replicas are assumed to add
linearly, X(N) = N * X(1) (the note says so). Then the plan is the fewest replicas N, up to
the USL's peak, that

  - carry the rate together: λ <= X(N), the fleet's capacity at N (contention and coherency
    costs included: 4 replicas of 75/s with sigma 0.1 carry 231/s, not 300/s);
  - each keep the objective fed λ / N tasks/s at random (a Service spreads connections at
    random): an M/G/c queue of c workers (cxlab.analysis.queueing) with the service times
    measured at the largest replica count searched up to N, P(wait) <= maxWaitProbability
    and the objective's percentile of wait + service within it;
  - each keep their CPU at the target utilisation of the cores they request.

It is `extrapolated` when N is over twice the largest count measured, else `measured`.

Cost: cores = N * the cores a replica requests (the variant's resources.cpu, else the
Deployment's request), memory = N * its peak * (1 + MEMORY_MARGIN). The choice: of the variants
that meet the objective, the fewest cores (when every one's are known), then replicas, then
memory, then the spec's order.

The autoscaler: minReplicas the plan's N for the target rate, maxReplicas the plan's N for
capacity.target.peakRatePerSecond (default the target), and a CPU averageUtilization of the
utilisation one replica runs at when it carries λ / N: the HPA adds replicas as the load per
replica passes the load the plan gave each one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from cxlab.analysis.capacity_plan import Basis, PlanTarget, Verification
from cxlab.analysis.labels import rate_text
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.queueing import Queue, Service, queue
from cxlab.analysis.rate_search import rate_searches
from cxlab.analysis.scalability import Scalability, fit
from cxlab.analysis.sizing import FRACTION
from cxlab.analysis.verification import fold_verdict, verification_of
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.spec.service import Variant
from cxlab.shape import Maybe, Shape
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.figures import significant

# Headroom over the measured peak: a replica's memory limit at the peak itself is OOM-killed
# by the first request the trials did not send.
MEMORY_MARGIN = 0.25
# A fleet past this many replicas is not a plan (Kubernetes' documented Pods per cluster).
MOST_REPLICAS = 150_000
TIMES = "\u00d7"


class ReplicaCapacity(Shape):
    """One replica count's measured capacity."""

    replicas: int
    rate_per_second: float
    """The searched rate of the copy of that many replicas (the highest over client
    models)."""
    fitted_rate_per_second: Maybe[float] = None
    """The USL's X(N) there, when fitted."""


class ScalabilityFit(Shape):
    """The Universal Scalability Law fitted to the capacities measured."""

    gamma: float
    """One replica's capacity, tasks/s."""
    sigma: float
    """Contention: the share of the work that serializes."""
    kappa: float
    """Coherency: the cost of replicas keeping each other in step (held at 0 with two replica
    counts)."""
    peak_replicas: Maybe[float] = None
    """N*, the replica count of the most capacity (absent: none, kappa = 0)."""


class VariantPlan(Shape):
    """One variant's plan: the replicas it needs for the target, or why it cannot meet it."""

    variant: str
    """The variant without its replica count (sync-4 of sync-4-r1, sync-4-r2)."""
    meets: bool
    measured: list[ReplicaCapacity]
    """Its capacity at each replica count searched."""
    scalability: Maybe[ScalabilityFit] = None
    """The USL's parameters, with two or more replica counts."""
    concurrency: Maybe[int] = None
    """c: the requests one replica serves at once (Little's law at its searched rate)."""
    holding_time_seconds: Maybe[float] = None
    """T: a request's mean time in the service at the lowest rate that held."""
    replicas: Maybe[int] = None
    """Replicas for the target rate."""
    peak_replicas: Maybe[int] = None
    """Replicas for capacity.target.peakRatePerSecond (the HPA's maxReplicas)."""
    rate_per_replica: Maybe[float] = None
    """Tasks/s each replica carries at the target."""
    cores_per_replica: Maybe[float] = None
    """The CPU one replica requests (absent: neither the variant nor the Deployment says)."""
    cores: Maybe[float] = None
    memory_bytes_per_replica: Maybe[int] = None
    """The measured peak of one replica plus MEMORY_MARGIN: its request and limit."""
    memory_bytes: Maybe[int] = None
    cpu_per_request_seconds: Maybe[float] = None
    expected_latency_seconds: Maybe[float] = None
    """The objective's percentile of wait + service at the target (M/G/c per replica)."""
    expected_wait_probability: Maybe[float] = None
    expected_occupancy: Maybe[float] = None
    expected_cpu_utilization: Maybe[float] = None
    """The share of a replica's requested cores used at the target: the HPA's target."""
    basis: Maybe[Basis] = None
    """measured: within twice the largest replica count searched; extrapolated: past it."""
    note: Maybe[str] = None
    reason: Maybe[str] = None
    """Why it cannot meet the target (meets: false)."""


class ServicePlan(Shape):
    """Replicas of the service for spec.capacity.target, per variant, and the cheapest."""

    target: PlanTarget
    peak_rate_per_second: float
    """The peak the autoscaler's maxReplicas is for."""
    variants: list[VariantPlan]
    choice: Maybe[str] = None
    """The cheapest variant that meets the objective; unset when none does."""
    replicas: Maybe[int] = None
    cores: Maybe[float] = None
    memory_bytes: Maybe[int] = None
    basis: Maybe[Basis] = None
    display: str
    """The choice in short, e.g. "3 replicas \u00d7 0.2 CPU, sync-4"."""
    message: str
    deployment_patch: Maybe[str] = None
    """The choice as a strategic merge patch of your Deployment (YAML): replicas, the
    container's requests and limits, the variant's image, command, args and env."""
    autoscaler: Maybe[str] = None
    """The choice's autoscaling/v2 HorizontalPodAutoscaler (YAML)."""
    verification: Maybe[list[Verification]] = None
    """The choice run (spec.capacity.verify): its copy at the planned replicas, then one
    more each time the last fell short; the last is the plan shown."""
    fewer: Maybe[Verification] = None
    """The verified plan's replicas less one, run (capacity.verify.fewer): short, the plan
    is the fewest that hold."""
    unverified: Maybe[str] = None
    """Why the plan was not run although spec.capacity.verify asked for it (or, refuted,
    why its next attempt could not run)."""


@dataclass(frozen=True)
class _Count:
    """One replica count of a variant, as measured."""

    variant: Variant
    replicas: int
    rate: float
    service: Service | None
    cpu_per_request: float | None
    memory_per_replica: int | None


def service_plan(
    spec: ExperimentSpec, outcomes: Sequence[TrialOutcome], copy_cores: float | None = None,
    deployment: str | None = None, container: str | None = None, unverified: str | None = None,
) -> ServicePlan | None:  # fmt: skip
    """status.servicePlan; None without a service or a capacity target. copy_cores: the CPU
    one replica of the Deployment requests (for a variant without resources.cpu);
    deployment, container: the names the patch and the autoscaler refer to. The rate
    searches plan; the verification's trials (trial.service_replicas) say whether it held,
    and the plan shown has the replicas of the last attempt. `unverified`: why the plan was
    not run, when it was asked to be."""
    if spec.service is None or spec.capacity is None:
        return None
    target = spec.capacity.target
    planner = _Planner(spec, copy_cores)
    counts = _counts(spec, outcomes)
    variants: dict[str, list[_Count]] = {}
    for count in counts:
        variants.setdefault(count.variant.base, []).append(count)
    plans = [planner.plan(name, found) for name, found in variants.items()]
    for name in _bases(spec):
        if name not in variants:
            plans.append(VariantPlan(variant=name, meets=False, measured=[],
                                     reason="no rate search of it held a rate"))  # fmt: skip
    plan = ServicePlan(
        target=PlanTarget(
            rate_per_second=target.rate_per_second, percentile=target.latency.percentile,
            latency_seconds=parse_duration(target.latency.max),
            cpu_utilization=target.cpu_utilization,
            max_wait_probability=target.max_wait_probability,
        ),
        peak_rate_per_second=planner.peak, variants=plans, display="", message="",
    )  # fmt: skip
    meeting = [p for p in plans if p.meets]
    if not meeting:
        plan.display = "no variant meets the target"
        plan.message = "; ".join(f"{p.variant}: {p.reason}" for p in plans) or "nothing measured"
        return plan
    known = all(p.cores is not None for p in meeting)
    best = min(
        meeting,
        key=lambda p: ((p.cores or 0.0) if known else 0.0, p.replicas or 0, p.memory_bytes or 0),
    )
    checks = [o for o in outcomes if o.trial.verify and o.trial.service == best.variant
              and o.trial.service_replicas]  # fmt: skip
    checks.sort(key=lambda o: o.trial.verify)
    attempts = [o for o in checks if o.trial.verify <= _most_attempts(spec)]
    if attempts and attempts[-1].trial.service_replicas != best.replicas:
        forced = attempts[-1].trial.service_replicas
        best = planner.plan(best.variant, variants[best.variant], forced)
        plans = [best if p.variant == best.variant else p for p in plans]
        plan.variants = plans
    plan.choice, plan.replicas, plan.cores = best.variant, best.replicas, best.cores
    plan.memory_bytes, plan.basis = best.memory_bytes, best.basis
    cores = f" {TIMES} {best.cores_per_replica:g} CPU" if best.cores_per_replica else ""
    plural = "s" if best.replicas != 1 else ""
    plan.display = f"{best.replicas} replica{plural}{cores}, {best.variant}"
    plan.message = (
        f"{best.variant}: {plan.display.split(',')[0]} for {rate_text(target.rate_per_second)} "
        f"tasks/s at {planner.objective_text}, expected {target.latency.percentile} "
        f"{format_duration(best.expected_latency_seconds or 0.0)} with "
        f"{best.expected_wait_probability or 0.0:.0%} of requests waiting; "
        f"{best.basis}: {best.note}"
    )
    _verified(plan, best, spec, attempts, [o for o in checks if o not in attempts], unverified)
    chosen = next(c.variant for c in counts if c.variant.base == best.variant)
    plan.deployment_patch = deployment_patch(best, chosen, container)
    if best.expected_cpu_utilization:
        plan.autoscaler = autoscaler(best, deployment or spec.service.deployment or "service")
    else:
        plan.message += (
            "; no autoscaler: its CPU target needs the service's CPU per request and the cores "
            "a replica requests (set the variant's resources.cpu)"
        )
    return plan


def _most_attempts(spec: ExperimentSpec) -> int:
    verify = spec.capacity.verify if spec.capacity else None
    return verify.max_attempts if verify is not None else 0


def fewer_attempt(spec: ExperimentSpec) -> int:
    """The verification attempt number of the run one replica fewer: past the attempts."""
    return _most_attempts(spec) + 1


def _verified(
    plan: ServicePlan, best: VariantPlan, spec: ExperimentSpec,
    attempts: Sequence[TrialOutcome], fewer: Sequence[TrialOutcome], unverified: str | None,
) -> None:  # fmt: skip
    """The verification folded into the plan: verified or refuted, by its last attempt."""
    if not attempts:
        if unverified:
            plan.message += f"; not verified: {unverified}"
            plan.unverified = unverified
        return
    tries = [_judged(spec, o) for o in attempts]
    last = tries[-1]
    plan.verification = tries
    if not last.holds and last.generator_saturated:  # it measured the generator, not the plan
        plan.unverified = unverified or last.shortfall
        plan.message += f"; not verified: {plan.unverified}"
        return
    best.basis = fold_verdict(plan, tries, unverified)
    if fewer:
        plan.fewer = one = _judged(spec, fewer[-1])
        if one.holds:
            plan.message += (
                f"; {one.replicas} replicas held too ({one.summary}): the plan is one over"
            )
        else:
            plan.message += f"; {one.replicas} replicas fell short ({one.shortfall}): the fewest"


def _judged(spec: ExperimentSpec, outcome: TrialOutcome) -> Verification:
    """A verification trial judged, with the replicas its copy ran."""
    found = verification_of(spec, outcome)
    found.replicas = outcome.trial.service_replicas
    replicas = f"{found.replicas} replica{'s' if found.replicas != 1 else ''}"
    for field in ("summary", "shortfall"):
        text = getattr(found, field)
        if text:
            setattr(found, field, f"{replicas}, {text}")
    return found


def _bases(spec: ExperimentSpec) -> list[str]:
    assert spec.service is not None
    return list(dict.fromkeys(v.base for v in spec.service.variant_list()))


def _counts(spec: ExperimentSpec, outcomes: Sequence[TrialOutcome]) -> list[_Count]:
    """Each variant's searched capacity, from its lines' rate searches."""
    assert spec.service is not None
    by_index = {v.index: v for v in spec.service.variant_list()}
    probes = [o for o in outcomes if o.trial.probe and o.trial.service_variant]
    line_variant = {o.trial.variant: by_index[o.trial.service_variant] for o in probes}
    found: dict[int, _Count] = {}
    for search in rate_searches(spec, outcomes):
        variant = line_variant.get(search.variant)
        if variant is None or search.rate_per_second is None:
            continue
        replicas = variant.replicas or 1
        held = [
            o for o in probes
            if o.trial.variant == search.variant and o.result is not None
            and any(p.trial == o.trial.name and p.holds and p.measured for p in search.probes)
        ]  # fmt: skip
        service = None
        if held:
            lowest = min(held, key=lambda o: o.trial.rate_per_second or 0.0)
            assert lowest.result is not None
            arrival = lowest.result.get("arrival")
            service = Service.of_histogram(
                arrival["serviceHistogram"] if arrival else lowest.result["latencyHistogram"]
            )
        memory = search.service_peak_memory_bytes
        count = _Count(
            variant=variant, replicas=replicas, rate=search.rate_per_second, service=service,
            cpu_per_request=search.service_cpu_per_request_seconds,
            memory_per_replica=None if memory is None else math.ceil(memory / replicas),
        )  # fmt: skip
        # the client model that offered the most measured the service best
        if variant.index not in found or count.rate > found[variant.index].rate:
            found[variant.index] = count
    return sorted(found.values(), key=lambda c: c.variant.index)


class _Planner:
    def __init__(self, spec: ExperimentSpec, copy_cores: float | None) -> None:
        assert spec.capacity is not None
        target = spec.capacity.target
        search = spec.search.rate if spec.search else None
        probe = spec.probe_latency
        self.probe_seconds = parse_duration(search.duration) if search else None
        self.probe_objective = parse_duration(probe.max) if probe else None
        self.rate = target.rate_per_second
        self.peak = target.peak_rate_per_second or target.rate_per_second
        self.fraction = FRACTION[target.latency.percentile]
        self.objective = parse_duration(target.latency.max)
        self.max_wait = target.max_wait_probability
        self.utilization = target.cpu_utilization
        self.copy_cores = copy_cores
        self.objective_text = f"{target.latency.percentile} ≤ {format_duration(self.objective)}"

    def plan(self, name: str, counts: list[_Count], forced: int | None = None) -> VariantPlan:
        """The variant's plan; `forced`: at that many replicas (a verification's last)."""
        counts = sorted(counts, key=lambda c: c.replicas)
        measured = [ReplicaCapacity(replicas=c.replicas, rate_per_second=c.rate) for c in counts]
        plan = VariantPlan(variant=name, meets=False, measured=measured)
        first = counts[0]
        if first.service is None:
            plan.reason = "no probe of its searches held with a Result to read service times from"
            return plan
        usl = _scalability([(c.replicas, c.rate) for c in counts])
        if usl is not None:
            plan.scalability = ScalabilityFit(
                gamma=significant(usl.gamma), sigma=significant(usl.sigma),
                kappa=significant(usl.kappa),
                peak_replicas=None if usl.peak is None else significant(usl.peak),
            )  # fmt: skip
            for m in measured:
                m.fitted_rate_per_second = round(usl.capacity(m.replicas), 3)
        service = first.service
        concurrency, grace = self.concurrency(first.rate / first.replicas, service.mean)
        plan.concurrency = concurrency
        plan.holding_time_seconds = significant(service.mean)
        cores = first.variant.cpu if first.variant.cpu is not None else self.copy_cores
        plan.cores_per_replica = cores
        cpu = max((c.cpu_per_request for c in counts if c.cpu_per_request), default=None)
        plan.cpu_per_request_seconds = cpu
        memories = [c.memory_per_replica for c in counts if c.memory_per_replica]
        per_replica_memory = math.ceil(max(memories) * (1 + MEMORY_MARGIN)) if memories else None
        plan.memory_bytes_per_replica = per_replica_memory
        # c rounded up would let a replica of the model carry more than it was measured to:
        # its service times are then stretched until c / T is the rate it held
        floor = concurrency * grace / (first.rate / first.replicas)
        services = tuple(
            (c.replicas, _at_least(c.service, floor)) for c in counts if c.service is not None
        )
        fitted = _Fitted(usl, first.rate / first.replicas, services, concurrency, cores, cpu)
        sized = self.size(fitted, self.rate)
        if sized is None:
            plan.reason = self.unsized(fitted)
            return plan
        replicas, at = sized
        peak = self.size(fitted, self.peak) if self.peak > self.rate else sized
        if forced is not None and forced != replicas:
            per_replica = self.rate / forced
            service = fitted.service_at(forced)
            replicas, at = forced, queue(per_replica, service, concurrency, self.fraction) or at
        plan.meets, plan.replicas = True, replicas
        plan.peak_replicas = peak[0] if peak is not None else None
        plan.rate_per_replica = round(self.rate / replicas, 3)
        plan.cores = None if cores is None else round(replicas * cores, 3)
        plan.memory_bytes = None if per_replica_memory is None else replicas * per_replica_memory
        plan.expected_latency_seconds = significant(at.latency)
        plan.expected_wait_probability = round(at.wait_probability, 4)
        plan.expected_occupancy = round(at.occupancy, 3)
        if cpu is not None and cores:
            plan.expected_cpu_utilization = round(self.rate / replicas * cpu / cores, 3)
        largest = counts[-1].replicas
        plan.basis = "extrapolated" if replicas > 2 * largest else "measured"
        plan.note = self.note(fitted, counts, replicas)
        if peak is None:
            plan.note += (
                f"; no replica count carries the peak {rate_text(self.peak)} tasks/s: the "
                f"autoscaler's maxReplicas is the target's"
            )
            plan.peak_replicas = replicas
        return plan

    def concurrency(self, rate: float, holding: float) -> tuple[int, float]:
        """c: the requests a replica serves at once, from its searched rate by Little's law,
        to the nearest whole request (T is the client's view of a request, a little over the
        server's own: 56 ms where 4 sync workers held 75/s), and g. A probe of D seconds may
        hold a little over c / T: its backlog grows by the excess for D seconds and the wait
        it adds stays under the objective L while rate <= c / T * g, g = 1 + (L - T) / D (5 %
        at 250 ms over 4 s), so that share is taken off first."""
        grace = 1.0
        if self.probe_seconds and self.probe_objective:
            grace += max(0.0, self.probe_objective - holding) / self.probe_seconds
        return max(1, round(rate * holding / grace)), grace

    def size(self, fitted: _Fitted, rate: float) -> tuple[int, Queue] | None:
        """The fewest replicas whose queues hold at `rate`; None when none up to the USL's
        peak (or MOST_REPLICAS) does."""
        most = MOST_REPLICAS
        if fitted.usl is not None and fitted.usl.peak is not None:
            most = min(most, max(1, math.floor(fitted.usl.peak)))
        # fewer replicas than rate x T / c would be busier than their workers can be
        low = max(1, math.floor(rate * fitted.services[0][1].mean / fitted.concurrency))
        for replicas in range(low, min(most, low + 10_000) + 1):
            found = self.holds(fitted, rate, replicas)
            if found is not None:
                return replicas, found
        return None

    def holds(self, fitted: _Fitted, rate: float, replicas: int) -> Queue | None:
        if rate > fitted.capacity(replicas) * (1 + 1e-9):
            return None
        per_replica = rate / replicas
        cores = fitted.cores
        if fitted.cpu and cores and per_replica * fitted.cpu > self.utilization * cores:
            return None
        found = queue(per_replica, fitted.service_at(replicas), fitted.concurrency, self.fraction)
        if found is None or found.wait_probability > self.max_wait:
            return None
        if found.latency > self.objective:
            return None
        return found

    def unsized(self, fitted: _Fitted) -> str:
        if fitted.usl is not None and fitted.usl.peak is not None:
            return (
                f"no replica count up to the USL's peak ({fitted.usl.peak:.3g} replicas, "
                f"{rate_text(fitted.usl.capacity(fitted.usl.peak))} tasks/s at most) keeps "
                f"{self.objective_text} at {rate_text(self.rate)} tasks/s"
            )
        return (
            f"no replica count keeps {self.objective_text} with the wait counted: one replica's "
            f"own requests take {format_duration(fitted.services[0][1].mean)} on average"
        )

    def note(self, fitted: _Fitted, counts: list[_Count], replicas: int) -> str:
        searched = ", ".join(f"{rate_text(c.rate)} tasks/s at {c.replicas}" for c in counts)
        if fitted.usl is None:
            text = (
                f"capacity searched at one replica count ({searched}): replicas assumed to add "
                f"linearly; search variants.replicas [1, 2, 4] to measure how they scale"
            )
        else:
            text = (
                f"the USL through {searched} replicas: sigma {fitted.usl.sigma:.3g}, "
                f"kappa {fitted.usl.kappa:.3g}"
            )
        text += (
            f"; each replica an M/G/{fitted.concurrency} queue (its {fitted.concurrency} "
            f"requests at once, by Little's law)"
        )
        if replicas > 2 * counts[-1].replicas:
            text += f", {replicas} replicas past twice the {counts[-1].replicas} measured"
        return text


@dataclass(frozen=True)
class _Fitted:
    usl: Scalability | None
    per_replica: float  # one replica's measured capacity, tasks/s (the smallest count's)
    services: tuple[tuple[int, Service], ...]  # by replica count searched, ascending
    concurrency: int
    cores: float | None
    cpu: float | None

    def capacity(self, replicas: int) -> float:
        """X(N): the USL's, else linear from the one count measured."""
        if self.usl is None:
            return replicas * self.per_replica
        return self.usl.capacity(replicas)

    def service_at(self, replicas: int) -> Service:
        """The service times measured at the largest replica count searched up to N."""
        below = [service for n, service in self.services if n <= replicas]
        return below[-1] if below else self.services[0][1]


def _at_least(service: Service, mean: float) -> Service:
    """The service times stretched to a mean of at least `mean`."""
    if service.mean <= 0 or service.mean >= mean:
        return service
    scale = mean / service.mean
    return Service.of([(s * scale, p) for s, p in service.points], mean)


def _scalability(points: list[tuple[int, float]]) -> Scalability | None:
    if len({n for n, _ in points}) < 2:
        return None
    return fit([(float(n), x) for n, x in points])


def _cpu_text(cores: float) -> str:
    """Kubernetes' quantity for a CPU count: millicores under one core."""
    return f"{round(cores * 1000)}m" if cores != int(cores) else str(int(cores))


def deployment_patch(plan: VariantPlan, variant: Variant, container: str | None) -> str:
    """A strategic merge patch of the user's Deployment (kubectl patch --type strategic)."""
    own: dict[str, object] = {"name": container or "app"}
    requests: dict[str, str] = {}
    if plan.cores_per_replica:
        requests["cpu"] = _cpu_text(plan.cores_per_replica)
    if plan.memory_bytes_per_replica:
        requests["memory"] = f"{math.ceil(plan.memory_bytes_per_replica / 2**20)}Mi"
    if requests:
        own["resources"] = {"requests": requests, "limits": dict(requests)}
    if variant.image:
        own["image"] = variant.image
    if variant.command:
        own["command"] = list(variant.command)
    if variant.args:
        own["args"] = list(variant.args)
    if variant.env:
        own["env"] = [{"name": n, "value": v} for n, v in variant.env]
    patch = {"spec": {"replicas": plan.replicas, "template": {"spec": {"containers": [own]}}}}
    return yaml.safe_dump(patch, sort_keys=False)


def autoscaler(plan: VariantPlan, deployment: str) -> str:
    """The autoscaling/v2 HorizontalPodAutoscaler of the plan."""
    hpa: dict[str, object] = {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": deployment},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicas": plan.replicas,
            "maxReplicas": max(plan.peak_replicas or 0, plan.replicas or 1),
        },
    }  # fmt: skip
    utilization = max(1, round((plan.expected_cpu_utilization or 0.0) * 100))
    hpa["spec"]["metrics"] = [{  # type: ignore[index]
        "type": "Resource",
        "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization},
        },
    }]  # fmt: skip
    return yaml.safe_dump(hpa, sort_keys=False)
