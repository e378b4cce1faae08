"""`make bench-plan`: does a capacity plan hold when it is run? For three service-time shapes
of the same 50 ms mean, the plan's predictions for its own workers at the target rate beside
what a run of exactly those workers measures.

Per shape:
1. Measure, as an experiment's trial would: a closed burst of 64 workers over 3,000 tasks whose
   asyncio sleeps are drawn from the shape. Its throughput, latency percentiles and histogram
   become a one-point Result, and cxlab's own planner (capacity_plan) plans R tasks/s with it.
2. Run one planned Pod: Poisson arrivals at R / Pods for 20 s, first come first served by the
   planned workers (asyncio sleeps again, in this process): the share of arrivals that found
   every worker busy, the mean wait, the latency p99 from the arrival.
3. Simulate the same queue exactly (event by event, 200,000 tasks drawn from the burst's
   measured times, the distribution the plan was made from): what the queueing model's
   approximations alone cost, without timer noise.
And for the constant shape, the product path: cxlab's asyncio runner with the planned workers
at R / Pods Poisson arrivals (`--arrival poisson`), its Result's wait and latency.

Prints figures; asserts nothing (machines are noisy).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import json
import math
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.planning import capacity_plan
from cxlab.experiments.plan import Trial
from cxlab.experiments.resource import parse_experiment
from cxlab_contract.histogram import build

MEAN = 0.05
RATE = 800.0  # tasks/s the plan is for: a = 40 workers busy on average
SHAPES: dict[str, tuple[Callable[[random.Random], float], str]] = {
    "constant": (lambda rng: MEAN, "100ms"),
    "exponential": (lambda rng: rng.expovariate(1 / MEAN), "300ms"),
    # 90 % 20 ms, 10 % 320 ms: mean 50 ms, as the 90/10 skew
    "90/10 skew": (lambda rng: 0.02 if rng.random() < 0.9 else 0.32, "450ms"),
}
BURST_WORKERS, BURST_TASKS = 64, 3000
RUN_SECONDS = 20.0
SIMULATED = 200_000


async def _burst(draw: Callable[[], float]) -> tuple[list[float], float, float]:
    """A closed loop of BURST_WORKERS over BURST_TASKS: each task's time, the wall time, CPU."""
    times: list[float] = []
    left = BURST_TASKS

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            start = time.perf_counter()
            await asyncio.sleep(draw())
            times.append(time.perf_counter() - start)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(BURST_WORKERS)))
    return times, time.perf_counter() - wall, time.process_time() - cpu


def _result(times: list[float], wall: float, cpu: float) -> dict[str, Any]:
    """The Result fields the planner reads."""
    ordered = sorted(times)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {
        "pods": 1, "workers": BURST_WORKERS, "tasks": len(times), "tasksOk": len(times),
        "tasksFailed": 0, "throughputPerSecond": len(times) / wall,
        "latencySeconds": {
            "p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99), "max": ordered[-1],
        },
        "latencyHistogram": build(times), "cpuUserSeconds": cpu, "cpuSystemSeconds": 0.0,
        "peakRssBytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "arrival": None,
    }  # fmt: skip


def _plan(result: dict[str, Any], objective: str) -> dict[str, Any]:
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "bench-plan"},
        "spec": {
            "workload": {"type": "sleep", "tasks": BURST_TASKS, "rtt": "50ms"},
            "models": [{"model": "asyncio", "workers": [BURST_WORKERS]}],
            "pinning": "preferred",
            "capacity": {"target": {"ratePerSecond": RATE, "latency": {"max": objective}}},
        },
    }  # fmt: skip
    spec = parse_experiment(document).spec
    trial = Trial(0, "asyncio", BURST_WORKERS, None, MEAN, 1)
    plan = capacity_plan(spec, [TrialOutcome(trial, result)])  # type: ignore[arg-type]
    assert plan is not None
    model: dict[str, Any] = plan.document()["models"][0]
    if not model["meets"]:
        sys.exit(f"no plan: {model['reason']}")
    return model


class _Measured:
    def __init__(self) -> None:
        self.arrivals = 0
        self.found_busy = 0
        self.waits: list[float] = []
        self.latencies: list[float] = []

    def row(self) -> tuple[float, float, float]:
        """P(wait), mean wait, p99 latency."""
        return (
            self.found_busy / self.arrivals,
            sum(self.waits) / len(self.waits),
            sorted(self.latencies)[math.ceil(0.99 * len(self.latencies)) - 1],
        )


async def _open_loop(draw: Callable[[], float], rate: float, workers: int, seed: int) -> _Measured:
    """Poisson arrivals at `rate` for RUN_SECONDS into `workers` asyncio workers, first come
    first served; each arrival notes whether it found every worker busy (PASTA: the share
    that waits)."""
    rng, measured = random.Random(seed), _Measured()
    queue: asyncio.Queue[float | None] = asyncio.Queue()
    busy = 0

    async def worker() -> None:
        nonlocal busy
        while (due := await queue.get()) is not None:
            busy += 1
            start = time.perf_counter()
            measured.waits.append(start - due)
            await asyncio.sleep(draw())
            measured.latencies.append(time.perf_counter() - due)
            busy -= 1

    pool = [asyncio.create_task(worker()) for _ in range(workers)]
    origin = time.perf_counter()
    due = origin
    while due - origin < RUN_SECONDS:
        due += rng.expovariate(rate)
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        measured.arrivals += 1
        # Busy: every worker holds a task, or tasks already wait ahead of this one.
        measured.found_busy += busy + queue.qsize() >= workers
        queue.put_nowait(due)
    for _ in pool:
        queue.put_nowait(None)
    await asyncio.gather(*pool)
    return measured


def _simulate(draw: Callable[[], float], rate: float, workers: int, seed: int) -> _Measured:
    """The same queue event by event: each arrival takes the worker that frees first."""
    rng, measured = random.Random(seed), _Measured()
    free = [0.0] * workers  # when each worker is next free
    now = 0.0
    for _ in range(SIMULATED):
        now += rng.expovariate(rate)
        earliest = heapq.heappop(free)
        start = max(now, earliest)
        done = start + draw()
        heapq.heappush(free, done)
        measured.arrivals += 1
        measured.found_busy += earliest > now
        measured.waits.append(start - now)
        measured.latencies.append(done - now)
    return measured


def _runner(rate: float, workers: int) -> _Measured | None:
    """cxlab's asyncio runner, constant 50 ms sleeps, the planned workers, Poisson arrivals."""
    argv = [
        sys.executable, "-m", "cxlab_runner", "--model", "asyncio", "--workload", "sleep",
        "--rtt", "50ms", "--workers", str(workers), "--arrival", "poisson",
        "--rate", f"{rate:g}", "--duration", f"{RUN_SECONDS:g}s", "--seed", "3",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_SECONDS * 4 + 30)
    if done.returncode != 0:
        print(f"  the runner failed: exit {done.returncode}: {done.stderr.strip()[-300:]}")
        return None
    result = json.loads(done.stdout.strip().splitlines()[-1])
    waits = result["arrival"]["waitHistogram"]
    measured = _Measured()
    measured.arrivals = result["arrival"]["arrivals"]
    # A task that found a worker free waits only for the loop to hand it over (well under
    # 1 ms); one that found them all busy waits for a task to end.
    base = 2.0 ** (2.0 ** -waits["schema"])
    measured.found_busy = sum(
        n for k, n in enumerate(waits["counts"]) if base ** (waits["offset"] + k - 1) >= 0.001
    )
    measured.waits = [waits["sum"] / max(1, measured.arrivals)]
    measured.latencies = [result["latencySeconds"]["p99"]]
    return measured


def _cells(values: tuple[float, float, float]) -> str:
    share, wait, p99 = values
    return f"{share:>8.1%}{wait * 1e3:>10.2f}{p99 * 1e3:>9.1f}"


def main() -> None:
    print(
        f"bench-plan: {RATE:g} tasks/s of {MEAN * 1e3:g} ms on average, P(wait) <= 20 %, "
        f"p99 objective per shape; plan from a closed burst of {BURST_WORKERS} workers x "
        f"{BURST_TASKS} tasks, checked by a {RUN_SECONDS:g} s Poisson run of one planned Pod "
        f"and a {SIMULATED:,}-task simulation"
    )
    header = (
        f"{'shape':<13}{'objective':>10}{'T ms':>7}{'Pods':>5}{'W/Pod':>6}{'busy':>6}  "
        f"{'source':<22}{'P(wait)':>8}{'wait ms':>10}{'p99 ms':>9}"
    )
    print(header)
    print("-" * len(header))
    # The runner's P(wait): its waits of 1 ms or more, which count its generator's lag too.
    for index, (shape, (sampler, objective)) in enumerate(SHAPES.items()):
        _shape(shape, functools.partial(sampler, random.Random(index)), objective)


def _shape(shape: str, draw: Callable[[], float], objective: str) -> None:
    """Plan from a burst, then the plan's predictions beside a simulation and measured runs."""
    times, wall, cpu = asyncio.run(_burst(draw))
    plan = _plan(_result(times, wall, cpu), objective)
    pods, workers = plan["pods"], plan["workersPerPod"]
    per_pod = RATE / pods
    predicted = (
        plan["expectedWaitProbability"], plan["expectedMeanWaitSeconds"],
        plan["expectedLatencySeconds"],
    )  # fmt: skip
    rows = [("predicted by the plan", predicted)]
    measured_draw = functools.partial(random.Random(5).choice, times)
    rows.append(("simulated", _simulate(measured_draw, per_pod, workers, 7).row()))
    rows.append(("measured (asyncio)", asyncio.run(_open_loop(draw, per_pod, workers, 11)).row()))
    if shape == "constant" and (runner := _runner(per_pod, workers)) is not None:
        rows.append(("measured (cxlab runner)", runner.row()))
    for row, (source, values) in enumerate(rows):
        lead = (
            f"{shape:<13}{objective:>10}{plan['holdingTimeSeconds'] * 1e3:>7.1f}{pods:>5}"
            f"{workers:>6}{plan['expectedOccupancy']:>6.0%}"
            if row == 0 else " " * 47
        )  # fmt: skip
        print(f"{lead}  {source:<22}{_cells(values)}")


if __name__ == "__main__":
    main()
