"""spec.service: the system under test as a subject of the experiment. On a cluster, a
Deployment of the experiment's namespace that the operator copies once per variant (the
user's is never changed); locally, a command that cxlab run starts once per variant. The
variants are axes over its Pod template (replicas, resources, the values of environment
variables) and named variants for anything else (another image, other arguments): the
experiment's matrix is the variants times the client's."""

from __future__ import annotations

import dataclasses
import itertools
import shlex
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from cxlab.experiments.fields import (
    DURATION,
    NAME_PATTERN,
    Cpu,
    Image,
    Quantity,
    Strict,
    duration,
    memory_bytes,
    no_repeats,
    repeated,
)
from cxlab.experiments.spec.examples import served
from cxlab.experiments.target import EnvName, ObjectName
from cxlab.rules import Check, Rule

# Variants run one after another, each its own copy: 16 is a day's comparison, not a sweep.
MAX_VARIANTS = 16
# A copy's replicas: a node's worth of Pods for a capacity run.
MAX_REPLICAS = 64
MAX_ENV_AXES = 4
MAX_AXIS_VALUES = 16
MAX_ARGS = 64
MAX_ENV = 32
ARG_MAX_LENGTH = 4096
# A named variant's name goes into trial names, labels and the status: short.
VARIANT_NAME_MAX_LENGTH = 20
DEFAULT_READY_TIMEOUT = "3m"

Replicas = Annotated[int, Field(strict=True, ge=1, le=MAX_REPLICAS)]
VariantName = Annotated[
    str, Field(strict=True, min_length=1, max_length=VARIANT_NAME_MAX_LENGTH, pattern=NAME_PATTERN)
]
Arg = Annotated[str, Field(strict=True, max_length=ARG_MAX_LENGTH)]
Args = Annotated[list[Arg], Field(min_length=1, max_length=MAX_ARGS)]
EnvValue = Annotated[str, Field(strict=True, max_length=ARG_MAX_LENGTH)]
ReadyTimeout = Annotated[str, DURATION, duration("1s", "30m")]
Settle = Annotated[str, DURATION, duration("0s", "5m")]
DEFAULT_SETTLE = "5s"


def _once(what: str, valid: list[Any], invalid: list[Any], key: str = "name") -> Check:
    """A list whose entries' `key` appears once: the CRD names the list, cxlab the value."""

    def keys(items: list[Any]) -> list[Any]:
        return [getattr(item, key) for item in items]

    return Check(
        f"{what} is listed twice",
        holds=lambda items: repeated(keys(items)) is None,
        cel=f"self.all(e, self.exists_one(f, f.{key} == e.{key}))",
        found=lambda items: f"{keys(items)[repeated(keys(items)) or 0]}",
        valid=valid,
        invalid=invalid,
    )


class EnvVar(Strict):
    """One environment variable a named variant sets in the container."""

    name: EnvName
    """The variable's name."""
    value: EnvValue
    """Its value (over the Deployment's own, if it sets one)."""


class EnvAxis(Strict):
    """An axis of variants: one environment variable and the values it takes, one a variant."""

    name: EnvName
    """The variable's name."""
    values: Annotated[
        list[EnvValue],
        Field(min_length=1, max_length=MAX_AXIS_VALUES),
        no_repeats("a value", valid=["2", "4"], invalid=["2", "2"]),
    ]
    """Its values: a variant each."""


class VariantResources(Strict):
    """A variant's CPU and memory for the service's container: requests = limits, so the
    CPU limit throttles it as it would in production (status says how often)."""

    cpu: Cpu | None = None
    """CPUs (0.5 is 500m); unset: the Deployment's."""
    memory: Quantity | None = None
    """Memory; unset: the Deployment's."""

    rules = (
        Rule(
            "service.variants.resources[]: give cpu, memory or both",
            holds=lambda r: r.cpu is not None or r.memory is not None,
            cel="has(self.cpu) || has(self.memory)",
            valid=served(variants={"resources": [{"cpu": 1}]}),
            invalid=served(variants={"resources": [{}]}),
        ),
    )

    def label(self) -> str:
        parts = []
        if self.cpu is not None:
            parts.append(f"cpu{self.cpu:g}")
        if self.memory is not None:
            parts.append(f"mem{self.memory}")
        return "-".join(parts)


_ENV = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]


class NamedVariant(Strict):
    """A variant by name: what the axes cannot say (another image, other arguments)."""

    name: VariantName
    """Its name in trial names, the report and the status (a DNS label of at most 20)."""
    image: Image | None = None
    """Another image for the container (another release: an A/B of two tags); locally
    refused (cxlab run starts a command)."""
    command: Args | None = None
    """The container's command instead of the Deployment's; locally the process's, instead
    of service.command."""
    args: Args | None = None
    """The container's arguments instead of the Deployment's (as a Pod's args replace an
    image's CMD); locally appended to the command."""
    env: (
        Annotated[
            list[EnvVar],
            Field(min_length=1, max_length=MAX_ENV),
            _once("an environment variable", _ENV, [_ENV[0], {"name": "A", "value": "2"}]),
        ]
        | None
    ) = None
    """Variables set in the container, over the Deployment's own."""


class Variants(Strict):
    """Axes over the service's Pod template; each variant is one value of every axis given
    (their product), and each named variant is crossed with them."""

    replicas: (
        Annotated[
            list[Replicas],
            Field(min_length=1, max_length=MAX_AXIS_VALUES),
            no_repeats("a replica count", valid=[1, 2], invalid=[2, 2]),
        ]
        | None
    ) = None
    """Replica counts; unset: the Deployment's own."""
    resources: (
        Annotated[list[VariantResources], Field(min_length=1, max_length=MAX_AXIS_VALUES)] | None
    ) = None
    """CPU and memory of the service's container, a variant each."""
    env: (
        Annotated[
            list[EnvAxis],
            Field(min_length=1, max_length=MAX_ENV_AXES),
            _once(
                "an environment variable",
                [{"name": "A", "values": ["1"]}, {"name": "B", "values": ["1"]}],
                [{"name": "A", "values": ["1"]}, {"name": "A", "values": ["2"]}],
            ),
        ]
        | None
    ) = None
    """Environment variables and their values: each value a variant."""
    named: (
        Annotated[
            list[NamedVariant],
            Field(min_length=1, max_length=MAX_VARIANTS),
            _once("a variant name", [{"name": "a"}, {"name": "b"}], [{"name": "a"}] * 2),
        ]
        | None
    ) = None
    """Variants by name, each crossed with the axes above."""

    def count(self) -> int:
        sizes = [len(self.replicas or [0]), len(self.resources or [0]), len(self.named or [0])]
        sizes += [len(axis.values) for axis in self.env or ()]
        return _product(sizes)

    def labels(self) -> list[str]:
        """Each resources entry's label, as in a variant's name."""
        return [r.label() for r in self.resources or ()]


def _product(sizes: list[int]) -> int:
    total = 1
    for size in sizes:
        total *= size
    return total


def variant_count_cel(service: str = "self") -> str:
    """The variants' count in CEL: the axes' sizes multiplied (env unrolled: CEL has no
    product over a list)."""
    variants = f"{service}.variants"
    sizes = [
        f"(has({variants}.{axis}) ? size({variants}.{axis}) : 1)"
        for axis in ("replicas", "resources", "named")
    ]
    sizes += [
        f"(has({variants}.env) && size({variants}.env) > {i} ? "
        f"size({variants}.env[{i}].values) : 1)"
        for i in range(MAX_ENV_AXES)
    ]
    return f"(has({service}.variants) ? " + " * ".join(sizes) + " : 1)"


@dataclass(frozen=True)
class Variant:
    """One variant as the operator and cxlab run apply it: the changes to the service's Pod
    template (None: the Deployment's own, or service.command's)."""

    index: int  # 1-based, in run order
    name: str  # "sync-2-r1", or "default" without variants
    replicas: int | None = None
    cpu: float | None = None
    memory: str | None = None
    image: str | None = None
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory is None else memory_bytes(self.memory)

    @property
    def base(self) -> str:
        """The name without its replica count: sync-4 of sync-4-r2, the variant a service
        plan sizes from its counts."""
        if self.replicas is None:
            return self.name
        parts = [p for p in self.name.split("-") if p != f"r{self.replicas}"]
        return "-".join(parts) or "default"

    def scaled(self, index: int, replicas: int) -> Variant:
        """This variant at `replicas`, as the copy `index` (a service plan's verification)."""
        return dataclasses.replace(self, index=index, replicas=replicas,
                                   name=f"{self.base}-r{replicas}")  # fmt: skip

    def changes(self) -> str:
        """What the variant changes, in words: 'replicas 2, cpu 0.5, args [...]'."""
        said = [f"replicas {self.replicas}"] if self.replicas is not None else []
        said += [f"cpu {self.cpu:g}"] if self.cpu is not None else []
        said += [f"memory {self.memory}"] if self.memory is not None else []
        said += [f"image {self.image}"] if self.image is not None else []
        said += [f"command {shlex.join(self.command)}"] if self.command else []
        said += [f"args {shlex.join(self.args)}"] if self.args else []
        said += [f"{name}={shlex.quote(value)}" for name, value in self.env]
        return ", ".join(said) or "as it is"


# Every axis at once, 16 variants: 2 named x 2 replica counts x 1 resources x 4 values.
_SIXTEEN = {
    "named": [
        {"name": "a", "args": ["-w", "2"], "command": ["serve"], "image": "app:2",
         "env": [{"name": "A", "value": "1"}]},
        {"name": "b"},
    ],
    "replicas": [1, 2],
    "resources": [{"cpu": 1, "memory": "256Mi"}],
    "env": [{"name": "A", "values": ["1", "2", "3", "4"]}],
}  # fmt: skip


class ServiceSubject(Strict):
    """The system under test: the user's Deployment (on a cluster) or a command (cxlab run),
    run once per variant, with the workload's target pointed at the variant's own copy."""

    deployment: ObjectName | None = None
    """A Deployment of the experiment's namespace: each variant runs as a copy of it (owned
    by the experiment, behind a Service of its own); the user's is read, never changed.
    Needs workload.target.service, the user's Service in front of it, whose ports and path
    the load keeps."""
    container: ObjectName | None = None
    """The container the variants change; unset: the Pod template's first."""
    command: Args | None = None
    """cxlab run's counterpart of the Deployment: the service's command, started once per
    variant on cores of its own and ready when the target answers. A cluster refuses it."""
    ready_timeout: ReadyTimeout = DEFAULT_READY_TIMEOUT
    """How long a variant may take to be Ready (every replica) before it ends, with the
    Pods' own reason (ImagePullBackOff, CrashLoopBackOff, Unschedulable ...)."""
    settle: Settle = DEFAULT_SETTLE
    """On a cluster, how long every replica of a copy stays Ready before its first trial:
    what a service does after its readiness probe passes (gunicorn's workers import the app
    once its master listens: 3-4 s of backlog at 150/s on a fresh 3-replica copy) is not
    what the first trial measures. Locally cxlab run waits for the process tree's CPU to
    settle instead (at most 30 s)."""
    variants: Variants | None = None
    """Axes and named variants; unset: one variant, the Deployment (or command) as it is."""

    rules = (
        Rule(
            "spec.service needs exactly one of deployment (a cluster) and command (cxlab run)",
            holds=lambda s: (s.deployment is None) != (s.command is None),
            cel="has(self.deployment) != has(self.command)",
            valid=served(),
            invalid=served(deployment=None),  # neither (both: a cluster refuses command too)
        ),
        Rule(  # a cluster's rule alone: cxlab run starts the command itself
            "service.command is what cxlab run starts: on a cluster name the Deployment "
            "(service.deployment)",
            holds=None,
            cel="!has(self.command)",
            valid=served(),
            invalid=served(deployment=None, command=["gunicorn", "app:app"]),
        ),
        Rule(
            f"service.variants may make at most {MAX_VARIANTS} variants (the product of the "
            f"axes' sizes, and the named ones): split the experiment",
            holds=lambda s: s.variants is None or s.variants.count() <= MAX_VARIANTS,
            cel=f"{variant_count_cel()} <= {MAX_VARIANTS}",
            found=lambda s: f"they make {s.variants.count() if s.variants else 1}",
            valid=served(variants=_SIXTEEN),
            invalid=served(variants={**_SIXTEEN, "replicas": [1, 2, 3]}),
        ),
    )

    def copy_variant(self, index: int, base: str, replicas: int) -> Variant:
        """The copy `index` past the variants (a verification of the service's plan): the
        first variant named `base` without its replica count, at `replicas`."""
        chosen = next((v for v in self.variant_list() if v.base == base), None)
        if chosen is None:
            raise ValueError(f"service.variants has no variant {base!r}")
        return chosen.scaled(index, replicas)

    def variant_list(self) -> list[Variant]:
        """Every variant in run order: named outermost, then replicas, resources and env."""
        axes = self.variants or Variants()
        named: list[NamedVariant | None] = list(axes.named) if axes.named else [None]
        replicas: list[int | None] = list(axes.replicas) if axes.replicas else [None]
        resources: list[VariantResources | None] = (
            list(axes.resources) if axes.resources else [None]
        )
        envs = list(itertools.product(*[[(a.name, v) for v in a.values] for a in axes.env or ()]))
        found: list[Variant] = []
        for one, count, sized in itertools.product(named, replicas, resources):
            for env in envs:
                found.append(_variant(len(found) + 1, one, count, sized, env))
        return found


def _variant(
    index: int,
    one: NamedVariant | None,
    count: int | None,
    sized: VariantResources | None,
    env: tuple[tuple[str, str], ...],
) -> Variant:
    parts = [one.name] if one else []
    parts += [f"r{count}"] if count is not None else []
    parts += [sized.label()] if sized else []
    parts += [f"{name}={value}" for name, value in env]
    own = tuple((e.name, e.value) for e in one.env or ()) if one else ()
    return Variant(
        index=index,
        name="-".join(parts) or "default",
        replicas=count,
        cpu=sized.cpu if sized else None,
        memory=sized.memory if sized else None,
        image=one.image if one else None,
        command=tuple(one.command) if one and one.command else None,
        args=tuple(one.args) if one and one.args else None,
        env=own + env,
    )
