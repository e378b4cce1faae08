"""The `status` of a ConcurrencyExperiment, typed: the working model of both backends (the
reconciler, the local backend, a schedule's history and the report read and build these),
the source of the CRD's status schema, and JSON only where it is written or read
(`ExperimentStatus.document()`, `ExperimentStatus.read()`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Self

from cxlab.analysis.capacity_plan import CapacityPlan
from cxlab.analysis.copy_counters import ServiceWindow
from cxlab.analysis.rate_search import RateSearch
from cxlab.analysis.service_figures import ServiceFigures
from cxlab.analysis.service_plan import ServicePlan
from cxlab.analysis.summary import Summary
from cxlab.conditions import Condition
from cxlab.shape import Maybe, Shape, nullable, optional

if TYPE_CHECKING:  # a TypedDict for the type checker; to pydantic the JSON it is (see below)
    from cxlab_contract.result import Result
else:
    # The Result was validated against its JSON Schema when it was read (a runner's output),
    # and the CRD's schema for it is that schema (cxlab.crd): validated again here it would
    # only be coerced (1 -> 1.0).
    Result = dict[str, Any]


# Compare a document's phase with these members, never with string literals.
class Phase(StrEnum):
    """Pending (waiting for capacity, or not started) -> Running -> Succeeded | Failed (every
    trial ended; Failed when one failed or the experiment could not go on)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)

    @staticmethod
    def of(text: str | None) -> Phase:
        """The phase a document says (none yet: Pending)."""
        return Phase(text) if text else Phase.PENDING

    @staticmethod
    def ended(text: str | None) -> bool:
        """Whether a document's phase (perhaps none) is a finished one."""
        return text in (Phase.SUCCEEDED, Phase.FAILED)


# A trial entry's phase when abortOnFail made it pointless (not an experiment's phase).
SKIPPED: Literal["Skipped"] = "Skipped"
TrialPhase = Literal[Phase.SUCCEEDED, Phase.FAILED, "Skipped"]


class RunningTrial(Shape):
    trial: Maybe[str] = None
    pod: Maybe[str] = None
    tasks_done: Maybe[int] = None
    tasks: Maybe[int] = None
    elapsed_seconds: Maybe[float] = None


class Progress(Shape):
    trials_total: Maybe[int] = None
    trials_done: Maybe[int] = None
    trials_failed: Maybe[int] = None
    trials_skipped: Maybe[int] = None
    """Trials not run because an objective broke (abortOnFail)."""
    display: Maybe[str] = None
    running: Maybe[list[RunningTrial]] = None


class PrometheusUsage(Shape):
    """The trial container as Prometheus saw it (cAdvisor) over the trial Pod's life, when
    the operator has a Prometheus (CXLAB_PROMETHEUS_URL)."""

    cpu_throttled_ratio: Maybe[float] = None
    """CFS periods throttled / CFS periods."""
    memory_working_set_bytes: Maybe[int] = None
    """Largest container_memory_working_set_bytes."""
    window_seconds: Maybe[int] = None
    missing: Maybe[list[str]] = None
    """Fields Prometheus had no data for (never reported 0)."""
    error: Maybe[str] = None


class TrialEntry(Shape):
    name: str
    model: str
    variant: Maybe[str] = None
    workers: int
    gomaxprocs: int | None = nullable()
    rtt_seconds: float | None = nullable()
    rate_per_second: Maybe[float] = None
    """An arrival run's offered rate, the whole trial's (absent for other runs)."""
    repetition: int
    phase: TrialPhase
    """Skipped: not run, because a point it can only do worse than broke an objective
    (abortOnFail); its message says which."""
    message: Maybe[str] = None
    pods: Maybe[int] = None
    """Runner Pods of a trial of several (absent: one)."""
    attempts: Maybe[int] = None
    node: Maybe[str] = None
    nodes: Maybe[list[str]] = None
    """Each Pod's node, in Pod order, for a trial of several Pods."""
    image: Maybe[str] = None
    """A calibration trial's runner image as the kubelet ran it (its image ID, a digest)."""
    pinned: Maybe[bool] = None
    """Whether the trial ran on exactly the cores it asked for (set once it has a Result)."""
    metrics_scraped: Maybe[bool] = None
    prometheus: Maybe[PrometheusUsage] = None
    wall_seconds: Maybe[float] = None
    """The Result's headline figures, in a cluster experiment's compact entry."""
    throughput_per_second: Maybe[float] = None
    latency_p99_seconds: Maybe[float] = None
    results_in: Maybe[str] = None
    """The ConfigMap holding the full entry (Result, each Pod's, Prometheus'), in a cluster
    experiment (cxlab.experiments.results_store); the local backend keeps it inline."""
    result: Maybe[Result] = None
    """The runner's Result (cxlab_contract/result-v1.schema.json); a trial of several Pods:
    their merged Result (cxlab.analysis.merge)."""
    pod_results: Maybe[list[Result]] = None
    """Each Pod's own Result, in Pod order, for a trial of several Pods."""
    service: Maybe[ServiceFigures] = None
    """spec.service's own figures over the trial's window (its process tree locally, its
    copy's containers as the kubelet counts them on a cluster)."""

    @property
    def failed(self) -> bool:
        return self.phase == Phase.FAILED

    @property
    def skipped(self) -> bool:
        return self.phase == SKIPPED

    @property
    def has_result(self) -> bool:
        """Whether the trial had a Result, full or compact (a cluster experiment's status keeps
        the Result elsewhere): `pinned` is set exactly when there was one."""
        return self.result is not None or self.pinned is not None

    @property
    def full_only(self) -> bool:
        """Whether it holds what a cluster experiment keeps out of status (its Results,
        Prometheus' view): a full entry."""
        return bool(self.result or self.pod_results or self.prometheus)


class QueuePlace(Shape):
    """Where an experiment waiting for capacity stands (cxlab.experiments.queue)."""

    position: Maybe[int] = None
    """1 = next to be admitted."""
    length: Maybe[int] = None
    """Experiments waiting, this one included."""
    behind: Maybe[str] = None
    """namespace/name of the experiment ahead that does not fit yet, or that runs against
    the same service, if any."""
    service: Maybe[str] = None
    """The Deployment or Service whose turn it waits for ("Service lab/api"): one run at a
    time per service."""
    since: Maybe[datetime] = None
    message: Maybe[str] = None


class Calibration(Shape):
    """What the calibration trials measured (spec.calibration)."""

    cpu_loop_seconds: Maybe[float] = None
    """The median time of one task of the CPU loop (2,000,000 iterations, one worker)."""
    sleep_seconds: Maybe[float] = None
    """The median time of a 1 ms sleep: 1 ms and the timer's and scheduler's slack."""


class Environment(Shape):
    """Where and with what the run measured: its fingerprint and calibration."""

    node: Maybe[str] = None
    """The node the calibration ran on (the local backend: this machine's host name)."""
    cpu_model: Maybe[str] = None
    kernel: Maybe[str] = None
    """As the runner read them (its Result's host)."""
    cpu_manager_policy: Maybe[str] = None
    """static when the calibration ran on exclusive cores (which only the kubelet's static
    CPU manager gives), none when it did not; local for the local backend."""
    runner_image: Maybe[str] = None
    """The runner image's ID (digest) the kubelet ran; absent locally."""
    cxlab_version: Maybe[str] = None
    """The cxlab that recorded the run."""
    calibration: Maybe[Calibration] = None


# A verdict, of one point or of an objective (cxlab.analysis.objectives).
Verdict = Literal["Met", "Broken", "Inconclusive"]


class ObjectivePoint(Shape):
    """One point of an objective's table: its repetitions' figure and 95 % interval."""

    variant: str
    model: str
    pods: Maybe[int] = None
    """Runner Pods of the point (absent: one)."""
    workers: int
    rtt_seconds: float | None = nullable()
    rate_per_second: Maybe[float] = None
    repetitions: int
    """Repetitions with a value (failed trials have none)."""
    value: Maybe[float] = None
    """The mean of the repetitions' values, in the metric's unit (seconds, bytes, a share,
    tasks per second, arrivals)."""
    low: Maybe[float] = None
    high: Maybe[float] = None
    """The 95 % interval of the mean (Student t), from 2 repetitions; absent for one."""
    verdict: Verdict
    repetitions_needed: Maybe[int] = None
    """Inconclusive: the repetitions in all that would decide it if the mean and spread held."""


class ObjectiveStatus(Shape):
    """One objective's verdict over the points in its scope (spec.objectives, in order)."""

    name: str
    """The objective's name, or its metric and bound."""
    metric: str
    """The metric as the tables name it (latency p99, failure ratio, ...)."""
    bound: str
    """e.g. "≤ 250ms", "≥ 500/s"."""
    unit: Literal["seconds", "bytes", "share", "rate", "count"]
    """The unit of the points' values: seconds, bytes, a share (0 to 1), tasks per second,
    arrivals."""
    verdict: Verdict
    message: str
    met: int
    broken: int
    inconclusive: int
    """Points of each verdict."""
    skipped_trials: Maybe[int] = None
    """Trials not run because a point broke this objective (abortOnFail)."""
    points: list[ObjectivePoint]
    """Broken points first, then inconclusive, then met; at most 50 (the counts are whole)."""


class ServiceVariantStatus(Shape):
    """One spec.service variant's copy (cxlab.experiments.service_run): made before its
    first trial, deleted after its last, before the next variant's is made."""

    index: int
    name: str
    copy_name: Maybe[str] = None
    """The copy's Deployment and Service (cx-<experiment>-v<index>)."""
    phase: Maybe[str] = None
    """Starting (made, not every replica Ready), Ready, Deleting, Deleted, or Failed (it
    did not get Ready within service.readyTimeout: its trials failed)."""
    reason: Maybe[str] = None
    """Why it did not get Ready: the Pods' own reason (ImagePullBackOff, CrashLoopBackOff,
    Unschedulable, OOMKilled, ...)."""
    message: Maybe[str] = None
    created_at: Maybe[datetime] = None
    ready_seconds: Maybe[float] = None
    """From the pass that made the copy to the one that saw every replica Ready."""
    deleting_since: Maybe[datetime] = None
    deleted_seconds: Maybe[float] = None
    """From the pass that deleted the copy to the one that saw it gone (its Pods with it)."""
    windows: Maybe[list[ServiceWindow]] = None
    """The trials running against the copy, each with the copy's counters when its Pods were
    made: their figures' start (cxlab.experiments.service_window)."""


class ServiceCopyRequest(Shape):
    """What the largest of spec.service's variants' copies asks of the nodes, read from the
    user's Deployment before admission (the variant's resources applied): the queue holds it
    beside the trial Pods' requests until the experiment finishes."""

    replicas: int
    cpu: float
    """CPUs one copy Pod requests (its containers' requests, or limits where only those)."""
    memory_bytes: int
    """Memory one copy Pod requests."""
    container: Maybe[str] = None
    """The container the variants change (service.container, else the template's first)."""
    node_selector: Maybe[dict[str, str]] = None
    tolerations: Maybe[list[dict[str, Any]]] = None
    affinity: Maybe[dict[str, Any]] = None
    """The Pod template's placement: where the scheduler may put the copy."""


class ExperimentStatus(Shape):
    """Written by the operator: progress as trials end, the summary at the end."""

    phase: Maybe[Phase] = None
    observed_generation: Maybe[int] = None
    start_time: Maybe[datetime] = None
    completion_time: Maybe[datetime] = None
    best: Maybe[str] = None
    """The first recommendation, short."""
    progress: Maybe[Progress] = None
    conditions: Maybe[list[Condition]] = optional(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )
    attempts: Maybe[dict[str, int]] = None
    """Pods started per unfinished trial (retries after loss)."""
    started_spec: Maybe[str] = None
    """The spec the run started with, as JSON: it ends with that spec."""
    trials: Maybe[list[TrialEntry]] = None
    summary: Maybe[Summary] = None
    """The points, knees and recommendations (once finished); on a cluster the compact one,
    the whole in the ConfigMap summaryIn names."""
    queue: Maybe[QueuePlace] = None
    """While it waits for capacity (phase Pending, condition Queued)."""
    queued_seconds: Maybe[float] = None
    """How long it waited for capacity before its first trial started."""
    capacity_plan: Maybe[CapacityPlan] = None
    """Pods and cores for spec.capacity.target, from the measured points (once finished)."""
    rate_search: Maybe[list[RateSearch]] = None
    """spec.search.rate's answer per line (a model, or a service variant and a model): the
    searched rate, its interval, whether it is noisy, whose limit (once finished)."""
    service_plan: Maybe[ServicePlan] = None
    """Replicas of spec.service for spec.capacity.target, per variant, the cheapest, and the
    plan as a Deployment patch and a HorizontalPodAutoscaler (once finished)."""
    environment: Maybe[Environment] = None
    """The calibration's fingerprint and figures (spec.calibration, once finished)."""
    objectives: Maybe[list[ObjectiveStatus]] = None
    """Each objective's verdict and table (spec.objectives, once finished); the condition
    ObjectivesMet sums them up."""
    service_copy: Maybe[ServiceCopyRequest] = None
    """spec.service: what its copy asks of the nodes (the queue holds it)."""
    service_variants: Maybe[list[ServiceVariantStatus]] = None
    """spec.service's variants as they run, each as its copy: Ready wait, deletion time, or
    why it could not get Ready."""

    @classmethod
    def read(cls, document: Any) -> Self:
        """A status as the apiserver or a result.json holds it (none yet: an empty one)."""
        return super().read(document or {})

    @property
    def finished(self) -> bool:
        return self.phase is not None and self.phase.finished

    @property
    def entries(self) -> list[TrialEntry]:
        return self.trials or []


def running_entry(
    trial: str, pod: str, tasks: int | None, tasks_done: int | None, elapsed_seconds: float | None
) -> RunningTrial:
    """progress.running's entry for a trial whose Pod runs."""
    elapsed = None if elapsed_seconds is None else round(elapsed_seconds, 1)
    return RunningTrial(
        trial=trial, pod=pod, tasks=tasks, tasks_done=tasks_done, elapsed_seconds=elapsed
    )


def prometheus_usage(
    window_seconds: int | None,
    found: Mapping[str, float | int],
    missing: list[str],
    error: str | None = None,
) -> PrometheusUsage:
    """A trial entry's `prometheus`: what Prometheus had (cAdvisor), and what it had not."""
    memory = found.get("memoryWorkingSetBytes")
    return PrometheusUsage(
        window_seconds=window_seconds, cpu_throttled_ratio=found.get("cpuThrottledRatio"),
        memory_working_set_bytes=None if memory is None else int(memory),
        missing=missing or None, error=error,
    )  # fmt: skip


def checked(status: Mapping[str, Any]) -> Mapping[str, Any]:
    """A status document, once it is known to have the typed shape (ValueError if not)."""
    ExperimentStatus.read(status)
    return status
