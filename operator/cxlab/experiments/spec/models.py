"""spec.models, spec.resources and spec.placement: the concurrency models and the worker
counts to try, what each trial Pod gets and where it may run."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, WithJsonSchema

from cxlab import placement
from cxlab.experiments.fields import (
    MAX_LIST_ITEMS,
    Cpu,
    Gomaxprocs,
    Model,
    NodeSelector,
    Pods,
    Quantity,
    SchemaProblems,
    Strict,
    Workers,
    no_repeats,
)
from cxlab.rules import Rule


class ModelSpec(Strict):
    """One concurrency model and the worker counts (and GOMAXPROCS) to try it with."""

    model: Model
    """The concurrency model."""
    workers: Annotated[
        list[Workers],
        Field(min_length=1, max_length=MAX_LIST_ITEMS),
        no_repeats("a worker count", valid=[2, 4], invalid=[2, 2]),
    ] = [0]  # noqa: RUF012 - pydantic copies a default: no list is shared
    """Worker counts to try; 0 = one worker per task."""
    gomaxprocs: (
        Annotated[
            list[Gomaxprocs],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            no_repeats("a gomaxprocs value", valid=[1, 0], invalid=[1, 1]),
        ]
        | None
    ) = None
    """GOMAXPROCS values to try (goroutines only); 0 = the Go default."""
    pods: Annotated[
        list[Pods],
        Field(min_length=1, max_length=MAX_LIST_ITEMS),
        no_repeats("a Pod count", valid=[1, 2], invalid=[2, 2]),
    ] = [1]  # noqa: RUF012 - as above
    """Runner Pods per trial to try (processes locally). A trial of N Pods splits its tasks
    across them (each gets tasks / N, the first tasks mod N one more), starts them together
    at a barrier and merges their Results; workers are per Pod, so it runs N x workers."""
    pool: Literal["onDemand", "prestarted"] | None = None
    """How a pool starts its workers (threads and processes only). threads: onDemand, the
    default, starts a thread when a task is submitted and no thread is idle, as
    concurrent.futures.ThreadPoolExecutor does, so far fewer than W may start; prestarted
    starts all W first (with one worker per task: a thread per task). processes: prestarted
    only, as ProcessPoolExecutor does with Linux's fork."""

    rules = (
        Rule(
            "gomaxprocs applies to goroutines only, not to the Python models",
            holds=lambda m: m.gomaxprocs is None or m.model == "goroutines",
            cel="!has(self.gomaxprocs) || self.model == 'goroutines'",
            found=lambda m: f"model {m.model}",
            valid={"models": [{"model": "asyncio"}, {"model": "goroutines", "gomaxprocs": [1]}]},
            invalid={"models": [{"model": "asyncio"}, {"model": "threads", "gomaxprocs": [1]}]},
        ),
        Rule(
            "pool applies to threads (onDemand or prestarted) and processes (prestarted only, "
            "as ProcessPoolExecutor with fork)",
            holds=lambda m: (
                m.pool is None
                or m.model == "threads"
                or (m.model == "processes" and m.pool == "prestarted")
            ),
            cel="!has(self.pool) || self.model == 'threads' || "
            "(self.model == 'processes' && self.pool == 'prestarted')",
            found=lambda m: f"model {m.model}, pool {m.pool}",
            valid={
                "models": [
                    {"model": "threads", "pool": "prestarted"},
                    {"model": "processes", "pool": "prestarted"},
                ]
            },
            invalid={"models": [{"model": "threads"}, {"model": "processes", "pool": "onDemand"}]},
        ),
        Rule(
            "sequential runs one task at a time: leave workers out",
            holds=lambda m: m.model != "sequential" or m.workers in ([0], [1]),
            cel="self.model != 'sequential' || self.workers == [0] || self.workers == [1]",
            valid={"models": [{"model": "sequential", "workers": [1]}]},
            invalid={"models": [{"model": "sequential", "workers": [2]}]},
        ),
    )

    def gomaxprocs_axis(self) -> list[int | None]:
        if self.model != "goroutines":
            return [None]
        return list(self.gomaxprocs) if self.gomaxprocs is not None else [0]


class Resources(Strict):
    """What each trial Pod gets: whole CPUs (pinned) or a fraction of one, and memory."""

    cpu: Cpu = 1
    """CPUs per trial Pod (requests = limits: Guaranteed QoS). Whole CPUs are pinned by the
    static CPU manager; a fraction (0.5) runs in the node's shared pool, unpinned, and needs
    pinning: preferred."""
    memory: Quantity = "512Mi"
    """Memory per trial Pod (requests = limits); locally only reported."""

    @property
    def whole_cpus(self) -> int | None:
        """The CPUs a trial Pod is pinned to; None for a fraction (the shared pool)."""
        return int(self.cpu) if float(self.cpu).is_integer() else None


def _kubernetes_check(role: str, many: bool) -> AfterValidator:
    """Kubernetes' own schema of a Pod field (cxlab.placement), checked here as the CRD,
    which embeds it, has the apiserver check it."""

    def check(value: Any) -> Any:
        items = enumerate(value) if many else [(None, value)]
        broken = [
            (f"{'' if index is None else f'[{index}]'}{where}", message + " (as in a Pod's spec)")
            for index, item in items
            for where, message in placement.problems(role, item)
        ]
        if broken:
            raise SchemaProblems(broken)
        return value

    return AfterValidator(check)


_SCHEMAS = placement.placement_schemas()
Tolerations = Annotated[
    list[dict[str, Any]],
    Field(max_length=MAX_LIST_ITEMS),
    WithJsonSchema({"type": "array", "maxItems": MAX_LIST_ITEMS, "items": _SCHEMAS["toleration"]}),
    _kubernetes_check("toleration", many=True),
]
Affinity = Annotated[
    dict[str, Any], WithJsonSchema(_SCHEMAS["affinity"]), _kubernetes_check("affinity", False)
]


class Placement(Strict):
    """Where trial Pods may run; passed to the Pod as written, checked with Kubernetes' own
    schemas of a Pod's fields."""

    node_selector: NodeSelector | None = None
    """Node labels a trial Pod requires."""
    tolerations: Tolerations | None = None
    """Tolerations of trial Pods, as in a Pod spec."""
    affinity: Affinity | None = None
    """Affinity of trial Pods, as in a Pod spec."""
