"""`make bench`: each model's runner beside the bare minimal program for that model, timed
the same way (monotonic clock around the task phase, peak RSS from getrusage), alternating
runner and bare run so drift of this shared machine hits both alike; medians of --repeats.

Then the scale checks of the runners issue: efficiency at 1 s RTT, 100,000 tasks for
asyncio and gevent, 1,000,000 goroutines. Prints figures; asserts nothing (machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Pin like the local backend: the highest core for the program, the rest for this script.
CORE = {sorted(os.sched_getaffinity(0))[-1]}
ALL_CORES = os.sched_getaffinity(0)


def run_json(argv: list[str], cores: set[int] = CORE) -> dict[str, Any]:
    completed = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def runner(model: str, tasks: int, rtt: str, workers: int = 0, **extra: str) -> list[str]:
    if model == "goroutines":
        program = [shutil.which("cxlab-runner-go") or "cxlab-runner-go"]
    else:
        program = [sys.executable, "-m", "cxlab_runner"]
    argv = [*program, "--model", model, "--workload", "sleep", "--tasks", str(tasks)]
    argv += ["--workers", str(workers), "--rtt", rtt]
    for flag, value in extra.items():
        argv += [f"--{flag.replace('_', '-')}", value]
    return argv


def bare(model: str, tasks: int, rtt_seconds: float, thread_workers: int) -> list[str]:
    if model == "goroutines":
        binary = shutil.which("bare-goroutines") or "bare-goroutines"
        return [binary, "--tasks", str(tasks), "--rtt", f"{rtt_seconds}s"]
    script = str(HERE / f"bare_{model}.py")
    argv = [sys.executable, script, str(tasks), str(rtt_seconds)]
    return [*argv, str(thread_workers)] if model == "threads" else argv


def compare(args: argparse.Namespace) -> None:
    rtt_seconds = float(args.rtt.removesuffix("ms")) / 1000
    print(
        f"Runner vs bare program: {args.tasks} sleep tasks at {args.rtt}, "
        f"median of {args.repeats}, pinned to CPU {sorted(CORE)}"
    )
    header = (
        f"{'model':<12}{'workers':>8}{'bare wall s':>13}{'runner wall s':>15}{'ratio':>8}"
        f"{'bare RSS MiB':>14}{'runner RSS MiB':>16}{'Δ MiB':>8}{'RSS ratio':>11}"
    )
    print(header)
    print("-" * len(header))
    for model in ("asyncio", "gevent", "threads", "goroutines"):
        workers = args.thread_workers if model == "threads" else 0
        bare_runs, runner_runs = [], []
        for _ in range(args.repeats):
            bare_runs.append(run_json(bare(model, args.tasks, rtt_seconds, args.thread_workers)))
            runner_runs.append(run_json(runner(model, args.tasks, args.rtt, workers)))
        bare_wall = statistics.median(r["wallSeconds"] for r in bare_runs)
        runner_wall = statistics.median(r["wallSeconds"] for r in runner_runs)
        bare_rss = statistics.median(r["peakRssBytes"] for r in bare_runs) / 2**20
        runner_rss = statistics.median(r["peakRssBytes"] for r in runner_runs) / 2**20
        print(
            f"{model:<12}{workers or 'per task':>8}{bare_wall:>13.3f}{runner_wall:>15.3f}"
            f"{runner_wall / bare_wall:>8.3f}{bare_rss:>14.1f}{runner_rss:>16.1f}"
            f"{runner_rss - bare_rss:>+8.1f}{runner_rss / bare_rss:>11.2f}"
        )


def thread_pools(args: argparse.Namespace) -> None:
    """Each kind of thread pool beside its bare program, at the sizes where they differ: the
    on-demand pool against a bare ThreadPoolExecutor, the prestarted against bare threads.

    On all CPUs, not one: thousands of threads waking at once on one core become a GIL convoy
    whose wall time varies tenfold between identical runs of the bare program
    (docs/benchmarks.md), which no median of a few runs tames."""
    rtt_seconds = float(args.rtt.removesuffix("ms")) / 1000
    print(
        f"\nThread pools: {args.tasks} sleep tasks at {args.rtt}, median of {args.pool_repeats}, "
        f"on CPUs {sorted(ALL_CORES)}"
    )
    header = (
        f"{'pool':<12}{'workers':>8}{'bare wall s':>13}{'runner wall s':>15}{'ratio':>8}"
        f"{'bare range s':>15}{'runner range s':>16}"
        f"{'bare threads':>14}{'runner threads':>16}{'bare RSS MiB':>14}{'runner RSS MiB':>16}"
    )
    print(header)
    print("-" * len(header))
    bare_script = {"onDemand": "bare_threads.py", "prestarted": "bare_threads_prestarted.py"}
    for workers in (2_000, 10_000):
        for pool in ("onDemand", "prestarted"):
            script = [sys.executable, str(HERE / bare_script[pool])]
            bare_runs, runner_runs = [], []
            for _ in range(args.pool_repeats):
                bare_argv = [*script, str(args.tasks), str(rtt_seconds), str(workers)]
                runner_argv = runner("threads", args.tasks, args.rtt, workers, pool=pool)
                bare_runs.append(run_json(bare_argv, ALL_CORES))
                runner_runs.append(run_json(runner_argv, ALL_CORES))
            bare_wall = statistics.median(r["wallSeconds"] for r in bare_runs)
            runner_wall = statistics.median(r["wallSeconds"] for r in runner_runs)
            bare_threads = statistics.median(r["threadsStarted"] for r in bare_runs)
            runner_threads = statistics.median(r["workersStarted"] for r in runner_runs)
            bare_rss = statistics.median(r["peakRssBytes"] for r in bare_runs) / 2**20
            runner_rss = statistics.median(r["peakRssBytes"] for r in runner_runs) / 2**20
            # The range too: thousands of threads behind one GIL fall into a convoy now and
            # then, bare or not, and one such run is several times the others.
            bare_range = _range(r["wallSeconds"] for r in bare_runs)
            runner_range = _range(r["wallSeconds"] for r in runner_runs)
            print(
                f"{pool:<12}{workers:>8}{bare_wall:>13.3f}{runner_wall:>15.3f}"
                f"{runner_wall / bare_wall:>8.3f}{bare_range:>15}{runner_range:>16}"
                f"{bare_threads:>14.0f}{runner_threads:>16.0f}"
                f"{bare_rss:>14.1f}{runner_rss:>16.1f}"
            )


def _range(values: Iterable[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[0]:.2f}-{ordered[-1]:.2f}"


def scale_checks(thread_workers: int) -> None:
    print("\nScale checks, one run each; efficiency = floor / wall, beside the bare program's")
    checks = [
        ("asyncio", 10_000, 1.0),
        ("goroutines", 10_000, 1.0),
        ("asyncio", 100_000, 0.2),
        ("gevent", 100_000, 0.2),
        ("goroutines", 1_000_000, 0.2),
    ]
    print(
        f"{'model':<12}{'tasks':>10}{'rtt s':>7}{'ok':>10}{'wall s':>9}{'bare wall s':>13}"
        f"{'efficiency':>12}{'bare eff':>10}{'peak MiB':>10}"
    )
    for model, tasks, rtt in checks:
        result = run_json(runner(model, tasks, f"{rtt}s"))
        bare_wall = run_json(bare(model, tasks, rtt, thread_workers))["wallSeconds"]
        print(
            f"{model:<12}{tasks:>10}{rtt:>7}{result['tasksOk']:>10}{result['wallSeconds']:>9.3f}"
            f"{bare_wall:>13.3f}{result['efficiency']:>12.3f}{rtt / bare_wall:>10.3f}"
            f"{result['peakRssBytes'] / 2**20:>10.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rtt", default="100ms", help="in ms, e.g. 100ms")
    parser.add_argument("--thread-workers", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--pool-repeats", type=int, default=9)
    parser.add_argument("--skip-scale", action="store_true", help="only the side-by-side tables")
    args = parser.parse_args()
    compare(args)
    thread_pools(args)
    if not args.skip_scale:
        scale_checks(args.thread_workers)


if __name__ == "__main__":
    main()
