"""Measured points → one model's plan for a target load (a ModelPlan of status.capacityPlan): how
many Pods of the experiment's size, each with how many workers, carry `spec.capacity.target`
within its latency objective (cxlab.analysis.planning picks the cheapest model). Pure: the
operator and the local backend plan alike. docs/capacity-plan.md works an example by hand.

One trial is one Pod with k = `spec.resources.cpu` pinned cores and `spec.resources.memory`.

Points: `group_points` under the experiment's pinning, at the plan's RTT (`target.rtt`, else
the largest RTT of the matrix: the slowest backend, the conservative case; workloads without
an RTT have one), with at least one counted Result, no failed task and no dropped arrival in
any of them. Per point, medians over its repetitions (so one outlier does not move the plan),
per Pod (a trial of several Pods shares its rate, tasks and memory among them):

    X   = throughputPerSecond                  tasks/s one Pod sustained
    Q   = latencySeconds[percentile]           the objective's percentile (p50, p90 or p99)
    S   = the time a task holds its worker, as a distribution: the histogram (latencyHistogram;
          an arrival run's serviceHistogram, without its wait) of the repetition whose mean
          is the median
    T   = E[S] = histogram sum / count         the mean, as Little's law needs (not p50)
    c   = (cpuUserSeconds + cpuSystemSeconds) / tasks      CPU seconds per task
    m   = peakRssBytes

A point meets the objective when Q <= max. Its usable rate per Pod keeps the Pod's CPUs at the
target utilisation U, and the Pod no faster than it was measured (so S holds):

    r   = min(X, U * k / c)                    (no CPU cap when c = 0)

Per model (variant): of its points that meet the objective, the one with the largest r (tie:
fewer workers). For the target rate R, Pods and workers are sized for queueing
(cxlab.analysis.queueing: tasks arrive at random at λ = R / pods per Pod):

    pods          = the fewest, from ceil(R / r) up, for which some worker count per Pod keeps
                    P(wait) <= maxWaitProbability and the percentile of wait + service
                    within the objective (sequential has one worker, so only Pods can grow)
    workersPerPod = the fewest such workers
    cores         = pods * k
    memoryBytes   = pods * m                   the peak at the measured workers
    expectedLatencySeconds     the objective's percentile of wait + service, predicted
    expectedOccupancy          λ·T / workersPerPod
    expectedWaitProbability    Erlang C;  expectedMeanWaitSeconds: Allen-Cunneen
    expectedCpuUtilization = λ * c / k

The basis is "measured" for one Pod (it runs at or below a load that was measured) and
"extrapolated" for more: one trial is one Pod, so more Pods assume that Pods add linearly, and
the note says so. A model with no point meeting the objective, or none measured, says why."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from cxlab.analysis.capacity_plan import Basis, ModelPlan, Percentile
from cxlab.analysis.labels import rate_text, workers_label
from cxlab.analysis.queueing import Queue, Service, smallest_workers
from cxlab.analysis.summary import PointRuns
from cxlab.experiments.plan import Trial
from cxlab.experiments.spec import CapacityTarget, ExperimentSpec
from cxlab_contract import runner_contract
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.figures import significant
from cxlab_contract.result import Result

# Kubernetes' documented limit of one cluster: a plan past it is no plan (and its byte
# counts would leave the int64 the apiserver stores).
MAX_PODS = 150_000
FRACTION: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
MOST_WORKERS: int = runner_contract().limits["workers"].max


@dataclass(frozen=True)
class _Point:
    """One point's medians over its counted repetitions."""

    workers: int  # as run: the spec's 0 resolved to one worker per task
    throughput: float  # X, tasks/s
    latency: float  # Q, at the objective's percentile
    service: Service  # S, its mean T
    cpu_per_task: float  # c, CPU seconds
    memory: int  # m, bytes
    searched: float | None = None  # a rate search's probe: the rate it offered


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def _measured(results: list[Result], percentile: Percentile) -> _Point:
    """Per Pod: a trial of several Pods (a merged Result) has its rate, tasks and memory
    shared by its Pods (workers are per Pod already)."""
    pods = int(results[0].get("pods", 1))
    # The repetition whose mean is the median (the upper one of an even count): merging them
    # all would let one slow repetition's tail into the plan.
    services = sorted((_service(r) for r in results), key=lambda service: service.mean)
    return _Point(
        workers=int(results[0]["workers"]),
        throughput=_median([r["throughputPerSecond"] / pods for r in results]),
        latency=_median([r["latencySeconds"][percentile] for r in results]),
        service=services[len(services) // 2],
        cpu_per_task=_median(
            [(r["cpuUserSeconds"] + r["cpuSystemSeconds"]) / r["tasks"] for r in results]
        ),
        memory=round(_median([r["peakRssBytes"] / pods for r in results])),
    )


def _service(result: Result) -> Service:
    """The time tasks held a worker: an arrival run's service apart from its wait."""
    arrival = result.get("arrival")
    return Service.of_histogram(
        arrival["serviceHistogram"] if arrival else result["latencyHistogram"]
    )


def _whole(result: Result) -> bool:
    """Every task ran and succeeded: none failed, no arrival was dropped."""
    arrival = result.get("arrival")
    return result["tasksFailed"] == 0 and not (arrival and arrival["dropped"])


def _ceil(value: float) -> int:
    # Rounded first: 3 * (1/3) must not become 4 Pods through a float's last digit.
    return math.ceil(round(value, 9))


def at_rtt(trial: Trial, rtt: float | None) -> bool:
    if rtt is None or trial.rtt_seconds is None:
        return rtt is None and trial.rtt_seconds is None
    return math.isclose(trial.rtt_seconds, rtt)


def plan_rtt(spec: ExperimentSpec) -> float | None:
    target = spec.capacity.target if spec.capacity else None
    if target and target.rtt:
        return parse_duration(target.rtt)
    rtts = [r for r in spec.workload.rtt_seconds() if r is not None]
    return max(rtts) if rtts else None


def variants(spec: ExperimentSpec) -> list[tuple[str, str]]:
    """(variant, model) in the spec's order, named as the trials name them."""
    return [
        (Trial(0, entry.model, 0, gomaxprocs, None, 1).variant, entry.model)
        for entry in spec.models
        for gomaxprocs in entry.gomaxprocs_axis()
    ]


class Planner:
    def __init__(self, spec: ExperimentSpec, target: CapacityTarget) -> None:
        cores = spec.resources.whole_cpus
        assert cores is not None, "the spec refuses a capacity plan for a fraction of a CPU"
        self.cores_per_pod = cores
        self.rate_per_second = target.rate_per_second
        self.utilization = target.cpu_utilization
        self.percentile = target.latency.percentile
        self.fraction = FRACTION[self.percentile]
        self.objective = parse_duration(target.latency.max)
        self.max_wait_probability = target.max_wait_probability
        self.objective_text = f"{self.percentile} ≤ {format_duration(self.objective)}"

    def usable_rate(self, point: _Point) -> float:
        """r = min(X, U * k / c): the CPU cap keeps a Pod at the target utilisation."""
        if point.cpu_per_task == 0:
            return point.throughput
        return min(point.throughput, self.utilization * self.cores_per_pod / point.cpu_per_task)

    @staticmethod
    def unmeasured(groups: list[PointRuns], where: str) -> str:
        """Why a model has no point to plan from."""
        if any(g.results for g in groups):
            return f"every point measured{where} had failed tasks or dropped arrivals"
        failed, unpinned = sum(g.failed for g in groups), sum(g.unpinned for g in groups)
        why = []
        if failed:
            why.append(f"{failed} trial(s) failed")
        if unpinned:
            why.append(f"{unpinned} not pinned (left out under pinning: required)")
        return f"no trial{where} has a Result" + (f" ({', '.join(why)})" if why else "")

    def model_plan(
        self, variant: str, model: str, groups: list[PointRuns], where: str, min_pods: int = 1
    ) -> ModelPlan:
        usable = [g for g in groups if g.results and all(_whole(r) for r in g.results)]
        points = [
            # A probe's workers as the spec gives them: 0 is one per arrival, not those it ran.
            replace(
                _measured(g.results, self.percentile),
                searched=g.trial.rate_per_second,
                workers=g.trial.workers,
            )
            if g.trial.probe
            else _measured(g.results, self.percentile)
            for g in usable
        ]
        if not points:
            reason = self.unmeasured(groups, where)
            return ModelPlan(variant=variant, model=model, meets=False, reason=reason)
        meeting = [p for p in points if p.latency <= self.objective]
        if not meeting:
            best = min(points, key=lambda p: (p.latency, p.workers))
            reason = (
                f"best {self.percentile} {format_duration(best.latency)} at "
                f"{workers_label(model, best.workers)} > {format_duration(self.objective)}"
            )
            return ModelPlan(variant=variant, model=model, meets=False, reason=reason)
        sized = [(p, self.size(model, p, min_pods)) for p in meeting]
        planned = [(p, pods_queue) for p, pods_queue in sized if pods_queue is not None]
        if not planned:
            best = max(meeting, key=lambda p: (self.usable_rate(p), -p.workers))
            return ModelPlan(
                variant=variant, model=model, meets=False, reason=self.unsized(model, best)
            )
        # The fewest Pods, then workers; of equals, the point measured at the higher rate,
        # then with fewer workers.
        point, (pods, queue) = min(
            planned,
            key=lambda pq: (pq[1][0], pq[1][1].workers, -self.usable_rate(pq[0]), pq[0].workers),
        )
        rate_per_pod = self.usable_rate(point)
        basis, note = self.basis(model, pods, point, rate_per_pod)
        return ModelPlan(
            variant=variant, model=model, meets=True, workers=point.workers,
            workers_per_pod=queue.workers, pods=pods, cores_per_pod=self.cores_per_pod,
            cores=pods * self.cores_per_pod, memory_bytes=pods * point.memory,
            rate_per_pod=round(rate_per_pod, 3),
            holding_time_seconds=significant(point.service.mean),
            expected_latency_seconds=significant(queue.latency),
            expected_occupancy=round(queue.occupancy, 3),
            expected_wait_probability=round(queue.wait_probability, 4),
            expected_mean_wait_seconds=significant(queue.mean_wait),
            expected_cpu_utilization=round(
                self.rate_per_second / pods * point.cpu_per_task / self.cores_per_pod, 3
            ),
            basis=basis, note=note,
        )  # fmt: skip

    def size(self, model: str, point: _Point, min_pods: int = 1) -> tuple[int, Queue] | None:
        """The fewest Pods (from ceil(R / r), or min_pods) and, for them, the fewest workers
        per Pod whose queue keeps the wait and the objective; None when no Pod count up to
        MAX_PODS does."""
        rate_per_pod = self.usable_rate(point)
        if rate_per_pod <= 0:  # a throughput rounded to 0: a day-long task
            return None
        most = 1 if model == "sequential" else MOST_WORKERS

        def sized(pods: int) -> Queue | None:
            return smallest_workers(
                self.rate_per_second / pods, point.service, self.fraction, self.objective,
                self.max_wait_probability, most,
            )  # fmt: skip

        low = max(_ceil(self.rate_per_second / rate_per_pod), min_pods)
        if low > MAX_PODS:
            return None
        if (queue := sized(low)) is not None:
            return low, queue
        if (queue := sized(MAX_PODS)) is None:
            return None
        # More Pods only lighten each one's queue: the fewest that suffice, by bisection.
        high = MAX_PODS
        while high - low > 1:
            middle = (low + high) // 2
            if (found := sized(middle)) is not None:
                high, queue = middle, found
            else:
                low = middle
        return high, queue

    def unsized(self, model: str, point: _Point) -> str:
        """Why no Pod count carries the target with the point's service times."""
        rate_per_pod = self.usable_rate(point)
        if rate_per_pod <= 0 or _ceil(self.rate_per_second / rate_per_pod) > MAX_PODS:
            return (
                f"needs more than {MAX_PODS:,} Pods ({rate_text(rate_per_pod)} tasks/s each), "
                f"the most Kubernetes supports in one cluster"
            )
        return (
            f"no number of workers and Pods up to {MAX_PODS:,} keeps {self.objective_text} "
            f"with the wait for a worker counted and at most "
            f"{self.max_wait_probability:.0%} of tasks waiting (measured "
            f"{self.percentile} {format_duration(point.latency)} at "
            f"{workers_label(model, point.workers)})"
        )

    def basis(self, model: str, pods: int, point: _Point, rate_per_pod: float) -> tuple[Basis, str]:
        basis: Basis
        workers = workers_label(model, point.workers)
        if pods == 1:
            basis = "measured"
            note = f"one Pod at or below the load measured at {workers}"
            if point.searched is not None:
                note = (
                    f"one Pod at or below the {rate_text(point.searched)} tasks/s its rate "
                    f"search held at {workers}"
                )
        else:
            basis = "extrapolated"
            note = (
                f"{pods} Pods from measurements of one Pod, assuming Pods add linearly "
                f"(one trial is one Pod)"
            )
            if point.searched is not None:  # the Pod's rate from its search, not the sweep
                note += f"; one Pod's rate search held {rate_text(point.searched)} tasks/s"
        if rate_per_pod < point.throughput:
            note += (
                f"; {rate_text(rate_per_pod)} tasks/s per Pod keeps its CPUs at "
                f"{self.utilization:.0%} (measured {rate_text(point.throughput)} tasks/s)"
            )
        return basis, note
