"""`make bench-arrival`: can each model's generator keep an arrival rate, and how late does it
issue arrivals, beside a reference open-loop generator on the same core and target.

1. Every model at 100, 1,000 and 10,000 arrivals a second of a 50 ms sleep, pinned to one core:
   the rate achieved against the target, the generator's lag p50/p99, the latency p99 (from
   the schedule) and whether the model holds the rate. A worker per arrival where the model
   has one; sequential and processes have a pool and drop what finds it busy, so a run never
   outlasts its duration (a queue they cannot drain would take minutes).
2. HTTP against cxlab-delay (50 ms) on the same core, at those rates and 20,000 a second: the
   Go and asyncio runners beside Vegeta (github.com/tsenart/vegeta, MIT: k6 is AGPL-licensed
   and not used here) with as many workers (bounded: -workers W -max-workers 4W, where it is
   healthy), whose lag is each hit's send time against its due time (origin + i / rate, the
   origin its most punctual hit's: a lower bound), and the CPU each generator takes per
   request. Ratios runner / Vegeta in one run; the settings are printed beside the figures.

Prints figures; asserts nothing (machines are noisy).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VEGETA_MODULE = "github.com/tsenart/vegeta/v12"
CORES = sorted(os.sched_getaffinity(0))
CORE = {CORES[-1]}  # the runner (or Vegeta), as the local backend pins a trial
HELPERS = set(CORES[:-1]) or CORE  # the delay target
RATES = (100, 1_000, 10_000)
HTTP_RATES = (*RATES, 20_000)  # one step past where the runners saturate on one core
RTT = 0.05
MODELS = ("sequential", "threads", "processes", "gevent", "asyncio", "goroutines")
# A model holds a rate when its generator kept it and its tasks did not queue or drop: every
# arrival ran, and p99 stayed within this of the sleep itself.
HOLD_SLACK = 0.05
# Each HTTP run starts with at most this many sockets in TIME_WAIT (settle), waiting at most
# this long: Linux keeps a closed connection there 60 s.
TIME_WAIT_BOUND = 500
TIME_WAIT_SECONDS = 90.0


def program(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))
    if path is None:
        sys.exit(f"{name} is not built: make deps (and hack/vegeta.sh for vegeta)")
    return path


def runner_argv(model: str, rate: int, seconds: int, *flags: str) -> list[str]:
    head = [program("cxlab-runner-go")] if model == "goroutines" else [
        sys.executable, "-m", "cxlab_runner"]  # fmt: skip
    workers = ["--workers", "0"]
    if model in ("sequential", "processes"):  # a pool: drop what finds it busy
        pool = 1 if model == "sequential" else min(512, math.ceil(rate * RTT * 1.25))
        workers = ["--workers", str(pool), "--on-busy", "drop"]
    return [
        *head, "--model", model, "--arrival", "uniform", "--rate", str(rate),
        "--duration", f"{seconds}s", "--warmup", "1s", *workers, *flags,
    ]  # fmt: skip


def run(argv: list[str], timeout: float) -> dict[str, Any] | None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout,
            preexec_fn=lambda: os.sched_setaffinity(0, CORE),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        print(f"  {' '.join(argv[:6])}…: exit {done.returncode}: {done.stderr.strip()[-300:]}")
        return None
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def verdict(result: dict[str, Any], rate: int) -> str:
    arrival = result["arrival"]
    if arrival["generatorSaturated"]:
        return "no: " + (arrival["saturation"] or "saturated")
    if arrival["dropped"]:
        share = arrival["dropped"] / arrival["arrivals"]
        return f"no: {arrival['dropped']} of {arrival['arrivals']} ({share:.1%}) dropped, pool busy"
    if result["latencySeconds"]["p99"] > RTT + HOLD_SLACK:
        return "no: tasks queued (p99 over the sleep)"
    return "yes"


def models_table(seconds: int) -> None:
    print(
        f"\n1. Every model, {RTT * 1e3:.0f} ms sleeps arriving uniformly for {seconds} s (1 s "
        f"warm-up), pinned to CPU {sorted(CORE)}"
    )
    header = (
        f"{'model':<12}{'rate/s':>8}{'achieved/s':>12}{'ratio':>8}{'lag p50':>12}{'lag p99':>12}"
        f"{'p99':>12}{'cpu %':>7}  holds"
    )
    print(header)
    print("-" * (len(header) + 40))
    for model in MODELS:
        for rate in RATES:
            argv = runner_argv(model, rate, seconds, "--workload", "sleep", "--rtt", "50ms")
            result = run(argv, timeout=seconds * 6 + 30)
            if result is None:
                print(f"{model:<12}{rate:>8}  did not finish within {seconds * 6 + 30} s: no")
                continue
            arrival, latency = result["arrival"], result["latencySeconds"]
            print(
                f"{model:<12}{rate:>8}{arrival['achievedRatePerSecond']:>12.1f}"
                f"{arrival['achievedRatePerSecond'] / rate:>8.3f}"
                f"{_ms(arrival['lagSeconds']['p50']):>12}{_ms(arrival['lagSeconds']['p99']):>12}"
                f"{_ms(latency['p99']):>12}{result['cpuPercent']:>7.0f}  {verdict(result, rate)}"
            )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _percentile(ordered: list[float], fraction: float) -> float:
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1] if ordered else 0.0


def time_wait() -> int:
    """Sockets in TIME_WAIT on this host now (/proc/net/sockstat)."""
    with open("/proc/net/sockstat") as sockstat:
        for line in sockstat:
            if line.startswith("TCP:"):
                fields = line.split()
                return int(fields[fields.index("tw") + 1])
    return 0


def settle() -> int:
    """Wait (at most TIME_WAIT_SECONDS) until the connections of the runs before have left
    TIME_WAIT; the sockets still in it. With thousands in it, each connect() searches the
    ephemeral ports in the kernel: a generator that opens connections then spends its CPU in
    the system, not in itself (Vegeta fell to a few hundred a second so, at 100 % CPU)."""
    waited = time.monotonic()
    while time_wait() > TIME_WAIT_BOUND and time.monotonic() - waited < TIME_WAIT_SECONDS:
        time.sleep(1)
    return time_wait()


def vegeta_workers(rate: int) -> tuple[int, int]:
    """Vegeta's -workers and -max-workers: the runners' workers (two per arrival in flight,
    each keeping its connection) and four times as many at most. Bounded, Vegeta stays
    healthy; with -max-workers 100000 it sometimes collapses, far under the rate at full CPU
    (docs/benchmarks.md), which measures its failure, not its cost."""
    workers = math.ceil(rate * RTT * 2)
    return workers, 4 * workers


def vegeta(url: str, rate: int, seconds: int) -> dict[str, float]:
    """One Vegeta attack: the rate it achieved by the duration's end and its lag after the
    warm-up (each hit's send time against start + seq / rate), its latency p99, and the CPU
    its process took per request."""
    workers, most = vegeta_workers(rate)
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "results.bin"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        attack = subprocess.run(
            [program("vegeta"), "attack", f"-rate={rate}/s", f"-duration={seconds}s",
             f"-workers={workers}", f"-max-workers={most}", "-keepalive=true",
             f"-output={results}"],
            input=f"GET {url}\n", text=True, capture_output=True,
            preexec_fn=lambda: os.sched_setaffinity(0, CORE),
        )  # fmt: skip
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if attack.returncode != 0:
            raise RuntimeError(f"vegeta attack: {attack.stderr.strip()}")
        encoded = subprocess.run(
            [program("vegeta"), "encode", "--to", "csv", str(results)],
            capture_output=True,
            text=True,
            check=True,
        )
    hits = sorted(
        (int(row[8]), int(row[0]) / 1e9, int(row[2]) / 1e9, row[1])
        for row in csv.reader(io.StringIO(encoded.stdout))
    )
    # Vegeta keeps no record of when its schedule began: the origin is the earliest send time
    # less its due offset, so lag is measured from its most punctual hit (a lower bound).
    start = min(sent - seq / rate for seq, sent, _, _ in hits)
    lags = sorted(sent - (start + seq / rate) for seq, sent, _, _ in hits if seq / rate >= 1.0)
    ok = sorted(latency for _, _, latency, code in hits if code == "200")
    sent_in_time = sum(1 for seq, sent, _, _ in hits if sent - start <= seconds)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "achieved": sent_in_time / seconds,
        "lag50": max(0.0, _percentile(lags, 0.5)),
        "lag99": max(0.0, _percentile(lags, 0.99)),
        "p99": _percentile(ok, 0.99),
        "ok": len(ok) / len(hits),
        "cpu_per_request": cpu / len(hits),
    }


def vegeta_version() -> str:
    """The version hack/vegeta pins (a binary built with `go build` of the module reports none)."""
    pins = (HERE.parents[1] / "hack" / "vegeta" / "go.mod").read_text().split()
    versions = (pins[k + 1] for k, word in enumerate(pins[:-1]) if word == VEGETA_MODULE)
    return next((v for v in versions if v.startswith("v")), "?")


def _row(
    rate: int, name: str, settings: str, waiting: int, figures: dict[str, float], ratios: str
) -> str:
    return (
        f"{rate:>8}{name:>12}{settings:>18}{waiting:>6}{figures['achieved']:>12.1f}"
        f"{_ms(figures['lag50']):>12}{_ms(figures['lag99']):>12}{_ms(figures['p99']):>12}"
        f"{figures['ok']:>7.1%}{figures['cpu_per_request'] * 1e6:>11.1f}{ratios}"
    )


def http_table(seconds: int) -> None:
    with delay_target() as url:
        print(
            f"\n2. HTTP GETs to cxlab-delay answering after {RTT * 1e3:.0f} ms, arriving "
            f"uniformly for {seconds} s; generator on CPU {sorted(CORE)}, target on "
            f"{sorted(HELPERS)}; lag after a 1 s warm-up. Vegeta {vegeta_version()}: attack "
            "-keepalive=true -workers W -max-workers 4W; the runners --connection reuse "
            "--workers W (W = 2 x rate x 50 ms); CPU: the generator's, per request; tw: sockets "
            f"in TIME_WAIT as the run began (each waits for at most {TIME_WAIT_BOUND})"
        )
        header = (
            f"{'rate/s':>8}{'generator':>12}{'settings':>18}{'tw':>6}{'achieved/s':>12}"
            f"{'lag p50':>12}{'lag p99':>12}{'p99':>12}{'ok':>7}{'CPU µs/req':>11}"
            f"{'vs Vegeta: lag p99':>20}{'achieved':>10}{'CPU/req':>9}"
        )
        print(header)
        print("-" * len(header))
        for rate in HTTP_RATES:
            waiting = settle()
            reference = vegeta(f"{url}?rtt=50ms", rate, seconds)
            workers, most = vegeta_workers(rate)
            settings = f"W {workers}, max {most}"
            ones = f"{'1':>20}{'1':>10}{'1':>9}"
            print(_row(rate, "vegeta", settings, waiting, reference, ones), flush=True)
            for model in ("goroutines", "asyncio"):
                # One kept connection per worker, as Vegeta keeps them: 10,000 fresh ones a
                # second would measure the kernel's port reuse.
                argv = runner_argv(model, rate, seconds, "--workload", "http", "--rtt", "50ms",
                                   "--target-url", url, "--connection", "reuse")  # fmt: skip
                argv[argv.index("--workers") + 1] = str(workers)
                waiting = settle()
                result = run(argv, timeout=seconds * 6 + 30)
                if result is None:
                    print(f"{rate:>8}{model:>12}  did not finish")
                    continue
                figures, ratios = _runner_figures(result, reference)
                print(_row(rate, model, f"W {workers}", waiting, figures, ratios), flush=True)


def _runner_figures(
    result: dict[str, Any], reference: dict[str, float]
) -> tuple[dict[str, float], str]:
    arrival = result["arrival"]
    cpu = (result["cpuUserSeconds"] + result["cpuSystemSeconds"]) / max(1, result["tasks"])
    figures = {
        "achieved": arrival["achievedRatePerSecond"],
        "lag50": arrival["lagSeconds"]["p50"],
        "lag99": arrival["lagSeconds"]["p99"],
        "p99": result["latencySeconds"]["p99"],
        "ok": result["tasksOk"] / max(1, result["tasks"]),
        "cpu_per_request": cpu,
    }
    lag = figures["lag99"] / reference["lag99"] if reference["lag99"] else math.inf
    ratios = (
        f"{lag:>20.3g}{figures['achieved'] / reference['achieved']:>10.3f}"
        f"{cpu / reference['cpu_per_request']:>9.2f}"
    )
    return figures, ratios


def free_port() -> int:
    """A port free on loopback now (the workloads' own: they import nothing of the operator)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class delay_target:
    def __enter__(self) -> str:
        self.port = free_port()
        self.process = subprocess.Popen(
            [program("cxlab-delay"), "--listen", f"127.0.0.1:{self.port}", "--rtt", "50ms"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, HELPERS),
        )  # fmt: skip
        url = f"http://127.0.0.1:{self.port}/"
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "healthz", timeout=1).close()
                return url
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("cxlab-delay did not start")

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="each run's duration")
    parser.add_argument("--skip-models", action="store_true", help="only the HTTP comparison")
    args = parser.parse_args()
    if not args.skip_models:
        models_table(args.seconds)
    http_table(args.seconds)


if __name__ == "__main__":
    main()
