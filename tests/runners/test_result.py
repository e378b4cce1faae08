"""Both runners, run for real: Results validate against the schema and hold real
measurements (wall >= floor, children accounted, pinned CPUs reported, metrics lint clean)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers import program, run_runner, runner_argv, scrape, wait_at_barrier
from prometheus_client.parser import text_string_to_metric_families

from cxlab.analysis.outcome import parse_result
from cxlab.barrier import release
from cxlab.local.delay_target import free_port
from cxlab_contract import runner_contract

PYTHON_MODELS = ["sequential", "threads", "processes", "gevent", "asyncio"]
ALL_MODELS = [*PYTHON_MODELS, "goroutines"]


@pytest.mark.parametrize("model", ALL_MODELS)
def test_sleep_trial_is_measured(model: str) -> None:
    result = run_runner(model, "--workload", "sleep", "--tasks", "40", "--workers", "10",
                        "--rtt", "20ms", "--experiment", "e", "--trial", "t1")  # fmt: skip
    workers = 1 if model == "sequential" else 10
    assert (result["model"], result["workers"], result["tasksOk"]) == (model, workers, 40)
    assert result["tasksFailed"] == 0 and result["errors"] == []
    assert result["floorSeconds"] == pytest.approx(40 / workers * 0.02)
    assert result["wallSeconds"] >= result["floorSeconds"]
    assert 0 < result["efficiency"] <= 1
    assert result["latencySeconds"]["p50"] >= 0.02
    assert result["latencySeconds"]["max"] >= result["latencySeconds"]["p99"]
    assert result["cpus"] == sorted(os.sched_getaffinity(0))
    assert result["peakRssBytes"] >= result["baselineRssBytes"] > 0
    assert (result["experiment"], result["trial"]) == ("e", "t1")
    assert result["host"]["cpuModel"] and result["host"]["kernel"] == os.uname().release
    assert len(json.dumps(result, separators=(",", ":"))) < 4096
    timeline = result["rssTimeline"]
    assert 1 <= len(timeline["rssBytes"]) <= 64
    assert timeline["intervalSeconds"] * len(timeline["rssBytes"]) >= result["wallSeconds"] / 2


@pytest.mark.parametrize("model", ["threads", "gevent", "asyncio", "goroutines"])
def test_zero_workers_means_one_per_task(model: str) -> None:
    # Long enough a sleep that all 300 are alive at once even on a busy machine (at 1 s, with
    # both cores busy, the first threads had ended before the last started: 283 seen).
    result = run_runner(model, "--workload", "sleep", "--tasks", "300", "--workers", "0",
                        "--rtt", "2s")  # fmt: skip
    assert result["workers"] == 300 and result["tasksOk"] == 300
    assert result["floorSeconds"] == pytest.approx(2.0)
    assert result["wallSeconds"] >= 2.0
    if model == "threads":
        assert result["peakThreads"] >= 300  # real OS threads, seen by the sampler


@pytest.mark.parametrize("model", [*PYTHON_MODELS, "locust", "goroutines"])
def test_http_trial_against_the_delay_target(model: str, target_url: str) -> None:
    result = run_runner(model, "--workload", "http", "--tasks", "30", "--workers", "10",
                        "--rtt", "50ms", "--target-url", target_url)  # fmt: skip
    assert result["tasksOk"] == 30, result["errors"]
    assert result["wallSeconds"] >= result["floorSeconds"] > 0
    assert result["latencySeconds"]["p50"] >= 0.05  # the target really waited


def test_every_runner_writes_the_same_host(target_url: str) -> None:
    # The schedules' environment fingerprint: on one machine the Python runner (Locust's path
    # too) and the Go runner write the same one, the kernel uname -r names.
    flags = ["--workload", "http", "--tasks", "2", "--workers", "1", "--rtt", "1ms"]
    hosts = {
        model: run_runner(model, *flags, "--target-url", target_url)["host"]
        for model in ("asyncio", "locust", "goroutines")
    }
    uname_r = subprocess.run(["uname", "-r"], capture_output=True, text=True, check=True)
    assert hosts["asyncio"] == hosts["locust"] == hosts["goroutines"], hosts
    assert hosts["goroutines"]["kernel"] == uname_r.stdout.strip()
    assert hosts["goroutines"]["cpuModel"] not in ("", "unknown")


class _CountingTarget(http.server.ThreadingHTTPServer):
    """A keep-alive HTTP/1.1 target that counts the connections it accepts."""

    daemon_threads = True
    accepted = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        self.accepted += 1  # one thread accepts: no lock needed
        super().process_request(request, client_address)


class _Reply(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the client says close
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK

    def do_GET(self) -> None:
        time.sleep(0.002)  # long enough that the workers' requests overlap
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: Any) -> None:
        pass


@pytest.mark.parametrize(
    "model", ["sequential", "threads", "processes", "asyncio", "gevent", "goroutines"]
)
@pytest.mark.parametrize("connection", ["reuse", "fresh"])
def test_http_connections_are_one_per_worker_or_one_per_task(model: str, connection: str) -> None:
    # The contract: reuse keeps one connection per worker (a worker's tasks take turns on it,
    # never two tasks on one connection at once), fresh opens one per task.
    with _CountingTarget(("127.0.0.1", 0), _Reply) as target:
        threading.Thread(target=target.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{target.server_address[1]}/"
        result = run_runner(model, "--workload", "http", "--tasks", "200", "--workers", "4",
                            "--rtt", "1ms", "--target-url", url,
                            "--connection", connection)  # fmt: skip
        target.shutdown()
    assert result["tasksOk"] == 200, result["errors"]
    if connection == "fresh":
        assert target.accepted == 200
    else:
        assert 1 <= target.accepted <= result["workers"], target.accepted


def test_a_shared_blocking_task_keeps_a_connection_per_thread() -> None:
    # threads' onDemand pool calls one task function from all its threads: each keeps its own
    # connection (one connection shared by threads failed a request in 2 of 400, and hung)
    from cxlab_runner.config import parse_config
    from cxlab_runner.workloads import blocking_task

    with _CountingTarget(("127.0.0.1", 0), _Reply) as target:
        threading.Thread(target=target.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{target.server_address[1]}/"
        flags = ["--model", "threads", "--workload", "http", "--tasks", "400", "--workers", "8",
                 "--rtt", "1ms", "--target-url", url, "--connection", "reuse"]  # fmt: skip
        task = blocking_task(parse_config(flags))
        errors: list[BaseException] = []

        def worker() -> None:
            for _ in range(50):
                try:
                    task()
                except Exception as error:  # every failure is the finding
                    errors.append(error)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        target.shutdown()
    assert errors == [] and target.accepted == 8, (errors[:3], target.accepted)


@pytest.mark.parametrize("model", ["threads", "asyncio", "goroutines"])
def test_failed_requests_are_counted_not_fatal(model: str) -> None:
    from cxlab.local.delay_target import free_port

    dead = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    result = run_runner(model, "--workload", "http", "--tasks", "5", "--workers", "5",
                        "--rtt", "10ms", "--target-url", dead)  # fmt: skip
    assert (result["tasksOk"], result["tasksFailed"]) == (0, 5)
    assert result["errors"][0]["count"] == 5
    assert "refused" in result["errors"][0]["message"].lower()


@pytest.mark.parametrize("model", ["sequential", "threads", "processes", "goroutines"])
def test_cpu_workload_burns_cpu(model: str) -> None:
    iterations = 200_000_000 if model == "goroutines" else 2_000_000  # compiled loops run faster
    result = run_runner(model, "--workload", "cpu", "--tasks", "2", "--workers", "2",
                        "--iterations", str(iterations))  # fmt: skip
    assert result["tasksOk"] == 2 and result["floorSeconds"] is None
    assert result["efficiency"] is None and result["iterations"] == iterations
    # the children's CPU is the trial's CPU (processes): the loops ran there, not in the parent
    assert result["cpuUserSeconds"] > 0.005
    # the share of the wall it burned: how large depends on what else the machine runs (a
    # cold CI run on a busy machine read 7.9 %), what it is made of does not
    cpu = result["cpuUserSeconds"] + result["cpuSystemSeconds"]
    wall = result["wallSeconds"]  # the CPU fields are rounded to 0.1 ms, the percent to 0.01
    assert result["cpuPercent"] == pytest.approx(100 * cpu / wall, abs=0.01 + 0.01 / wall)
    assert result["cpuPercent"] > 0


@pytest.mark.parametrize("model", ["threads", "gevent", "asyncio", "goroutines"])
def test_hold_keeps_every_task_alive(model: str) -> None:
    result = run_runner(model, "--workload", "hold", "--tasks", "500", "--hold", "300ms")
    assert result["holdSeconds"] == 0.3 and result["floorSeconds"] == pytest.approx(0.3)
    assert result["wallSeconds"] >= 0.3
    assert result["peakRssBytes"] > result["baselineRssBytes"]


def test_processes_memory_counts_children_once() -> None:
    one = run_runner(
        "processes", "--workload", "sleep", "--tasks", "2", "--workers", "1", "--rtt", "200ms"
    )
    many = run_runner(
        "processes", "--workload", "sleep", "--tasks", "8", "--workers", "8", "--rtt", "200ms"
    )
    assert many["peakThreads"] >= 9  # parent + 8 children
    # forked children share the parent's pages: proportional sizes, not 8 full copies
    assert many["peakRssBytes"] < 4 * one["peakRssBytes"]


def test_pinned_cpus_are_reported() -> None:
    core = sorted(os.sched_getaffinity(0))[-1]
    for model in ("asyncio", "goroutines"):
        completed = subprocess.run(
            runner_argv(model, "--workload", "sleep", "--tasks", "5", "--rtt", "1ms"),
            capture_output=True, text=True, check=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {core}),
        )  # fmt: skip
        assert json.loads(completed.stdout)["cpus"] == [core]


@pytest.mark.parametrize(
    ("model", "flags"),
    [
        ("asyncio", ["--workload", "sleep", "--tasks", "0"]),
        ("asyncio", ["--workload", "sleep", "--tasks", "5", "--workers", "-1"]),
        ("asyncio", ["--workload", "sleep", "--tasks", "5", "--rtt", "soon"]),
        ("asyncio", ["--workload", "sleep", "--tasks", "5", "--gomaxprocs", "2"]),
        ("locust", ["--workload", "sleep", "--tasks", "5"]),
        ("threads", ["--workload", "http", "--tasks", "5"]),
        # the same --target-url rule in both runners (the contract's targetUrlSchemes)
        ("threads", ["--workload", "http", "--tasks", "5", "--target-url", "ftp://127.0.0.1:1/"]),
        ("asyncio", ["--workload", "http", "--tasks", "5", "--target-url", "http:///nohost"]),
        (
            "goroutines",
            ["--workload", "http", "--tasks", "5", "--target-url", "ftp://127.0.0.1:1/"],
        ),
        ("goroutines", ["--workload", "http", "--tasks", "5", "--target-url", "http:///nohost"]),
        ("goroutines", ["--workload", "sleep", "--tasks", "5", "--rtt", "soon"]),
        ("goroutines", ["--workload", "disk", "--tasks", "5"]),
        # a pool is threads' and processes' only, and processes' is prestarted
        ("processes", ["--workload", "sleep", "--tasks", "5", "--pool", "onDemand"]),
        ("asyncio", ["--workload", "sleep", "--tasks", "5", "--pool", "prestarted"]),
        ("threads", ["--workload", "sleep", "--tasks", "5", "--pool", "lazy"]),
        ("goroutines", ["--workload", "sleep", "--tasks", "5", "--pool", "prestarted"]),
    ],
)
def test_bad_flags_exit_2_with_a_message(model: str, flags: list[str]) -> None:
    completed = subprocess.run(runner_argv(model, *flags), capture_output=True, text=True)
    assert completed.returncode == 2
    assert completed.stdout == "" and completed.stderr.strip()


def _metrics_after_finish(model: str, port: int) -> str:
    process = subprocess.Popen(
        runner_argv(model, "--workload", "sleep", "--tasks", "50", "--workers", "5",
                    "--rtt", "20ms", "--metrics-port", str(port), "--linger", "5s"),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        process.stdout.readline()  # the Result: the tasks are done, the runner now lingers
        text = scrape(port)
    finally:
        process.terminate()
        process.wait()
    return text


@pytest.mark.parametrize("model", ["asyncio", "processes", "gevent", "goroutines"])
def test_metrics_endpoint_passes_promtool(model: str, metrics_port: int) -> None:
    text = _metrics_after_finish(model, metrics_port)
    lint = subprocess.run([program("promtool"), "check", "metrics"], input=text,
                          capture_output=True, text=True)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(lines['cxlab_tasks_completed_total{outcome="ok"}']) == 50
    assert float(lines["cxlab_task_duration_seconds_count"]) == 50
    assert float(lines["cxlab_trial_finished"]) == 1
    assert float(lines["cxlab_tasks_in_flight"]) == 0
    assert float(lines["cxlab_peak_rss_bytes"]) > 0
    assert any(key.startswith("cxlab_trial_info{") for key in lines)
    assert all(key.startswith("cxlab_") for key in lines)


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_both_runners_expose_exactly_the_contracts_metrics(model: str, metrics_port: int) -> None:
    text = _metrics_after_finish(model, metrics_port)
    exposed = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    assert exposed == runner_contract().metrics


def test_a_scrape_that_says_finished_has_every_tasks_count() -> None:
    # The last task and the phase's end fall between a scrape's reads of the counts and of
    # cxlab_trial_finished: the scrape says 0 (and the next one 1 with the final counts),
    # never 1 beside the count from before the last task.
    from prometheus_client import CollectorRegistry, generate_latest

    from cxlab_runner.measure import Sampler
    from cxlab_runner.metrics import TrialCollector
    from cxlab_runner.phase import TaskPhase
    from cxlab_runner.recorder import TaskRecorder

    class LastTaskEndsDuringAScrape(TaskRecorder):
        def failed_count(self) -> int:  # read after ok_count: the last task ends in between
            if phase.finished is None:
                self.started()
                self.ok(0.01)
                phase.end()
            return super().failed_count()

    recorder = LastTaskEndsDuringAScrape()
    phase = TaskPhase(Sampler())
    phase.begin()
    registry = CollectorRegistry()
    registry.register(TrialCollector({"trial": "t"}, 1, recorder, phase))

    def scraped() -> tuple[float, float]:
        lines = generate_latest(registry).decode().splitlines()
        value = {line.split()[0]: float(line.split()[1]) for line in lines if line[:1] != "#"}
        return value["cxlab_trial_finished"], value['cxlab_tasks_completed_total{outcome="ok"}']

    assert scraped() == (0.0, 0.0)  # the task ended after this scrape read its counts
    assert scraped() == (1.0, 1.0)


def test_progress_is_visible_while_running(metrics_port: int) -> None:
    process = subprocess.Popen(
        runner_argv("threads", "--workload", "sleep", "--tasks", "40", "--workers", "2",
                    "--rtt", "100ms", "--metrics-port", str(metrics_port)),
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:  # until the first tasks are done; the task phase lasts 2 s
            text = scrape(metrics_port)
            lines = [line for line in text.splitlines() if not line.startswith("#")]
            samples = dict(line.rsplit(" ", 1) for line in lines)
            done = float(samples['cxlab_tasks_completed_total{outcome="ok"}'])
            if done > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        process.wait()
    assert 0 < done < 40
    assert float(samples["cxlab_tasks_in_flight"]) == 2
    assert float(samples["cxlab_trial_finished"]) == 0


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_peak_memory_is_the_runners_own_not_its_parents(model: str) -> None:
    ballast = bytearray(300 * 2**20)  # the parent's peak, which ru_maxrss would carry over exec
    ballast[::4096] = b"x" * len(ballast[::4096])
    completed = subprocess.run(
        runner_argv(model, "--workload", "sleep", "--tasks", "5", "--rtt", "1ms"),
        capture_output=True, text=True, check=True,
        preexec_fn=lambda: None,  # forces fork + exec, as the local backend does
    )  # fmt: skip
    del ballast
    assert json.loads(completed.stdout)["peakRssBytes"] < 150 * 2**20


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_failed_tasks_are_no_latency(model: str, metrics_port: int) -> None:
    from cxlab.local.delay_target import free_port

    dead = f"http://127.0.0.1:{free_port()}/"
    process = subprocess.Popen(
        runner_argv(model, "--workload", "http", "--tasks", "3", "--rtt", "1ms",
                    "--target-url", dead, "--metrics-port", str(metrics_port), "--linger", "5s"),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        result = json.loads(process.stdout.readline())
        text = scrape(metrics_port)
    finally:
        process.terminate()
        process.wait()
    assert result["tasksFailed"] == 3 and result["latencySeconds"]["max"] == 0
    assert "cxlab_task_duration_seconds_count 0" in text.replace(".0\n", "\n")


def test_result_is_written_in_place_where_no_sibling_file_can_be_made(tmp_path: Path) -> None:
    # Like /dev/termination-log, where the runner may write the file but create nothing
    # beside it: here the sibling the rename would use is in the way.
    target = tmp_path / "termination-log"
    (tmp_path / "termination-log.partial").mkdir()
    completed = subprocess.run(
        runner_argv("asyncio", "--workload", "sleep", "--tasks", "3", "--rtt", "1ms",
                    "--result-path", str(target)),
        capture_output=True, text=True,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert json.loads(target.read_text()) == json.loads(completed.stdout)


def _host_pid_of_namespace_init(unshare: subprocess.Popen[str], argv: list[str]) -> int:
    """The host PID of the process `unshare --fork` started as PID 1, once it has exec'd argv."""
    children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and unshare.poll() is None:
        pids = children.read_text().split()
        if pids:
            try:
                cmdline = Path(f"/proc/{pids[0]}/cmdline").read_text().split("\0")[:-1]
            except FileNotFoundError:
                cmdline = []
            if cmdline == argv:
                return int(pids[0])
        time.sleep(0.01)
    unshare.kill()
    _, stderr = unshare.communicate()
    pytest.fail(f"unshare did not start the runner as PID 1: {stderr.strip()}")


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for signum (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


@pytest.mark.parametrize("model", ["asyncio", "threads", "gevent", "goroutines"])
def test_sigterm_stops_a_trial_at_once(model: str) -> None:
    # In a container the runner is PID 1 of its PID namespace, and the kernel drops a signal
    # sent to a namespace's init from outside unless init has a handler for it. Outside such a
    # namespace the default action would kill the runner, handler or not: run it as PID 1.
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("running the runner as PID 1 needs root and unshare (util-linux)")
    argv = runner_argv(model, "--workload", "sleep", "--tasks", "2", "--rtt", "30s")
    unshare = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    init = 0
    try:
        init = _host_pid_of_namespace_init(unshare, argv)
        # Until the runner is ready (the Python one installs its handler after its imports),
        # or at most 10 s: a runner that never installs one gets the signal all the same.
        deadline = time.monotonic() + 10
        while not _catches(init, signal.SIGTERM) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # into the trial's 30 s tasks
        started = time.monotonic()
        os.kill(init, signal.SIGTERM)
        try:
            stdout, stderr = unshare.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("the runner, as PID 1, was still running 10 s after SIGTERM")
        assert time.monotonic() - started < 10  # not the 30 s of the task
    finally:
        if unshare.poll() is None:  # SIGKILL from outside ends the namespace's init, and all
            if init:
                os.kill(init, signal.SIGKILL)
            unshare.kill()
            unshare.communicate()
    # No Result from a stopped trial; what only the runners' handlers produce (the Go runtime's
    # own handling would exit with 2, the usage status): the message and 128+15.
    assert stdout == "", stderr
    assert "stopped by SIGTERM" in stderr
    # unshare passes the status on
    assert unshare.returncode == runner_contract().exit_status["stoppedBySIGTERM"] == 143


@pytest.mark.parametrize("wait", ["--linger", "--final-read"])
@pytest.mark.parametrize("model", ["asyncio", "gevent", "goroutines"])
def test_sigterm_while_lingering_ends_the_linger_and_the_trial_succeeds(
    model: str, wait: str, metrics_port: int
) -> None:
    process = subprocess.Popen(
        runner_argv(model, "--workload", "sleep", "--tasks", "3", "--rtt", "1ms",
                    "--metrics-port", str(metrics_port), wait, "30s"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        result = json.loads(process.stdout.readline())  # written: the runner now lingers
        started = time.monotonic()
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert time.monotonic() - started < 10  # not the 30 s linger
    assert process.returncode == runner_contract().exit_status["ok"], stderr
    assert result["tasksOk"] == 3


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.parametrize("model", ["threads", "gevent", "asyncio", "goroutines"])
def test_both_runners_wait_for_their_final_read(model: str, metrics_port: int) -> None:
    """With --final-read, /done answers 200 once the Result is written, and the runner stays
    until a GET /metrics?final=1 (not a plain scrape), which sees the final counts."""
    argv = runner_argv(model, "--workload", "sleep", "--tasks", "3", "--rtt", "1ms",
                       "--metrics-port", str(metrics_port), "--final-read", "30s")  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        result = json.loads(process.stdout.readline())  # written: the runner now waits
        deadline = time.monotonic() + 5
        while _get(metrics_port, "/done")[0] != 200:
            assert time.monotonic() < deadline, "/done never answered 200"
            time.sleep(0.02)
        assert _get(metrics_port, "/metrics")[0] == 200
        time.sleep(0.3)
        assert process.poll() is None, "exited before its final read"
        status, final = _get(metrics_port, "/metrics?final=1")
        started = time.monotonic()
        _, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert time.monotonic() - started < 5  # not the 30 s bound
    assert process.returncode == 0 and "no final read" not in stderr, stderr
    samples = {
        (sample.name, sample.labels.get("outcome")): sample.value
        for family in text_string_to_metric_families(final)
        for sample in family.samples
    }
    assert status == 200 and samples[("cxlab_trial_finished", None)] == 1
    assert samples[("cxlab_tasks_completed_total", "ok")] == 3
    assert result["tasksOk"] == 3


@pytest.mark.parametrize("model", ["threads", "gevent", "asyncio", "goroutines"])
def test_both_runners_answer_a_long_poll_of_done_when_the_tasks_end(
    model: str, metrics_port: int
) -> None:
    """GET /done?wait=S, the operator's long poll: asked while the tasks run it answers 200
    once the Result is written (not 503 at once); a wait that ends first answers 503, not
    before S."""
    argv = runner_argv(model, "--workload", "sleep", "--tasks", "2", "--workers", "1",
                       "--rtt", "400ms", "--metrics-port", str(metrics_port),
                       "--final-read", "30s")  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while _status(metrics_port, "/metrics") != 200:
            assert time.monotonic() < deadline and process.poll() is None, "never served"
            time.sleep(0.02)
        began = time.monotonic()
        assert _get(metrics_port, "/done?wait=0.1")[0] == 503
        assert time.monotonic() - began >= 0.1
        assert _get(metrics_port, "/done?wait=30") == (200, "done\n")
        status, body = _get(metrics_port, "/result")
        assert status == 200 and json.loads(body)["tasksOk"] == 2
        assert _get(metrics_port, "/metrics?final=1")[0] == 200
        _, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr


def _get_bytes(port: int, path: str) -> tuple[int, str, bytes]:
    """The status, Content-Type and body as sent."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def _status(port: int, path: str) -> int | None:
    """None while nothing listens."""
    try:
        return _get_bytes(port, path)[0]
    except urllib.error.URLError:
        return None


def _result_once_written(port: int, process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """The Result line on stdout, then GET /result's body once it answers 200 (JSON); the
    runner, waiting for its final read, must not have taken GET /result for it."""
    assert process.stdout is not None
    line = process.stdout.readline()  # written: the runner now waits for its final read
    deadline = time.monotonic() + 5
    while (answer := _get_bytes(port, "/result"))[0] != 200:
        assert time.monotonic() < deadline, f"/result never answered 200: {answer}"
        time.sleep(0.02)
    assert answer[1] == "application/json"
    time.sleep(0.3)
    assert process.poll() is None, "GET /result was taken for the final read"
    return line, answer[2]


def _ends_after_its_final_read(port: int, process: subprocess.Popen[bytes]) -> bytes:
    """The rest of its stdout."""
    assert _get(port, "/metrics?final=1")[0] == 200
    stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 0 and b"no final read" not in stderr, stderr
    return stdout


@pytest.mark.parametrize("model", [*PYTHON_MODELS, "locust", "goroutines"])
def test_both_runners_answer_their_result_once_written_and_it_is_no_final_read(
    model: str, metrics_port: int, target_url: str, tmp_path: Path
) -> None:
    """GET /result answers 503 running until the Result is written, then the Result itself:
    the very bytes of stdout and --result-path. A runner with --final-read still waits."""
    path = tmp_path / "result.json"
    argv = runner_argv(model, "--workload", "http", "--target-url", target_url, "--tasks", "2",
                       "--workers", "1", "--rtt", "300ms", "--metrics-port", str(metrics_port),
                       "--barrier-timeout", "30s", "--final-read", "30s",
                       "--result-path", str(path))  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    address = f"127.0.0.1:{metrics_port}"
    try:
        wait_at_barrier(address, process, 30)
        waiting = _get_bytes(metrics_port, "/result")  # at the barrier
        assert release([address]) == []
        running = _get_bytes(metrics_port, "/result")  # two tasks of 300 ms, one at a time
        line, body = _result_once_written(metrics_port, process)
        _ends_after_its_final_read(metrics_port, process)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    for status, content_type, text in (waiting, running):
        assert (status, text) == (503, b"running\n") and content_type.startswith("text/plain")
    assert body == line == path.read_bytes()
    assert parse_result(body.decode())["tasksOk"] == 2


def test_a_distributed_locust_master_and_worker_answer_their_own_result(
    target_url: str,
) -> None:
    master_port, worker_port = free_port(), free_port()
    flags = ["--workload", "http", "--target-url", target_url, "--rtt", "1ms", "--tasks", "4",
             "--workers", "2", "--locust-master", f"127.0.0.1:{free_port()}",
             "--final-read", "30s"]  # fmt: skip
    master = subprocess.Popen(
        runner_argv("locust", *flags, "--expect-workers", "1", "--barrier-timeout", "60s",
                    "--metrics-port", str(master_port), "--pod", "1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    runs = [master]
    try:
        wait_at_barrier(f"127.0.0.1:{master_port}", master, 30)  # it waits for its worker
        waiting = _get_bytes(master_port, "/result")
        worker = subprocess.Popen(
            runner_argv("locust", *flags, "--metrics-port", str(worker_port), "--pod", "0"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        runs.append(worker)
        # The master ends first: once its statistics count every task it tells the worker
        # to quit, and the worker's Result follows.
        master_line, master_body = _result_once_written(master_port, master)
        worker_line, worker_body = _result_once_written(worker_port, worker)
        for port, run in ((master_port, master), (worker_port, worker)):
            _ends_after_its_final_read(port, run)
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.communicate()
    assert waiting[0] == 503 and waiting[2] == b"running\n"
    assert master_body == master_line and worker_body == worker_line
    assert parse_result(master_body.decode())["locustWorkers"] == 1
    assert parse_result(worker_body.decode())["locustWorkers"] is None


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_runner_traced_for_syscalls_answers_no_result_but_its_outer_runners(
    metrics_port: int,
) -> None:
    """Under strace the traced run's Result lacks the counts, which the outer runner adds
    after it exits: its GET /result stays 503 while its /done answers 200."""
    argv = runner_argv("sequential", "--workload", "sleep", "--tasks", "1", "--rtt", "1ms",
                       "--metrics-port", str(metrics_port), "--final-read", "30s",
                       "--syscalls")  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while _status(metrics_port, "/done") != 200:  # the traced run's end
            assert process.poll() is None and time.monotonic() < deadline, "never done"
            time.sleep(0.02)
        answer = _get_bytes(metrics_port, "/result")
        stdout = _ends_after_its_final_read(metrics_port, process)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    counted = parse_result(stdout.decode())["syscalls"]
    if "unavailable" in counted:
        pytest.skip(f"no strace here: {counted}")
    assert answer[0] == 503 and answer[2] == b"running\n"


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_a_final_read_that_never_comes_ends_the_wait_after_its_bound(
    model: str, metrics_port: int
) -> None:
    began = time.monotonic()
    completed = subprocess.run(
        runner_argv(model, "--workload", "sleep", "--tasks", "1", "--metrics-port",
                    str(metrics_port), "--final-read", "500ms"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert time.monotonic() - began >= 0.5
    assert "no final read of /metrics within 500ms" in completed.stderr
    assert json.loads(completed.stdout)["tasksOk"] == 1


@pytest.mark.parametrize("model", ["asyncio", "gevent", "processes", "goroutines"])
def test_both_runners_wait_at_the_barrier_until_released(model: str, metrics_port: int) -> None:
    argv = runner_argv(model, "--workload", "sleep", "--tasks", "5", "--rtt", "1ms",
                       "--metrics-port", str(metrics_port), "--barrier-timeout", "20s",
                       "--pod", "1")  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    address = f"127.0.0.1:{metrics_port}"
    try:
        wait_at_barrier(address, process, 15)
        time.sleep(0.3)
        assert process.poll() is None  # it waits: no task may start before the release
        assert scrape(metrics_port).count('cxlab_tasks_completed_total{outcome="ok"} 0') == 1
        released = time.time()
        assert release([address]) == []
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    result = parse_result(stdout)
    assert result["podIndex"] == 1 and result["pods"] == 1 and result["startSkewSeconds"] is None
    assert result["barrierWaitSeconds"] >= 0.3
    assert result["startedAtUnixSeconds"] >= released - 0.01  # began when it was released


@pytest.mark.parametrize("model", ["asyncio", "goroutines"])
def test_a_runner_never_released_exits_3_without_a_result(model: str, metrics_port: int) -> None:
    flags = ["--metrics-port", str(metrics_port), "--barrier-timeout", "300ms"]
    argv = runner_argv(model, "--workload", "sleep", "--tasks", "5", "--rtt", "1ms", *flags)
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert completed.returncode == runner_contract().exit_status["notReleased"] == 3
    assert completed.stdout == ""
    assert "not released from the start barrier within 300ms" in completed.stderr


def test_the_rss_timeline_spans_the_trial_when_its_sampler_was_not_scheduled() -> None:
    """A busy machine can leave the sampler process unscheduled for many of its intervals,
    up to the end of the tasks (here it is stopped from 0.1 s until after the end): the
    samples it missed take the value of the next it takes, so sample k still stands for
    k x interval and the timeline spans the whole trial (a loaded test run saw three samples
    of 50 ms for a trial of 0.42 s)."""
    runner = subprocess.Popen(
        runner_argv("asyncio", "--workload", "sleep", "--tasks", "30", "--workers", "1",
                    "--rtt", "20ms"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        sampler = None
        while sampler is None and time.monotonic() < deadline:
            children = Path(f"/proc/{runner.pid}/task/{runner.pid}/children").read_text()
            for child in children.split():
                if b"sampler_process" in Path(f"/proc/{child}/cmdline").read_bytes():
                    sampler = int(child)
            time.sleep(0.01)
        assert sampler is not None, "no sampler process"
        time.sleep(0.1)
        os.kill(sampler, signal.SIGSTOP)
        time.sleep(1.5)  # the 0.6 s of tasks end meanwhile; the runner waits for its sampler
        os.kill(sampler, signal.SIGCONT)
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, err
    result = parse_result(out)
    timeline = result["rssTimeline"]
    spanned = timeline["intervalSeconds"] * len(timeline["rssBytes"])
    assert spanned >= result["wallSeconds"] - 2 * timeline["intervalSeconds"], timeline
