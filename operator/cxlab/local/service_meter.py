"""The service's figures over one trial's window (cxlab.analysis.service_figures), from /proc
of its whole process tree: its CPU read at the window's ends, its memory (the members' PSS
summed) and its members sampled in between by a thread, so the peak is measured, never
estimated."""

from __future__ import annotations

import threading
import time

from cxlab.analysis.service_figures import ServiceFigures, per_request
from cxlab.local.proc_tree import (
    cpu_ticks,
    died,
    read_pss_bytes,
    read_stats,
    tree,
    window_cpu_seconds,
)
from cxlab.times import now
from cxlab_contract.proc_stat import ProcStat

# A sample this often. Reading PSS walks each process's page tables: 11.6 ms for httpbin's
# master and 4 sync workers, and finding the tree reads every /proc/PID/stat (2.9 ms here):
# every 0.5 s that is 3 % of a core (every 50 ms it would be 30 %, on the 2-core machine
# whose cores the service and the generator share with cxlab run). A server's memory grows
# with its requests over seconds; a spike shorter than this can be missed.
SAMPLE_SECONDS = 0.5


# Start-up has ended when the tree used at most this share of a core over SETTLE_SECONDS: a
# pre-forking server answers as soon as its first worker has imported the application, while
# the others still import theirs (httpbin under gunicorn: 0.3 s of CPU each), which would
# otherwise count in the first trial's window.
SETTLE_SECONDS = 0.2
SETTLED_SHARE = 0.05
SETTLE_POLL_SECONDS = 0.05


def settle(root: int, timeout: float) -> bool:
    """Wait until the tree's CPU over the last SETTLE_SECONDS is at most SETTLED_SHARE of a
    core (or `timeout` seconds have passed: False)."""
    deadline = time.monotonic() + timeout
    readings = [(time.monotonic(), cpu_ticks(tree(root, read_stats()).values()))]
    while time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_SECONDS)
        readings.append((time.monotonic(), cpu_ticks(tree(root, read_stats()).values())))
        old = [r for r in readings if r[0] <= readings[-1][0] - SETTLE_SECONDS]
        if old:
            since, ticks = old[-1]
            used = window_cpu_seconds(ticks, readings[-1][1])
            if used <= SETTLED_SHARE * (readings[-1][0] - since):
                return True
    return False


class TreeMeter:
    """Started as a trial's window opens, stopped as it closes."""

    def __init__(self, root: int, cores: int, interval: float = SAMPLE_SECONDS) -> None:
        self.root = root
        self.cores = cores
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self.seen: dict[int, int] = {}  # each process of the tree: the samples it was in
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)
        self._start_ticks = 0
        self._started = now()
        self._began = 0.0

    def start(self) -> TreeMeter:
        processes = tree(self.root, read_stats())
        self._started, self._began = now(), time.monotonic()
        self._start_ticks = cpu_ticks(processes.values())
        self._record(processes)
        self._thread.start()
        return self

    def _record(self, processes: dict[int, ProcStat]) -> None:
        for pid in processes:
            self.seen[pid] = self.seen.get(pid, 0) + 1
        live = [p.pid for p in processes.values() if p.state != "Z"]
        self.peak = max(self.peak, read_pss_bytes(live))
        self.samples += 1

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            self._record(tree(self.root, read_stats()))

    def stop(self, requests: int) -> ServiceFigures:
        """The window's figures; `requests`: those the trial completed in it."""
        self._stop.set()
        self._thread.join()
        end = tree(self.root, read_stats())
        self._record(end)
        cpu = window_cpu_seconds(self._start_ticks, cpu_ticks(end.values()))
        return ServiceFigures(
            cpu_seconds=round(cpu, 3),
            cpu_per_request_seconds=per_request(cpu, requests),
            peak_memory_bytes=self.peak,
            restarts=died(self.seen, self.root, end),
            samples=self.samples,
            started_at=self._started,
            window_seconds=round(time.monotonic() - self._began, 3),
            cores=self.cores,
        )
