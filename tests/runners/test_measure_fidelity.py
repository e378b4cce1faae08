"""What the seeds measured, measured the same way (issue 11): ThreadPoolExecutor's on-demand
thread start-up, VmPeak beside VmHWM, the task threads' own context switches, and system
calls counted by strace or said to be unavailable."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess

import pytest
from helpers import parse_result, run_runner, runner_argv

from cxlab_contract import runner_contract
from cxlab_runner.measure import Sampler, Switches
from cxlab_runner.phase import TaskPhase
from cxlab_runner.syscalls import parse_summary


def test_the_on_demand_pool_never_starts_more_than_w() -> None:
    # 200 tasks that all sleep at once: every submit finds no idle thread, so it starts one
    # until W = 50 run; the other 150 wait in the queue.
    result = run_runner("threads", "--workload", "sleep", "--tasks", "200", "--workers", "50",
                        "--rtt", "200ms")  # fmt: skip
    assert result["workersStarted"] == 50 and result["tasksOk"] == 200
    assert result["wallSeconds"] >= 4 * 0.2


def test_threads_default_to_the_on_demand_pool_which_starts_fewer_than_w() -> None:
    # Tasks end at once (rtt 0): a submit almost always finds an idle thread, as
    # ThreadPoolExecutor(max_workers=1000) would; the prestarted pool starts all 1,000.
    flags = ["--workload", "sleep", "--tasks", "1000", "--workers", "1000", "--rtt", "0s"]
    lazy = run_runner("threads", *flags)
    eager = run_runner("threads", *flags, "--pool", "prestarted")
    assert (lazy["pool"], eager["pool"]) == ("onDemand", "prestarted")
    assert lazy["workers"] == eager["workers"] == 1000
    assert eager["workersStarted"] == 1000
    assert 1 <= lazy["workersStarted"] < 500
    assert lazy["peakThreads"] < 500


def test_processes_run_a_prestarted_pool_and_other_models_none() -> None:
    flags = ["--workload", "sleep", "--tasks", "4", "--workers", "2", "--rtt", "10ms"]
    assert run_runner("processes", *flags)["pool"] == "prestarted"
    for model in ("sequential", "asyncio", "gevent", "goroutines"):
        result = run_runner(model, *flags)
        assert result["pool"] is None and result["workersStarted"] >= 1


def test_peak_virtual_memory_is_reported_beside_resident_memory() -> None:
    # 500 threads each reserve a stack of the soft stack limit (8 MiB by default), touched
    # or not: the greenlets seed's "82 GB for 10,000 threads" is this, not RSS. All 500 are
    # alive at once only if the last starts before the first's task ends: 2 s, as starting
    # them took over 0.5 s with the cores busy (411 alive at the peak then).
    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    result = run_runner("threads", "--workload", "sleep", "--tasks", "500", "--workers", "500",
                        "--rtt", "2s", "--pool", "prestarted")  # fmt: skip
    assert result["peakVmBytes"] > result["peakRssBytes"]
    if 0 < stack < 2**30:
        assert result["peakVmBytes"] >= 500 * stack
    for model in ("processes", "goroutines"):
        other = run_runner(model, "--workload", "sleep", "--tasks", "4", "--workers", "2",
                           "--rtt", "10ms")  # fmt: skip
        assert other["peakVmBytes"] >= other["peakRssBytes"] > 0


def _cpu(model: str, *extra: str) -> dict[str, object]:
    return run_runner(model, "--workload", "cpu", "--tasks", "2", "--workers", "2",
                      "--iterations", "3000000", *extra)  # fmt: skip


def test_task_threads_switch_as_the_gil_seed_says() -> None:
    # The GIL seed: a sequential count loop switches (almost) never, as a bare program;
    # two threads fighting for the GIL switch at every hand-over. Sampling happens in a
    # process of its own, so no runner thread takes the GIL from the task threads.
    sequential, threads = _cpu("sequential"), _cpu("threads")
    task = sequential["taskContextSwitches"]
    assert isinstance(task, dict) and task["voluntary"] <= 5
    assert sequential["voluntaryContextSwitches"] <= 5  # the process's, sampler not in it
    other = threads["taskContextSwitches"]
    assert isinstance(other, dict) and other["voluntary"] >= 10
    processes = _cpu("processes")["taskContextSwitches"]
    assert isinstance(processes, dict) and processes["voluntary"] <= 10  # no GIL to share
    assert _cpu("goroutines")["taskContextSwitches"] is None  # one runtime, shared threads


def test_the_task_switches_of_a_phase_sum_its_threads() -> None:
    phase = TaskPhase(Sampler())
    phase.tasks_off_main_thread = True
    phase.add_task_switches(Switches(2, 1))
    phase.add_task_switches(Switches(3, 0))
    assert phase.task_switches() == Switches(5, 1)


SUMMARY = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 77.95    0.235048        2938     54446        40 futex
  3.48    0.010493           7      1372       589 openat
  2.59    0.007820           8       951           mmap
------ ----------- ----------- --------- --------- ----------------
100.00    0.301555          32     56769       629 total
"""


def test_strace_summaries_are_read_with_and_without_an_errors_column() -> None:
    assert parse_summary(SUMMARY) == {
        "total": 56769,
        "counts": {"futex": 54446, "openat": 1372, "mmap": 951},
    }
    assert parse_summary("strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted\n") is None
    many = "\n".join(f"1.0 0.1 1 {1000 - i} {n} call{i}" for i, n in enumerate(range(20)))
    counted = parse_summary(many + "\n0.1 0.1 1 3 futex\n")
    assert counted is not None and len(counted["counts"]) == 12 and "futex" in counted["counts"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_syscalls_are_counted_with_strace_futex_included() -> None:
    threads = _cpu("threads", "--syscalls")
    counted = threads["syscalls"]
    assert isinstance(counted, dict) and counted["total"] > 0
    assert counted["counts"]["futex"] > 0
    assert _cpu("threads")["syscalls"] is None  # not asked for: not traced


def test_syscalls_without_strace_are_unavailable_never_zero(tmp_path: object) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no strace on it
    argv = runner_argv("sequential", "--workload", "cpu", "--tasks", "1", "--iterations", "10",
                       "--syscalls")  # fmt: skip
    completed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert completed.returncode == 0, completed.stderr
    result = parse_result(completed.stdout)
    assert result["syscalls"] == {"unavailable": "strace is not installed where the runner runs"}
    go = _cpu("goroutines", "--syscalls")["syscalls"]
    assert isinstance(go, dict) and "unavailable" in go


def test_the_contract_names_the_new_flags() -> None:
    assert runner_contract().flags["pool"] == "" and runner_contract().flags["syscalls"] == "false"
