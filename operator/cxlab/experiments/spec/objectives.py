"""spec.objectives: what the measurements must show, each an objective over one metric of
the Result, its bound and the points it applies to (cxlab.analysis.objectives judges them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from cxlab.experiments.fields import (
    MAX_LIST_ITEMS,
    DroppedCount,
    LatencyObjective,
    Model,
    ObjectiveMemory,
    ObjectiveName,
    ObjectiveTime,
    Share,
    Strict,
    Throughput,
    Workers,
    no_repeats,
    repeated,
)
from cxlab.experiments.spec.examples import arriving, looping
from cxlab.experiments.spec.limits import MAX_MODELS, MAX_OBJECTIVES
from cxlab.rules import Check, Rule

_LATENCY = {"latency": {"max": "1s"}}


class LatencyBound(Strict):
    """A task latency percentile's most."""

    percentile: Literal["p50", "p90", "p99", "max"] = "p99"
    """The Result's percentile (latencySeconds): from the intended start for arrivals."""
    max: LatencyObjective
    """The most it may be, e.g. 250ms."""


class ShareAtMost(Strict):
    max: Share
    """The largest share allowed, 0 to 1 (0.01: one task in a hundred)."""


class ShareAtLeast(Strict):
    min: Share
    """The smallest share allowed, 0 to 1."""


class ThroughputAtLeast(Strict):
    min: Throughput
    """Tasks completed per second, at least (the Result's throughputPerSecond)."""


class TimeAtMost(Strict):
    max: ObjectiveTime
    """The longest allowed, e.g. 2ms."""


class MemoryAtMost(Strict):
    max: ObjectiveMemory
    """The most allowed, e.g. 256Mi."""


class CountAtMost(Strict):
    max: DroppedCount
    """The most allowed per trial (0: none)."""


# An objective's metric fields, as the spec spells them; each objective sets exactly one.
OBJECTIVE_METRICS = (
    "latency", "failureRatio", "throughput", "efficiency", "cpuPerTask", "peakRss",
    "startSkew", "dropped",
)  # fmt: skip
# Metrics that only grow with load (more workers of a closed run, a higher rate of an arrival
# run): a point that breaks its bound says the same of every point with more load.
GROWS_WITH_LOAD = ("latency", "failureRatio", "cpuPerTask", "peakRss", "startSkew", "dropped")


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


class Objective(Strict):
    """What every point in scope must measure (k6's thresholds, Argo Rollouts' success
    conditions): one metric of the Result, its bound, where it applies. Judged over each
    point's repetitions: met when the 95 % interval of their mean is within the bound, broken
    when it is beyond, unknown when it straddles (one repetition: its value decides)."""

    name: ObjectiveName | None = None
    """How messages and the table name it; unset: the metric and its bound."""
    latency: LatencyBound | None = None
    """A latency percentile's most (max: 250ms, percentile p99 by default)."""
    failure_ratio: ShareAtMost | None = None
    """Failed tasks over all tasks, at most."""
    throughput: ThroughputAtLeast | None = None
    """Tasks completed per second, at least."""
    efficiency: ShareAtLeast | None = None
    """The floor over the wall time, at least (a counted run: workload.tasks)."""
    cpu_per_task: TimeAtMost | None = None
    """CPU time (user + system) per task, at most."""
    peak_rss: MemoryAtMost | None = None
    """The runner's peak resident memory, at most."""
    start_skew: TimeAtMost | None = None
    """How far apart a trial's Pods started, at most (trials of several Pods)."""
    dropped: CountAtMost | None = None
    """Arrivals dropped per trial, at most (workload.arrival with onBusy: drop)."""
    scope: Literal["every", "recommended"] = "every"
    """every: each point of the matrix (narrowed by models and workers); recommended: the
    points status.summary recommends."""
    models: (
        Annotated[
            list[Model],
            Field(min_length=1, max_length=MAX_MODELS),
            no_repeats("a model", valid=["threads"], invalid=["threads", "threads"]),
        ]
        | None
    ) = None
    """Only the points of these models (each of spec.models)."""
    workers: (
        Annotated[
            list[Workers],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            no_repeats("a worker count", valid=[2], invalid=[2, 2]),
        ]
        | None
    ) = None
    """Only the points of these worker counts (each in a scoped model's workers)."""
    abort_on_fail: bool = False
    """Once a point surely breaks it, skip the trials that can only be worse: more workers of
    the same model, Pods and RTT (a counted or closed run), or higher rates (an arrival run).
    Not for throughput and efficiency, which do not only worsen with load."""

    rules = (
        Rule(
            f"an objective needs exactly one metric: one of {', '.join(OBJECTIVE_METRICS)}",
            holds=lambda o: len(o.metrics()) == 1,
            cel=" + ".join(f"(has(self.{m}) ? 1 : 0)" for m in OBJECTIVE_METRICS) + " == 1",
            valid={"objectives": [_LATENCY]},
            invalid={"objectives": [{**_LATENCY, "peakRss": {"max": "1Gi"}}]},
        ),
        Rule(
            "scope recommended judges the recommended points themselves: leave models and "
            "workers out, or use scope every",
            holds=lambda o: o.scope != "recommended" or not (o.models or o.workers),
            cel="self.scope != 'recommended' || !(has(self.models) || has(self.workers))",
            valid={"objectives": [{**_LATENCY, "scope": "recommended"}]},
            invalid={"objectives": [{**_LATENCY, "scope": "recommended", "workers": [2]}]},
        ),
        Rule(
            "abortOnFail: the recommended point is known only at the end; use scope every",
            holds=lambda o: not (o.abort_on_fail and o.scope == "recommended"),
            cel="!self.abortOnFail || self.scope != 'recommended'",
            valid={"objectives": [{**_LATENCY, "abortOnFail": True}]},
            invalid={"objectives": [{**_LATENCY, "scope": "recommended", "abortOnFail": True}]},
        ),
        Rule(
            "abortOnFail: throughput and efficiency do not only worsen with load, so a breach "
            "at one point says nothing of the next: leave abortOnFail out",
            holds=lambda o: not o.abort_on_fail or o.metric in GROWS_WITH_LOAD,
            cel="!self.abortOnFail || !(has(self.throughput) || has(self.efficiency))",
            valid={"objectives": [{"throughput": {"min": 10}}]},
            invalid={"objectives": [{"throughput": {"min": 10}, "abortOnFail": True}]},
        ),
    )

    def metrics(self) -> list[str]:
        return [m for m in OBJECTIVE_METRICS if getattr(self, _snake(m)) is not None]

    @property
    def metric(self) -> str:
        return self.metrics()[0]


def _names(objectives: list[Objective]) -> list[str]:
    """The names given (None stands for every unnamed one, each apart)."""
    return [o.name if o.name is not None else f"\0{i}" for i, o in enumerate(objectives)]


Objectives = Annotated[
    list[Objective],
    Field(min_length=1, max_length=MAX_OBJECTIVES),
    Check(
        "an objective name is listed twice",
        holds=lambda objectives: repeated(_names(objectives)) is None,
        cel="self.all(o, !has(o.name) || self.exists_one(p, has(p.name) && p.name == o.name))",
        found=lambda objectives: f"{_names(objectives)[repeated(_names(objectives)) or 0]!r}",
        valid=[{"name": "a", **_LATENCY}, {"name": "b", "latency": {"max": "2s"}}],
        invalid=[{"name": "a", **_LATENCY}, {"name": "a", "latency": {"max": "2s"}}],
    ),
]


def _scoped(spec: Any, objective: Objective) -> list[Any]:
    return [m for m in spec.models if objective.models is None or m.model in objective.models]


def _unknown_model(spec: Any) -> str | None:
    names = {m.model for m in spec.models}
    return next((m for o in spec.objectives or () for m in o.models or () if m not in names), None)


def _unknown_workers(spec: Any) -> int | None:
    return next(
        (w for o in spec.objectives or () for w in o.workers or ()
         if not any(w in m.workers for m in _scoped(spec, o))),
        None,
    )  # fmt: skip


def _uses(spec: Any, metric: str) -> bool:
    return any(getattr(o, metric) is not None for o in spec.objectives or ())


# The rules of the whole spec about what its objectives name (ExperimentSpec carries them).
ACROSS_THE_SPEC = (
    Rule(
        "objectives[].models must name models of spec.models",
        holds=lambda s: _unknown_model(s) is None,
        cel="!has(self.objectives) || self.objectives.all(o, !has(o.models) || "
        "o.models.all(m, self.models.exists(x, x.model == m)))",
        found=lambda s: f"{_unknown_model(s)} is not one",
        valid={"objectives": [{**_LATENCY, "models": ["threads"]}]},
        invalid={"objectives": [{**_LATENCY, "models": ["asyncio"]}]},
    ),
    Rule(
        "objectives[].workers must name worker counts of the models in the objective's scope",
        holds=lambda s: _unknown_workers(s) is None,
        cel="!has(self.objectives) || self.objectives.all(o, !has(o.workers) || "
        "o.workers.all(w, self.models.exists(x, (!has(o.models) || x.model in o.models) && "
        "(has(x.workers) ? w in x.workers : w == 0))))",
        found=lambda s: f"{_unknown_workers(s)} is not one",
        valid={"objectives": [{**_LATENCY, "workers": [2]}]},
        invalid={"objectives": [{**_LATENCY, "workers": [3]}]},
    ),
    Rule(
        "objectives[].dropped: only arrivals are dropped (workload.arrival)",
        holds=lambda s: s.workload.arrival is not None or not _uses(s, "dropped"),
        cel="!has(self.objectives) || has(self.workload.arrival) || "
        "self.objectives.all(o, !has(o.dropped))",
        valid={"workload": arriving(), "objectives": [{"dropped": {"max": 0}}]},
        invalid={"objectives": [{"dropped": {"max": 0}}]},
    ),
    Rule(
        "objectives[].efficiency: a run for a time has no floor, so no efficiency: use "
        "workload.tasks, or another metric",
        holds=lambda s: s.workload.tasks is not None or not _uses(s, "efficiency"),
        cel="!has(self.objectives) || has(self.workload.tasks) || "
        "self.objectives.all(o, !has(o.efficiency))",
        valid={"objectives": [{"efficiency": {"min": 0.5}}]},
        invalid={"workload": looping(), "objectives": [{"efficiency": {"min": 0.5}}]},
    ),
    Rule(
        "objectives[].startSkew: every trial runs one Pod, which has no start skew: give a "
        "model pods above 1",
        holds=lambda s: not _uses(s, "start_skew") or any(p > 1 for m in s.models for p in m.pods),
        cel="!has(self.objectives) || self.objectives.all(o, !has(o.startSkew)) || "
        "self.models.exists(x, has(x.pods) && x.pods.exists(p, p > 1))",
        valid={
            "models": [{"model": "threads", "workers": [2], "pods": [2]}],
            "objectives": [{"startSkew": {"max": "10ms"}}],
        },
        invalid={"objectives": [{"startSkew": {"max": "10ms"}}]},
    ),
)
