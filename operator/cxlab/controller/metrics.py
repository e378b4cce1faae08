"""The operator's own Prometheus metrics, on a registry of its own (names follow the
runners': cxlab_ prefix, base units, _total counters)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cxlab.analysis.service_figures import ServiceFigures
from cxlab.conditions import condition_of
from cxlab.experiments.status import ObjectiveStatus, Phase, Verdict
from cxlab.schedules.history import COMPARED, newest_succeeded
from cxlab.schedules.status import ScheduleStatus

PHASES = tuple(Phase)


class _PhaseCollector(Collector):
    """Experiments by phase, counted at scrape time from what the reconciler last saw."""

    def __init__(self, phases: dict[tuple[str, str], Phase]) -> None:
        self._phases = phases

    def collect(self) -> Iterator[Metric]:
        counts = Tally(self._phases.values())
        family = GaugeMetricFamily(
            "cxlab_operator_experiments", "Experiments by phase.", labels=["phase"]
        )
        for phase in PHASES:
            family.add_metric([phase], counts.get(phase, 0))
        yield family


class _QueueCollector(Collector):
    """The queue for capacity at scrape time: its length and its oldest wait."""

    def __init__(self, queued: dict[tuple[str, str], datetime]) -> None:
        self._queued = queued

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "cxlab_operator_queue_length",
            "Experiments waiting for capacity (phase Pending, condition Queued).",
            value=len(self._queued),
        )
        now = datetime.now(UTC)
        waits = [(now - since).total_seconds() for since in list(self._queued.values())]
        yield GaugeMetricFamily(
            "cxlab_operator_queue_oldest_wait_seconds",
            "How long the longest-waiting experiment has waited (0 with none waiting).",
            value=max(waits, default=0.0),
        )


# Two unnamed objectives can share a name (the same metric and bound over other scopes): the
# series of that name says what the worst of them says, as the ObjectivesMet condition would.
_WORST: dict[Verdict, int] = {"Broken": 0, "Inconclusive": 1, "Met": 2}


def objective_verdicts(objectives: list[ObjectiveStatus]) -> dict[str, Verdict]:
    """Each objective's verdict by name, as its series are labelled."""
    found: dict[str, Verdict] = {}
    for objective in objectives:
        seen = found.get(objective.name, objective.verdict)
        found[objective.name] = min(seen, objective.verdict, key=_WORST.__getitem__)
    return found


class _ObjectiveCollector(Collector):
    """Each finished experiment's objectives (status.objectives), as the reconciler last saw
    them. Inconclusive is not a value of the met gauge: -1 would read as worse than broken to
    min(), avg() and `< 1`, and 0 as broken. So the met gauge is a true 0/1 where the
    measurements decided, absent where they could not (the condition's Unknown), and the
    inconclusive gauge is 0/1 for every objective, so each one always has a series (Prometheus'
    "avoid missing metrics"), as kube-state-metrics gives a condition's unknown status a 0/1
    series of its own."""

    def __init__(self, objectives: dict[tuple[str, str], dict[str, Verdict]]) -> None:
        self._objectives = objectives

    def collect(self) -> Iterator[Metric]:
        labels = ["namespace", "name", "objective"]
        met = GaugeMetricFamily(
            "cxlab_experiment_objective_met",
            "1 when a finished experiment met the objective, 0 when it broke it; absent while "
            "its verdict is Inconclusive (cxlab_experiment_objective_inconclusive 1).",
            labels=labels,
        )
        inconclusive = GaugeMetricFamily(
            "cxlab_experiment_objective_inconclusive",
            "1 when the repetitions could not tell whether a finished experiment met the "
            "objective (its interval straddles the bound, or nothing was measured), else 0.",
            labels=labels,
        )
        for (namespace, name), found in list(self._objectives.items()):
            for objective, verdict in found.items():
                series = [namespace, name, objective]
                inconclusive.add_metric(series, float(verdict == "Inconclusive"))
                if verdict != "Inconclusive":
                    met.add_metric(series, float(verdict == "Met"))
        yield from (met, inconclusive)


# The service's figures (spec.service) as gauges: name, help, the ServiceFigures field.
SERVICE_GAUGES = (
    ("cxlab_service_cpu_seconds", "The service's CPU over its latest trial (its copy's "
     "containers on a cluster, its process tree locally).", "cpu_seconds"),
    ("cxlab_service_cpu_per_request_seconds", "The service's CPU per request the latest "
     "trial completed.", "cpu_per_request_seconds"),
    ("cxlab_service_peak_memory_bytes", "The service's largest working set sampled over its "
     "latest trial.", "peak_memory_bytes"),
    ("cxlab_service_cpu_throttled_ratio", "CFS periods throttled over CFS periods of the "
     "service's containers in its latest trial (with a CPU limit).", "cpu_throttled_ratio"),
    ("cxlab_service_restarts", "The service's container restarts in its latest trial.",
     "restarts"),
    ("cxlab_service_oom_kills", "The service's containers OOMKilled in its latest trial.",
     "oom_kills"),
)  # fmt: skip


class _ServiceCollector(Collector):
    """Each experiment's service figures (spec.service), of the latest trial recorded per
    variant and client model (the summary's lines: bounded, at most 16 variants); a figure
    not measured has no series, never a 0."""

    def __init__(self, figures: dict[tuple[str, str], dict[str, ServiceFigures]]) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        labels = ["namespace", "name", "variant"]
        families = [(GaugeMetricFamily(n, h, labels=labels), f) for n, h, f in SERVICE_GAUGES]
        for (namespace, name), variants in list(self._figures.items()):
            for variant, figures in list(variants.items()):
                for family, field in families:
                    value = getattr(figures, field)
                    if value is not None:
                        family.add_metric([namespace, name, variant], float(value))
        yield from (family for family, _ in families)


def refusal(status: ScheduleStatus) -> str | None:
    """Why the schedule starts no runs, from its conditions: the apiserver refused its newest
    run (RunRefused True) or its spec cannot run (Ready False, InvalidSpec); None if neither."""
    refused = condition_of(status.conditions, "RunRefused")
    if refused is not None and refused.true:
        return "RunRefused"
    ready = condition_of(status.conditions, "Ready")
    if ready is not None and ready.status == "False" and ready.reason == "InvalidSpec":
        return "InvalidSpec"
    return None


class _ScheduleCollector(Collector):
    """Every schedule as its last pass wrote it: the runs it started, skipped and missed, its
    capacity plan, whether it regressed or is refused, and its newest run's medians per point
    (the capacity dashboard draws them over time). Bounded: points and metrics come from the
    template."""

    def __init__(self, schedules: dict[tuple[str, str], ScheduleStatus]) -> None:
        self._schedules = schedules

    def collect(self) -> Iterator[Metric]:
        key = ["namespace", "schedule"]
        runs = GaugeMetricFamily(
            "cxlab_schedule_runs", "Runs by what became of their slot.", labels=[*key, "outcome"]
        )
        regressed = GaugeMetricFamily(
            "cxlab_schedule_regressed", "1 while the newest run regressed.", labels=key
        )
        refused = GaugeMetricFamily(
            "cxlab_schedule_refused",
            "1 while the schedule starts no runs: the apiserver refused the newest (reason "
            "RunRefused) or the spec cannot run (InvalidSpec); 0 with no reason otherwise.",
            labels=[*key, "reason"],
        )
        pods = GaugeMetricFamily(
            "cxlab_schedule_capacity_pods",
            "Pods the capacity plan needs, per model that meets the objective.",
            labels=[*key, "variant", "chosen"],
        )
        cores = GaugeMetricFamily(
            "cxlab_schedule_capacity_cores", "Cores the capacity plan needs, per model.",
            labels=[*key, "variant", "chosen"],
        )  # fmt: skip
        grew = GaugeMetricFamily(
            "cxlab_schedule_capacity_pods_change",
            "Pods the newest plan needs minus those the succeeded run before it planned "
            "(over 0: the plan grew, a PlanGrew event).",
            labels=key,
        )
        values = GaugeMetricFamily(
            "cxlab_schedule_point_value",
            "The newest succeeded run's median of each compared metric, per point.",
            labels=[*key, "point", "metric"],
        )
        for (namespace, name), status in list(self._schedules.items()):
            counted = {"started": status.started_runs, "skipped": status.skipped_runs,
                       "missed": status.missed_runs, "replaced": status.replaced_runs}  # fmt: skip
            for outcome, count in counted.items():
                runs.add_metric([namespace, name, outcome], count or 0)
            regressed.add_metric([namespace, name], float(bool(status.regressed)))
            why = refusal(status)
            refused.add_metric([namespace, name, why or ""], float(why is not None))
            plan = status.capacity_plan
            for model in plan.models if plan else []:
                if model.meets and plan is not None:
                    chosen = str(model.variant == plan.choice).lower()
                    labels = [namespace, name, model.variant, chosen]
                    pods.add_metric(labels, model.pods or 0)
                    cores.add_metric(labels, model.cores or 0)
            if plan is not None and plan.pods is not None and plan.previous_pods is not None:
                grew.add_metric([namespace, name], plan.pods - plan.previous_pods)
            newest = newest_succeeded(status.history or [])
            for point in newest.points or [] if newest else []:
                written = point.document()  # the metrics by the names the dashboards know
                for metric in COMPARED:
                    if metric in written:
                        values.add_metric([namespace, name, point.point, metric], written[metric])
        yield from (runs, regressed, refused, pods, cores, grew, values)


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.phases: dict[tuple[str, str], Phase] = {}
        self.registry.register(_PhaseCollector(self.phases))
        self.queued: dict[tuple[str, str], datetime] = {}  # waiting experiments: since when
        self.registry.register(_QueueCollector(self.queued))
        self.objectives: dict[tuple[str, str], dict[str, Verdict]] = {}  # finished experiments
        self.registry.register(_ObjectiveCollector(self.objectives))
        self.schedules: dict[tuple[str, str], ScheduleStatus] = {}
        self.registry.register(_ScheduleCollector(self.schedules))
        # spec.service: (namespace, name) → the summary's line → its latest trial's figures
        self.service: dict[tuple[str, str], dict[str, ServiceFigures]] = {}
        self.registry.register(_ServiceCollector(self.service))
        self._pass_metrics()
        self.api_requests = Counter(
            "cxlab_operator_api_requests",
            "Requests the operator sent the apiserver, by verb (its reconciler's and the Events"
            " it posts; the watches and kopf's finalizer patches are not counted).",
            ["verb"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "cxlab_operator_leader",
            "1 while this replica is the active one (holds the Lease), 0 while it stands by.",
            registry=self.registry,
        )

    def _pass_metrics(self) -> None:
        """What the passes do: trials started and recorded, passes, scrapes, queue waits."""
        registry = self.registry
        self.trials_started = Counter(
            "cxlab_operator_trials_started", "Trial Pods created.", registry=registry
        )
        self.trials_finished = Counter(
            "cxlab_operator_trials_finished",
            "Trials recorded in status, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.copy_ready = Histogram(
            "cxlab_operator_service_copy_ready_seconds",
            "From a service variant's copy made to every replica Ready (spec.service).",
            buckets=(0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300),
            registry=registry,
        )
        self.copy_deletion = Histogram(
            "cxlab_operator_service_copy_deletion_seconds",
            "From a service variant's copy deleted to its Deployment and Pods gone.",
            buckets=(0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120),
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "cxlab_operator_reconcile_errors", "Reconcile passes that raised.", registry=registry
        )
        self.reconcile_duration = Histogram(
            "cxlab_operator_reconcile_duration_seconds",
            "Time of one reconcile pass over one experiment.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=registry,
        )
        self.scrapes = Counter(
            "cxlab_operator_trial_scrapes",
            "Reads of running trials' /metrics, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.scrape_duration = Histogram(
            "cxlab_operator_trial_scrape_duration_seconds",
            "Time to read one running trial's /metrics.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=registry,
        )
        self.queue_wait = Histogram(
            "cxlab_operator_queue_wait_seconds",
            "How long experiments waited for capacity before their first trial started.",
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200),
            registry=registry,
        )
        self.status_writes = Counter(
            "cxlab_operator_status_writes", "Status writes to experiments.", registry=registry
        )
        for outcome in ("succeeded", "failed", "skipped"):
            self.trials_finished.labels(outcome)
        for outcome in ("ok", "error"):
            self.scrapes.labels(outcome)

    def observe_objectives(
        self, namespace: str, name: str, objectives: list[ObjectiveStatus] | None
    ) -> None:
        """A finished experiment's status.objectives (none: no series)."""
        self.objectives[(namespace, name)] = objective_verdicts(objectives or [])

    def observe_schedule(self, namespace: str, name: str, status: ScheduleStatus) -> None:
        self.schedules[(namespace, name)] = status

    def serve(self, port: int) -> None:
        start_http_server(port, addr="0.0.0.0", registry=self.registry)
