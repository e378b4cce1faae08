"""spec.service through `cxlab run` end to end: real httpbin served by real gunicorn (its own
virtualenv, `make services`), one process per variant on a core apart from the generator's.
Each variant's throughput against theory (a sync worker serves one 50 ms request at a time),
the service's CPU and peak memory against the kernel's own cgroup counters, a variant that
cannot start failing alone, and no service process left after cxlab run, interrupted or not."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT
from helpers.cgroups import Cgroup, available, joined

from cxlab.local.delay_target import free_port
from cxlab.local.service import answers

GUNICORN = ROOT / "build" / "services" / "httpbin" / "bin" / "gunicorn"
CXLAB = [sys.executable, "-m", "cxlab.cli"]
DELAY = 0.05  # httpbin's /delay/0.05: the server waits 50 ms in each request
WORKERS = 64  # the generator's: more than any variant serves at once
DURATION, WARMUP = 4, 1  # seconds
VARIANTS = {
    "sync-2": ["--worker-class", "sync", "--workers", "2"],
    "sync-4": ["--worker-class", "sync", "--workers", "4"],
    "gthread-2x4": ["--worker-class", "gthread", "--workers", "2", "--threads", "4"],
    "gevent-2": ["--worker-class", "gevent", "--workers", "2"],
}
# Requests served at once over the 50 ms each takes (gevent: bounded by its core, not this).
WORKERS_OF = {"sync-2": 2, "sync-4": 4, "gthread-2x4": 8}
PREDICTED = {name: workers / DELAY for name, workers in WORKERS_OF.items()}
# gthread's 4 threads per process hand one GIL around (a 5 ms switch interval) beside its
# accepting main thread: 141-145/s on a quiet machine, 128-135/s beside the other tests and a
# cluster on these 2 cores (the sync variants stay within 10 % of theory either way).
TOLERANCE = {"gthread-2x4": 0.20}
MEASURED_NICE = -10  # we are root: a higher priority for the run whose figures are checked
pytestmark = pytest.mark.skipif(not GUNICORN.exists(), reason="run `make services`")


def _document(port: int, named: list[dict[str, Any]], **workload: Any) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/delay/{DELAY:g}"
    command = [str(GUNICORN), "--bind", f"127.0.0.1:{port}", "httpbin:app"]
    return {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "httpbin-variants"},
        "spec": {
            "service": {"command": joined(port, command) if available() else command,
                        "readyTimeout": "30s", "variants": {"named": named}},
            "workload": {"type": "http", "target": {"url": url},
                         **(workload or {"duration": f"{DURATION}s", "warmup": f"{WARMUP}s"})},
            "models": [{"model": "asyncio", "workers": [WORKERS]}],
        },
    }  # fmt: skip


def _named(name: str, args: list[str]) -> dict[str, Any]:
    env = [{"name": "CXLAB_TEST_CGROUP", "value": _group(name)}]
    return {"name": name, "args": args, "env": env}


def _group(variant: str) -> str:
    return f"cxlab-test-{os.getpid()}-{variant}"


def _marked(port: int) -> list[int]:
    """Processes whose command line binds this port: the service's, wherever they are."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"127.0.0.1:{port}".encode() in argv:
                found.append(int(entry.name))
    return found


def _start(tmp_path: Path, document: dict[str, Any], nice: int = 0) -> subprocess.Popen[str]:
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(document))
    return subprocess.Popen(
        [*CXLAB, "run", str(path), "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "CXLAB_TEST_CGROUP_OUT": str(tmp_path)},
        start_new_session=True,  # a SIGINT of the test's own reaches cxlab run only
        preexec_fn=functools.partial(_child, nice),
    )  # fmt: skip


def _child(nice: int) -> None:
    """cxlab run as a terminal starts it: Ctrl-C's SIGINT not ignored (make test runs the
    unit tests as a background job of a shell, whose children inherit SIGINT ignored), and
    niced (inherited by the runner and the service)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.nice(nice)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One run of the four variants, a trial each, and each variant's cgroup counters as the
    wrapper read them the moment cxlab run stopped it."""
    tmp_path = tmp_path_factory.mktemp("variants")
    port = free_port()
    groups = [Cgroup(_group(name)) for name in VARIANTS] if available() else []
    named = [_named(name, args) for name, args in VARIANTS.items()]
    # The theory holds for a service with its core to itself, as the static CPU manager gives a
    # cluster's Pods; here the other tests run beside it (and this machine's other work): at
    # the same priority they took a core's share from gthread, 128/s of its 160. Niced up, as
    # a measurement of one's own service would be run, the service and the generator get
    # their cores back whenever they need them.
    process = _start(tmp_path, _document(port, named), nice=MEASURED_NICE)
    try:
        out, err = process.communicate(timeout=180)
    finally:
        process.kill()
        for group in groups:
            group.remove()
    assert process.returncode == 0, f"{out}\n{err}"
    print(out)
    document = json.loads((tmp_path / "out" / "result.json").read_text())
    counters = {
        name: json.loads(path.read_text())
        for name in VARIANTS
        if (path := tmp_path / f"{_group(name)}.json").exists()
    }
    yield {"document": document, "counters": counters, "port": port, "out": out}


def _steady_rate(result: dict[str, Any]) -> float:
    """Requests completed per second after the warm-up and before the end, from the Result's
    timeline: the closed loop's throughputPerSecond divides by wall - warm-up, which holds
    the drain of the server's queue after the end (64 requests queued for 2 sync workers
    take 1.6 s), so it reads low against a server that queues."""
    timeline = result["timeline"]
    step = timeline["intervalSeconds"]
    first, last = round(WARMUP / step), round(DURATION / step)
    return sum(timeline["completed"][first:last]) / ((last - first) * step)


def _by_variant(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["variant"].split(" / ")[0]: t for t in document["status"]["trials"]}


@pytest.mark.quiet
def test_each_variant_serves_what_its_workers_allow(measured: dict[str, Any]) -> None:
    trials = _by_variant(measured["document"])
    rates = {name: _steady_rate(trials[name]["result"]) for name in VARIANTS}
    # gevent's bound: its one core, at the CPU it spent per request (at most; the machine's
    # two cores also run the generator, cxlab run and whatever else runs here)
    PREDICTED["gevent-2"] = 1 / trials["gevent-2"]["service"]["cpuPerRequestSeconds"]
    for name in VARIANTS:
        result, cpu = trials[name]["result"], trials[name]["service"]["cpuPerRequestSeconds"]
        # a worker is also busy for its own CPU in each request, beside the 50 ms wait
        serving = f"{WORKERS_OF.get(name, 0) / (DELAY + cpu):7.1f}/s" if name in WORKERS_OF else "-"
        print(f"{name:12} predicted {PREDICTED[name]:7.1f}/s (with its CPU {serving})  measured "
              f"{rates[name]:7.1f}/s (Result's throughputPerSecond "
              f"{result['throughputPerSecond']:.1f})")  # fmt: skip
    for name in WORKERS_OF:
        assert rates[name] == pytest.approx(PREDICTED[name], rel=TOLERANCE.get(name, 0.15)), name
    assert 2 * rates["gthread-2x4"] < rates["gevent-2"] < PREDICTED["gevent-2"] * 1.15


def _working_set_peak(kernel: dict[str, int]) -> int:
    """The group's peak as a working set: less the page cache of the files the service read
    at its start (charged to it on a cold machine, inactive since: cgroup_join.sh)."""
    return kernel["peakBytes"] - kernel["inactiveFileBytes"]


@pytest.mark.quiet
def test_the_service_figures_agree_with_its_cgroup(measured: dict[str, Any]) -> None:
    if not available():
        pytest.skip("no cgroup v1 cpuacct and memory hierarchy here")
    trials = _by_variant(measured["document"])
    for name in VARIANTS:
        figures, kernel = trials[name]["service"], measured["counters"][name]
        cpu, peak = kernel["cpuNanoseconds"] / 1e9, _working_set_peak(kernel)
        print(f"{name:12} cpu {figures['cpuSeconds']:.3f} s (cgroup {cpu:.3f} s)  "
              f"peak {figures['peakMemoryBytes'] / 2**20:.1f} MiB (cgroup {peak / 2**20:.1f} "
              f"MiB: less {kernel['inactiveFileBytes'] / 2**20:.1f} MiB of inactive page "
              f"cache left out)  restarts {figures['restarts']}")  # fmt: skip
    for name in VARIANTS:
        figures, kernel = trials[name]["service"], measured["counters"][name]
        assert figures["cpuSeconds"] == pytest.approx(kernel["cpuNanoseconds"] / 1e9, rel=0.10)
        assert figures["peakMemoryBytes"] == pytest.approx(_working_set_peak(kernel), rel=0.10)
        assert figures["restarts"] == 0


@pytest.mark.quiet  # reads the measured run: one run, in the quiet phase
def test_the_summary_carries_the_service_figures(measured: dict[str, Any]) -> None:
    points = measured["document"]["status"]["summary"]["points"]
    assert [p["variant"] for p in points] == [f"{name} / asyncio" for name in VARIANTS]
    trials = _by_variant(measured["document"])
    for point in points:
        figures = trials[point["variant"].split(" / ")[0]]["service"]
        assert point["serviceCpuSeconds"] == figures["cpuSeconds"]
        assert point["servicePeakMemoryBytes"] == figures["peakMemoryBytes"]
    assert "service cpu s" in measured["out"] and "generator cpu s" in measured["out"]


@pytest.mark.quiet  # reads the measured run: one run, in the quiet phase
def test_no_service_process_outlives_the_run(measured: dict[str, Any]) -> None:
    assert _marked(measured["port"]) == []


def test_a_variant_that_cannot_start_fails_alone(tmp_path: Path) -> None:
    port = free_port()
    named = [{"name": "broken", "args": ["--worker-class", "no-such-class"]},
             {"name": "sync-2", "args": VARIANTS["sync-2"]}]  # fmt: skip
    document = _document(port, named, tasks=20)
    document["spec"]["service"]["command"] = [str(GUNICORN), "--bind", f"127.0.0.1:{port}",
                                              "httpbin:app"]  # fmt: skip
    process = _start(tmp_path, document)
    out, _ = process.communicate(timeout=120)
    trials = _by_variant(json.loads((tmp_path / "out" / "result.json").read_text()))
    broken, working = trials["broken"], trials["sync-2"]
    assert broken["phase"] == "Failed", out
    assert broken["message"].startswith("service variant broken exited before it was ready ")
    assert "exit status" in broken["message"] and "no-such-class" in broken["message"]
    assert working["phase"] == "Succeeded" and working["result"]["tasksOk"] == 20
    assert _marked(port) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_leaves_no_service_process(tmp_path: Path, signum: int) -> None:
    port = free_port()
    named = [{"name": "sync-2", "args": VARIANTS["sync-2"]}]
    document = _document(port, named, duration="60s")
    document["spec"]["service"]["command"] = [str(GUNICORN), "--bind", f"127.0.0.1:{port}",
                                              "httpbin:app"]  # fmt: skip
    process = _start(tmp_path, document)
    try:
        deadline = time.monotonic() + 30
        while not answers(f"http://127.0.0.1:{port}/get") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_marked(port)) == 3  # the master and its 2 workers, the trial under way
        time.sleep(1)
        os.kill(process.pid, signum)
        process.communicate(timeout=30)
        assert _marked(port) == []
    finally:  # a failed check leaves nothing running: SIGTERM unwinds cxlab run
        if process.poll() is None:
            process.terminate()
            process.communicate(timeout=30)


def test_cxlab_run_refuses_what_a_process_cannot_have(tmp_path: Path) -> None:
    document = _document(free_port(), [{"name": "a", "image": "httpbin:2"}], tasks=5)
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(document))
    done = subprocess.run([*CXLAB, "run", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "spec.service.variants.named[0].image: cxlab run starts a command" in done.stderr
