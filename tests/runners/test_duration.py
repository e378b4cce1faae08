"""Duration runs in both runners, run for real (workloads/CONTRACT.md, Duration runs): arrivals
keep their rate and are timed from their schedule, too few workers queue and the latency shows
it, drops are counted, closed loops run for their time, and a stalled target shows what a
closed loop hides (coordinated omission)."""

from __future__ import annotations

import itertools
import math
import random
import statistics
import subprocess
from typing import Any

import pytest
from helpers import run_runner, runner_argv

from cxlab_contract import histogram
from cxlab_contract.arrivals import RateProfile, parse_stages

RTT = 0.05


def _arrivals(model: str, rate: float, seconds: int, *flags: str) -> dict[str, Any]:
    return run_runner(
        model, "--workload", "sleep", "--rtt", "50ms", "--arrival", "uniform",
        "--rate", str(rate), "--duration", f"{seconds}s", *flags,
    )  # fmt: skip


@pytest.mark.parametrize("model", ["asyncio", "gevent", "threads", "goroutines"])
def test_an_arrival_run_keeps_its_rate_and_times_tasks_from_their_schedule(model: str) -> None:
    # --max-lag 1s: on a busy machine the default 10 ms bound can call the generator
    # saturated; that verdict has a test of its own. A generator woken late at the end of the
    # run issues its last arrivals after it (98 % by the end seen in CI, which the verdict
    # calls saturated): every arrival is still issued, at about the rate.
    result = _arrivals(model, 400, 2, "--max-lag", "1s")
    arrival = result["arrival"]
    assert result["tasks"] == arrival["arrivals"] == 800 == result["tasksOk"]
    assert arrival["ratePerSecond"] == 400
    assert arrival["achievedRatePerSecond"] >= 0.95 * 400
    assert arrival["lagSeconds"]["p99"] < 1, arrival["lagSeconds"]
    assert arrival["dropped"] == 0
    # One worker per arrival: nothing waits, so the latency is the sleep plus the lag (loose
    # bounds: the machine is shared; docs/benchmarks.md has the figures on a quiet one).
    assert RTT <= result["latencySeconds"]["p50"] < RTT + 0.04
    assert result["latencySeconds"]["p99"] < RTT + 0.15
    assert histogram.count(arrival["serviceHistogram"]) == 800
    # Little's law: 400/s for 50 ms keeps about 20 in flight.
    steady = result["timeline"]["inFlight"][0]
    assert 400 * RTT * 0.8 < steady < 400 * RTT * 1.6, result["timeline"]


@pytest.mark.parametrize("model", ["asyncio", "processes", "goroutines"])
def test_too_few_workers_queue_and_the_latency_shows_it(model: str) -> None:
    # 5 workers of 50 ms carry 100/s; 200/s arrive for 2 s: the queue grows by ~100 a second.
    result = _arrivals(model, 200, 2, "--workers", "5")
    arrival = result["arrival"]
    assert result["tasksOk"] == 400 and arrival["dropped"] == 0
    assert arrival["maxQueue"] > 100
    service_p99 = histogram.quantile(arrival["serviceHistogram"], 0.99)
    wait_p99 = histogram.quantile(arrival["waitHistogram"], 0.99)
    assert service_p99 < 0.3  # a sleep of 50 ms, woken late on a busy machine at worst
    assert wait_p99 > 1.0
    # Latency is wait plus service: a closed loop would have reported ~50 ms.
    assert result["latencySeconds"]["p99"] > 1.0
    assert result["wallSeconds"] > 3.5  # 400 tasks at 100/s


@pytest.mark.parametrize("model", ["gevent", "threads", "goroutines"])
def test_drop_counts_the_arrivals_that_find_every_worker_busy(model: str) -> None:
    # 2 workers of 50 ms carry 40/s of 100/s: about 60 % are dropped, none waits. Arrivals
    # come every 10 ms, so a worker whose 50 ms overran by 0-10 ms takes the one 60 ms after
    # its last (133 dropped), by 10-20 ms (a loaded machine: 141 seen cold) the one 70 ms
    # after (143), by 20-30 ms 80 ms after (150): the bound allows that much.
    result = _arrivals(model, 100, 2, "--workers", "2", "--on-busy", "drop")
    arrival = result["arrival"]
    assert arrival["dropped"] + result["tasksOk"] == 200
    assert 90 <= arrival["dropped"] <= 150, arrival
    assert arrival["maxQueue"] <= 2
    # Nothing waits for a worker (queueing, the last would wait ~1.5 s): what is left is the
    # hand-over to a worker, slow only on a busy machine (77 ms seen in CI).
    assert histogram.quantile(arrival["waitHistogram"], 0.99) < 0.25
    assert result["latencySeconds"]["p50"] < RTT + 0.04


@pytest.mark.parametrize("model", ["sequential", "threads", "asyncio", "processes", "goroutines"])
def test_a_closed_loop_runs_for_its_duration(model: str) -> None:
    result = run_runner(
        model, "--workload", "sleep", "--rtt", "50ms", "--duration", "2s", "--workers", "4",
        "--warmup", "500ms",
    )  # fmt: skip
    workers = 1 if model == "sequential" else 4
    expected = workers * 2 / RTT
    assert 0.6 * expected <= result["tasks"] <= expected + workers
    assert result["tasks"] == result["tasksOk"] and result["arrival"] is None
    assert result["durationSeconds"] == 2 and 2 <= result["wallSeconds"] < 2.5
    assert result["floorSeconds"] is None
    assert sum(result["timeline"]["completed"]) == result["tasks"]
    assert result["warmup"]["tasksOk"] == pytest.approx(expected / 4, rel=0.4)
    assert result["latencySeconds"]["p50"] == pytest.approx(RTT, abs=0.03)


def test_a_generator_that_cannot_keep_the_rate_says_so() -> None:
    # asyncio runs cpu tasks on its one thread: while one counts, nothing issues arrivals.
    result = run_runner(
        "asyncio", "--workload", "cpu", "--iterations", "2000000", "--arrival", "uniform",
        "--rate", "100", "--duration", "1s",
    )  # fmt: skip
    arrival = result["arrival"]
    assert arrival["generatorSaturated"]
    assert "lag p99" in arrival["saturation"]
    assert arrival["lagSeconds"]["p99"] > arrival["maxLagSeconds"]


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_a_ramp_issues_the_integral_of_its_rate(model: str) -> None:
    # 0 to 400/s over 2 s: 400 arrivals, a quarter of them in the first second.
    result = run_runner(
        model, "--workload", "sleep", "--rtt", "10ms", "--arrival", "uniform",
        "--stages", "2s:400",
    )  # fmt: skip
    assert result["tasks"] == 400 and result["durationSeconds"] == 2
    completed = result["timeline"]["completed"]
    assert completed[0] == pytest.approx(100, abs=15)


def test_poisson_arrivals_have_exponential_gaps_and_the_expected_count() -> None:
    profile = RateProfile(100, (), 10)
    counts = [len(profile.schedule("poisson", seed)) for seed in range(1, 101)]
    # Poisson(1000): mean 1000, sd ~31.6; the mean of 100 draws within 4 standard errors.
    assert abs(statistics.mean(counts) - 1000) < 4 * math.sqrt(1000 / 100)
    assert 0.7 < statistics.variance(counts) / 1000 < 1.4  # variance = mean for Poisson
    schedule = profile.schedule("poisson", 7)
    gaps = sorted(b - a for a, b in itertools.pairwise(schedule))
    # Kolmogorov-Smirnov against Exp(100): under 1.63/sqrt(n), the 1 % critical value.
    n = len(gaps)
    d = max(
        max((i + 1) / n - (1 - math.exp(-100 * g)), (1 - math.exp(-100 * g)) - i / n)
        for i, g in enumerate(gaps)
    )
    assert d < 1.63 / math.sqrt(n)
    assert profile.schedule("poisson", 7) == schedule  # a seed gives its schedule again
    ramp = RateProfile(0, parse_stages("10s:200"))  # intensity 20t: Λ(5) = 250 of 1000
    early = [sum(t < 5 for t in ramp.schedule("poisson", s)) for s in range(1, 51)]
    assert abs(statistics.mean(early) - 250) < 4 * math.sqrt(250 / 50)
    assert random.Random(1).random() == random.Random(1).random()


@pytest.mark.parametrize(
    ("model", "flags"),
    [
        ("asyncio", ["--tasks", "5", "--duration", "1s"]),
        ("asyncio", ["--duration", "1s"]),  # a closed loop needs workers
        ("asyncio", ["--arrival", "uniform", "--rate", "10"]),  # for how long?
        ("asyncio", ["--arrival", "uniform", "--rate", "0.5", "--duration", "1s"]),  # < 1
        ("asyncio", ["--arrival", "uniform", "--rate", "1e7", "--duration", "2s"]),
        ("asyncio", ["--arrival", "uniform", "--stages", "1s:10", "--duration", "1s"]),
        ("asyncio", ["--arrival", "uniform", "--stages", "1s"]),
        ("asyncio", ["--arrival", "uniform", "--rate", "10", "--duration", "1s", "--warmup", "1s"]),
        ("asyncio", ["--tasks", "5", "--rate", "10"]),
        ("asyncio", ["--tasks", "5", "--on-busy", "drop"]),
        ("asyncio", ["--arrival", "sometimes", "--rate", "10", "--duration", "1s"]),
        ("processes", ["--arrival", "uniform", "--rate", "10", "--duration", "1s"]),
        ("goroutines", ["--tasks", "5", "--duration", "1s"]),
        ("goroutines", ["--duration", "1s"]),
        ("goroutines", ["--arrival", "uniform", "--rate", "0.5", "--duration", "1s"]),
        ("goroutines", ["--arrival", "uniform", "--stages", "1s:10", "--duration", "1s"]),
        ("goroutines", ["--arrival", "uniform", "--rate", "10", "--duration", "25h"]),
        ("goroutines", ["--tasks", "5", "--rate", "10"]),
    ],
)
def test_bad_duration_flags_exit_2_naming_the_flag(model: str, flags: list[str]) -> None:
    argv = runner_argv(model, "--workload", "sleep", *flags)
    completed = subprocess.run(argv, capture_output=True, text=True)
    assert completed.returncode == 2, completed.stderr
    assert completed.stdout == ""
    assert "--" in completed.stderr or "stage" in completed.stderr, completed.stderr


def test_locust_refuses_arrivals_saying_why() -> None:
    completed = subprocess.run(
        runner_argv("locust", "--workload", "http", "--target-url", "http://127.0.0.1:1/",
                    "--arrival", "uniform", "--rate", "10", "--duration", "1s"),
        capture_output=True, text=True,
    )  # fmt: skip
    assert completed.returncode == 2 and "closed loops" in completed.stderr


def _above(h: dict[str, Any], seconds: float) -> int:
    """Latencies in a Result's histogram surely above `seconds`: whole buckets past it."""
    base = 2.0 ** (2.0 ** -h["schema"])
    return sum(c for k, c in enumerate(h["counts"]) if base ** (h["offset"] + k - 1) >= seconds)


STALL_EVERY, STALL_FOR = 1.0, 0.2  # the target holds its answers 200 ms of every second
SLOW = 0.06  # an answer of 10 ms later than this was held by a stall


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_a_stall_reaches_every_arrival_but_only_one_task_per_closed_loop_worker(
    model: str, target_url: str
) -> None:
    # Coordinated omission (docs/open-loop.md): open loop, a share of about S/P of the tasks
    # arrive while the target stalls and wait up to S; a closed loop of W workers sends only
    # W requests into each stall, then waits with them, so about W per stall are slow.
    stalled = f"{target_url}?stallEvery=1s&stallFor=200ms"
    http = ["--workload", "http", "--target-url", stalled, "--rtt", "10ms"]
    opened = run_runner(model, *http, "--arrival", "uniform", "--rate", "200", "--duration", "4s")
    tasks = opened["tasksOk"]
    share = _above(opened["latencyHistogram"], SLOW) / tasks
    # S/P = 0.2; a busy machine slows some unstalled answers past 60 ms too (0.354 seen in a
    # cold CI run, 0.56 in a warm one beside the cluster tests), while a closed loop stays
    # near W per stall below: the lower bound is the stall's, the upper one only a sanity bound
    assert tasks == 800 and 0.12 <= share <= 0.7, share
    # the longest wait is the stall's; a busy machine adds to it (0.45 s seen beside the
    # cluster tests), never a second stall's worth
    assert STALL_FOR * 0.75 < opened["latencySeconds"]["max"] < STALL_FOR + 0.5

    workers, seconds = 10, 4
    closed = run_runner(model, *http, "--duration", f"{seconds}s", "--workers", str(workers))
    # Each worker's request caught by a stall waits for its end: ~190 ms, past what a busy
    # machine adds to a 10 ms request, mostly: a cold CI run, compiling Kubernetes beside,
    # slowed 8 more past 150 ms (58 for at most 50). Twice the stalls' share stays far below
    # an open loop's (a fifth of its thousands of tasks), which the next line checks.
    slow = _above(closed["latencyHistogram"], 0.15)
    stalls = seconds / STALL_EVERY
    assert workers * (stalls - 1) <= slow <= 2 * workers * (stalls + 1), slow
    assert slow / closed["tasksOk"] < share / 3  # the stall all but vanishes from its share
    # and its p90 does not show it at all, where the open loop's p99 is the stall itself (the
    # line between them is the stall's wait, as for `slow`: a busy machine's unstalled answers
    # reached 85 ms at the closed loop's p90 in a CI run, a tenth of them past SLOW)
    assert closed["latencySeconds"]["p90"] < 0.15 < opened["latencySeconds"]["p99"]


def test_locust_users_loop_for_a_duration(target_url: str) -> None:
    # Locust's users are closed loops already: for a time, each sends its next request as soon
    # as its last one is answered, until the time is up (Locust's own --run-time).
    result = run_runner(
        "locust", "--workload", "http", "--target-url", target_url, "--rtt", "20ms",
        "--duration", "2s", "--workers", "4", "--warmup", "500ms",
    )  # fmt: skip
    # at most 4 users x 2 s / 20 ms; Locust's own work per request (CPU a busy machine may not
    # give it: 223 of 400 seen in CI) makes it fewer
    expected = 4 * 2 / 0.02
    assert 0.25 * expected <= result["tasks"] <= expected + 4
    assert result["tasks"] == result["tasksOk"] and result["durationSeconds"] == 2
    completed = result["timeline"]["completed"]
    assert sum(completed) == result["tasks"] and all(completed[:2])  # busy all the 2 s
    assert 2 <= result["wallSeconds"] < 2.5 and result["warmup"]["tasksOk"] > 0
    refused = subprocess.run(
        runner_argv("locust", "--workload", "http", "--target-url", target_url,
                    "--duration", "2s", "--workers", "4", "--locust-master", "127.0.0.1:5557"),
        capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 2 and "distributed Locust" in refused.stderr
