"""spec.workload: what each task does, and how many tasks a trial runs, for how long they run
or at what rate they arrive; each rule declared beside the fields it spans (cxlab.rules)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from cxlab.experiments.fields import (
    LIMITS,
    MAX_LIST_ITEMS,
    ArrivalProcess,
    ArrivalRate,
    Connection,
    Hold,
    Iterations,
    MaxLag,
    OnBusy,
    ResponseBytes,
    Rtt,
    RunDuration,
    Seed,
    StageDuration,
    Strict,
    Tasks,
    Warmup,
    WorkloadType,
    no_repeats,
)
from cxlab.experiments.spec.examples import arriving, looping, targeted, workload
from cxlab.experiments.target import TargetSpec
from cxlab.rules import Check, Rule
from cxlab_contract.arrivals import RateProfile, Stage
from cxlab_contract.durations import parse_duration

_RUN = LIMITS["duration"]
_STAGE = {"duration": "2s", "target": 10}


class StageSpec(Strict):
    """One stage of a ramping arrival rate (k6's ramping-arrival-rate)."""

    duration: StageDuration
    """How long the rate takes to ramp from the previous stage's target (the first stage's
    from ratePerSecond) to this one's; 0s jumps."""
    target: ArrivalRate
    """Arrivals per second at the stage's end, for the whole trial."""


class ArrivalSpec(Strict):
    """Open-loop load: tasks arrive at a rate for a duration whether or not earlier ones have
    ended, and each task's latency runs from the moment it was due (workloads/CONTRACT.md,
    Duration runs). A trial of N Pods splits the rate: each Pod gets rate / N."""

    rate_per_second: ArrivalRate | None = None
    """Arrivals per second for the whole trial (with stages: the rate the first stage ramps
    from, default 0). Or ratesPerSecond."""
    rates_per_second: (
        Annotated[
            list[ArrivalRate],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            no_repeats("a rate", valid=[5, 10], invalid=[10, 10]),
        ]
        | None
    ) = None
    """Several rates: a matrix axis, to find the largest rate the latency holds at. Or
    ratePerSecond."""
    duration: RunDuration | None = None
    """How long tasks arrive. Or stages."""
    stages: (
        Annotated[list[StageSpec], Field(min_length=1, max_length=LIMITS["stages"].max)] | None
    ) = None
    """A rate that ramps, stage by stage; the trial lasts their sum. Or duration."""
    process: ArrivalProcess = "poisson"
    """poisson (random arrivals: exponential gaps, the arrivals of many independent users and
    the queueing models' assumption) or uniform (evenly spaced, as k6's and wrk2's)."""
    on_busy: OnBusy = "queue"
    """A task that arrives while every worker is busy waits for one (queue) or is dropped and
    counted (drop, k6's dropped iterations)."""
    max_lag: MaxLag = "10ms"
    """The generator is saturated (and the trial left out of knees and recommendations) when
    the p99 of how late it issued arrivals is over this."""
    seed: Seed = 1
    """The seed of poisson's gaps; Pod p of repetition r draws from seed + 65 (r - 1) + p, so
    Pods and repetitions differ and a rerun repeats them."""

    rules = (
        Rule(
            "arrival needs a duration (how long tasks arrive) or stages (which last their sum), "
            "not both",
            holds=lambda a: (a.stages is None) != (a.duration is None),
            cel="has(self.stages) != has(self.duration)",
            valid={"workload": arriving(duration="1s")},
            invalid={"workload": arriving(stages=[{"duration": "1s", "target": 10}])},
        ),
        Rule(
            "arrival: stages set the rate over time; ratesPerSecond cannot sweep it (give "
            "ratePerSecond, the rate they ramp from, or leave it out)",
            holds=lambda a: a.stages is None or a.rates_per_second is None,
            cel="!has(self.stages) || !has(self.ratesPerSecond)",
            valid={"workload": {**arriving(), "arrival": {"stages": [_STAGE]}}},
            invalid={
                "workload": {**arriving(), "arrival": {"ratesPerSecond": [5], "stages": [_STAGE]}}
            },
        ),
        Rule(
            "arrival needs exactly one of ratePerSecond or ratesPerSecond",
            holds=lambda a: (
                a.stages is not None or (a.rate_per_second is None) != (a.rates_per_second is None)
            ),
            cel="has(self.stages) || has(self.ratePerSecond) != has(self.ratesPerSecond)",
            valid={
                "workload": {**arriving(), "arrival": {"ratesPerSecond": [5, 10], "duration": "1s"}}
            },
            invalid={"workload": arriving(ratesPerSecond=[5, 10])},
        ),
        Rule(  # CEL has no sum over a list: cxlab alone adds the stages up
            f"arrival: the stages must last {_RUN.min} to {_RUN.max} in all",
            holds=lambda a: (
                a.stages is None
                or parse_duration(_RUN.min) <= a.run_seconds() <= parse_duration(_RUN.max)
            ),
            found=lambda a: f"they last {a.run_seconds():g}s",
            valid={
                "workload": {**arriving(), "arrival": {"stages": [{**_STAGE, "duration": "24h"}]}}
            },
            invalid={
                "workload": {
                    **arriving(),
                    "arrival": {
                        "stages": [{**_STAGE, "duration": "24h"}, {**_STAGE, "duration": "1s"}]
                    },
                }
            },
        ),
    )

    def run_seconds(self) -> float:
        if self.stages is not None:
            return sum(parse_duration(s.duration) for s in self.stages)
        return parse_duration(self.duration or "0s")

    def rate_axis(self) -> list[float]:
        """The rates of the matrix: the whole trial's, before it is split across Pods."""
        if self.rates_per_second is not None:
            return [float(r) for r in self.rates_per_second]
        return [float(self.rate_per_second or 0)]

    def profile(self, rate: float, pods: int = 1) -> RateProfile:
        """One Pod's share of a trial at `rate`: every rate divided by the Pods."""
        stages = tuple(
            Stage(parse_duration(s.duration), s.target / pods) for s in self.stages or ()
        )
        return RateProfile(rate / pods, stages, parse_duration(self.duration or "0s"))


def _warmup_fits(w: WorkloadSpec) -> bool:
    run = w.run_seconds()
    return w.warmup is None or run is None or parse_duration(w.warmup) < run


def _rtts_once(rtts: list[str]) -> int | None:
    """The index of the first RTT whose time is listed before (50ms and 0.05s are one)."""
    seconds = [parse_duration(r) for r in rtts]
    return next((i for i, s in enumerate(seconds) if s in seconds[:i]), None)


def _rtt_twice(rtts: list[str]) -> str:
    again = _rtts_once(rtts) or 0
    first = next(r for r in rtts if parse_duration(r) == parse_duration(rtts[again]))
    return f"rtts lists {first} twice" + (f", as {rtts[again]}" if first != rtts[again] else "")


# An http workload against the delay target, or a sleep: an RTT is simulated.
def _timed(w: WorkloadSpec) -> bool:
    return w.type == "sleep" or (w.type == "http" and w.target is None)


class WorkloadSpec(Strict):
    """What each task does, and how many tasks a trial runs (or for how long they run, or
    at what rate they arrive)."""

    type: WorkloadType
    """sleep (one RTT per task), http (one GET to the delay target), cpu (a count loop),
    hold (tasks that stay alive: memory per task)."""
    tasks: Tasks | None = None
    """Tasks in every trial: a closed burst, done when the last one ends. Or duration, or
    arrival."""
    duration: RunDuration | None = None
    """A closed loop for a time (k6's constant-VUs): the workers start their next task as
    soon as the last one ends, for this long; the tasks run are then an output. Or tasks, or
    arrival."""
    arrival: ArrivalSpec | None = None
    """Open-loop load at a rate (k6's arrival-rate executors). Or tasks, or duration."""
    warmup: Warmup | None = None
    """Duration runs: the tasks due (a closed loop's: started) in the first this-long are
    left out of the latency figures and the throughput, and reported apart."""
    rtt: Rtt | None = None
    """Round-trip time of each task (sleep, http), e.g. 100ms. Or rtts."""
    rtts: (
        Annotated[
            list[Rtt],
            Field(min_length=1, max_length=MAX_LIST_ITEMS),
            Check(
                "an RTT is listed twice (or the same time written twice)",
                holds=lambda rtts: _rtts_once(rtts) is None,
                cel="self.all(r, self.exists_one(v, duration(v) == duration(r)))",
                found=_rtt_twice,
                valid=["50ms", "0.1s"],
                invalid=["50ms", "0.05s"],
            ),
        ]
        | None
    ) = None
    """Several round-trip times: a matrix axis (sleep, http). Or rtt."""
    iterations: Iterations | None = None
    """Count-loop iterations per task (cpu only)."""
    hold: Hold | None = None
    """How long every task stays alive (hold only)."""
    connection: Connection | None = None
    """http only: a new connection per task (fresh, the default) or one per worker (reuse)."""
    response_bytes: ResponseBytes | None = None
    """http only: bytes in each response body (default 64)."""
    target: TargetSpec | None = None
    """http only: call your own service (an in-cluster Service or a URL) instead of cxlab's
    delay target. Its latency is then measured, not simulated: no rtt or rtts."""

    rules = (
        Rule(
            "workload needs exactly one of tasks (a closed burst), duration (a closed loop for "
            "a time) or arrival (tasks arriving at a rate)",
            holds=lambda w: [w.tasks, w.duration, w.arrival].count(None) == 2,
            cel="(has(self.tasks) ? 1 : 0) + (has(self.duration) ? 1 : 0) + "
            "(has(self.arrival) ? 1 : 0) == 1",
            valid={"workload": looping()},
            invalid={"workload": looping(tasks=10)},
        ),
        Rule(
            "warmup applies to duration runs: workload.duration or arrival",
            holds=lambda w: w.warmup is None or w.run_seconds() is not None,
            cel="!has(self.warmup) || has(self.duration) || has(self.arrival)",
            valid={"workload": looping(warmup="1s")},
            invalid={"workload": workload(rtt="10ms", warmup="1s")},
        ),
        Rule(  # CEL compares with a duration only (it has no sum of stages); cxlab with both.
            # Past its own bound, warmup is refused there alone.
            "warmup must be shorter than the run",
            holds=_warmup_fits,
            cel="!has(self.warmup) || !has(self.duration) || "
            f"duration(self.warmup) > duration('{LIMITS['warmup'].max}') || "
            "duration(self.warmup) < duration(self.duration)",
            found=lambda w: f"warmup {w.warmup}, the run {w.run_seconds():g}s",
            valid={"workload": looping(warmup="1999ms")},
            invalid={"workload": looping(warmup="2s")},
        ),
        Rule(
            "target applies to the http workload only",
            holds=lambda w: w.target is None or w.type == "http",
            cel="!has(self.target) || self.type == 'http'",
            valid={"workload": targeted()},
            invalid={"workload": {**targeted(), "type": "cpu", "iterations": 10}},
        ),
        Rule(
            "target: your service's latency is measured, not simulated: leave rtt and rtts out",
            holds=lambda w: w.target is None or (w.rtt is None and w.rtts is None),
            cel="!has(self.target) || !(has(self.rtt) || has(self.rtts))",
            valid={"workload": targeted()},
            invalid={"workload": {**targeted(), "rtt": "10ms"}},
        ),
        Rule(
            "target: responseBytes is the delay target's: leave it out",
            holds=lambda w: w.target is None or w.response_bytes is None,
            cel="!has(self.target) || !has(self.responseBytes)",
            valid={"workload": targeted()},
            invalid={"workload": {**targeted(), "responseBytes": 10}},
        ),
        Rule(
            "workloads sleep and http need exactly one of rtt or rtts",
            holds=lambda w: not _timed(w) or (w.rtt is None) != (w.rtts is None),
            cel="!(self.type == 'sleep' || (self.type == 'http' && !has(self.target))) || "
            "(has(self.rtt) != has(self.rtts))",
            valid={"workload": workload(rtts=["10ms", "20ms"])},
            invalid={"workload": workload(rtt="10ms", rtts=["20ms"])},
        ),
        Rule(
            "rtt/rtts apply to sleep and http only",
            holds=lambda w: w.type in ("sleep", "http") or (w.rtt is None and w.rtts is None),
            cel="self.type in ['sleep', 'http'] || !(has(self.rtt) || has(self.rtts))",
            valid={"workload": workload(type="cpu", iterations=1000)},
            invalid={"workload": workload(type="cpu", iterations=1000, rtt="10ms")},
        ),
        Rule(
            "iterations is required for cpu and applies to cpu only",
            holds=lambda w: (w.type == "cpu") == (w.iterations is not None),
            cel="(self.type == 'cpu') == has(self.iterations)",
            valid={"workload": workload(type="cpu", iterations=1000)},
            invalid={"workload": workload(type="cpu")},
        ),
        Rule(
            "hold is required for the hold workload and applies to it only",
            holds=lambda w: (w.type == "hold") == (w.hold is not None),
            cel="(self.type == 'hold') == has(self.hold)",
            valid={"workload": workload(type="hold", hold="1s")},
            invalid={"workload": workload(rtt="10ms", hold="1s")},
        ),
        Rule(
            "connection and responseBytes apply to the http workload only",
            holds=lambda w: w.type == "http" or (w.connection is None and w.response_bytes is None),
            cel="self.type == 'http' || !(has(self.connection) || has(self.responseBytes))",
            valid={
                "workload": workload(type="http", rtt="10ms", connection="reuse", responseBytes=128)
            },
            invalid={"workload": workload(rtt="10ms", responseBytes=128)},
        ),
    )

    @property
    def delay_target(self) -> bool:
        """Whether the trials call cxlab's delay target (an http workload without a target)."""
        return self.type == "http" and self.target is None

    def run_seconds(self) -> float | None:
        """How long a duration run lasts; None for a counted one."""
        if self.arrival is not None:
            return self.arrival.run_seconds()
        return parse_duration(self.duration) if self.duration is not None else None

    def rate_axis(self) -> list[float | None]:
        """The arrival-rate axis of the matrix: one None without arrivals."""
        return list(self.arrival.rate_axis()) if self.arrival is not None else [None]

    def rtt_seconds(self) -> list[float | None]:
        """The RTT axis of the matrix: one None for workloads without an RTT."""
        if self.rtts is not None:
            return [parse_duration(r) for r in self.rtts]
        return [parse_duration(self.rtt) if self.rtt is not None else None]
