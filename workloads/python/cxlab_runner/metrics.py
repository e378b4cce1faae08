"""The runner's Prometheus endpoint: every value is computed at scrape time from the recorder
and the kernel, so a task pays nothing for being observable (names: workloads/CONTRACT.md)."""

from __future__ import annotations

import bisect
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from cxlab_contract import runner_contract
from cxlab_runner import measure
from cxlab_runner.barrier import StartBarrier
from cxlab_runner.end import EndOfTasks
from cxlab_runner.phase import TaskPhase
from cxlab_runner.recorder import TaskRecorder

LATENCY_BUCKETS = runner_contract().latency_buckets_seconds


@dataclass
class _Histogram:
    """Bins latencies recorded since the last scrape; earlier ones are already counted."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0
    binned: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, latencies: list[float]) -> None:
        with self.lock:
            end = len(latencies)
            for value in latencies[self.binned : end]:
                self.counts[bisect.bisect_left(LATENCY_BUCKETS, value)] += 1
                self.total += value
            self.binned = end

    def buckets(self) -> list[tuple[str, float]]:
        cumulative, out = 0, list[tuple[str, float]]()
        for bound, count in zip((*LATENCY_BUCKETS, float("inf")), self.counts, strict=True):
            cumulative += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        return out


class TrialCollector(Collector):
    def __init__(
        self,
        info: dict[str, str],
        tasks: int,
        recorder: TaskRecorder,
        phase: TaskPhase,
        rate_at: Callable[[float], float] | None = None,
    ) -> None:
        self._info = info
        self._tasks = tasks
        self._recorder = recorder
        self._phase = phase
        self._histogram = _Histogram()
        self._waits = _Histogram()
        self._rate_at = rate_at  # an arrival run's scheduled rate at a time into the phase

    def collect(self) -> Iterator[Metric]:
        # Finished is read first: a scrape that says 1 has every task's count, however the last
        # task and the phase's end fall between the reads below (as the Go runner reads it).
        finished = self._phase.finished is not None
        recorder = self._recorder.current()
        yield InfoMetricFamily("cxlab_trial", "What this trial runs.", value=self._info)
        yield GaugeMetricFamily("cxlab_trial_tasks", "Tasks planned.", value=self._tasks)
        yield from self._task_metrics(recorder)
        yield from self._arrival_metrics(recorder, finished)
        yield from _process_metrics(self._phase.sampler)
        yield GaugeMetricFamily(
            "cxlab_trial_elapsed_seconds",
            "Time since the task phase began; frozen at its end.",
            value=self._phase.elapsed(),
        )
        yield GaugeMetricFamily(
            "cxlab_trial_finished",
            "1 once every task has ended.",
            value=float(finished),
        )

    def _task_metrics(self, recorder: TaskRecorder) -> Iterator[Metric]:
        """The tasks' counts, in flight and by outcome and kind, and their latencies."""
        completed = CounterMetricFamily(
            "cxlab_tasks_completed", "Tasks finished, by outcome.", labels=["outcome"]
        )
        completed.add_metric(["ok"], recorder.ok_count())
        completed.add_metric(["failed"], recorder.failed_count())
        yield completed
        failures = CounterMetricFamily(
            "cxlab_task_failures", "Failed tasks, by kind.", labels=["kind"]
        )
        kinds = cast(Mapping[str, int], recorder.failure_kinds())
        for kind, count in kinds.items():  # every kind, from the first scrape
            failures.add_metric([kind], count)
        yield failures
        yield GaugeMetricFamily(
            "cxlab_tasks_in_flight", "Tasks started and not finished.", value=recorder.in_flight()
        )
        self._histogram.update(self._recorder.latencies)
        yield HistogramMetricFamily(
            "cxlab_task_duration_seconds",
            "Latency of each successful task, from its scheduled start for arrivals.",
            buckets=self._histogram.buckets(),
            sum_value=self._histogram.total,
        )

    def _arrival_metrics(self, recorder: TaskRecorder, finished: bool) -> Iterator[Metric]:
        """An arrival run's generator and queue (zeros in a closed one)."""
        yield CounterMetricFamily(
            "cxlab_arrivals", "Arrivals issued.", value=recorder.issued_count()
        )
        yield CounterMetricFamily(
            "cxlab_arrivals_dropped",
            "Arrivals dropped with every worker busy.",
            value=recorder.dropped_count(),
        )
        yield GaugeMetricFamily(
            "cxlab_arrival_queue_length",
            "Arrivals issued and waiting for a worker.",
            value=recorder.queue_length(),
        )
        rate = 0.0
        if self._rate_at is not None and self._phase.started is not None and not finished:
            rate = self._rate_at(self._phase.elapsed())
        yield GaugeMetricFamily(
            "cxlab_arrival_rate", "The scheduled arrival rate now, per second.", value=rate
        )
        self._waits.update(self._recorder.waits)
        yield HistogramMetricFamily(
            "cxlab_task_queue_wait_seconds",
            "Each started task's wait for a worker.",
            buckets=self._waits.buckets(),
            sum_value=self._waits.total,
        )


def _process_metrics(sampler: measure.Sampler) -> Iterator[Metric]:
    """The process's CPU, context switches, memory and threads, children included."""
    used = sampler.cpu_usage()
    yield CounterMetricFamily(
        "cxlab_cpu_user_seconds", "User CPU time, children included.", value=used.user_seconds
    )
    yield CounterMetricFamily(
        "cxlab_cpu_system_seconds",
        "System CPU time, children included.",
        value=used.system_seconds,
    )
    switches = CounterMetricFamily(
        "cxlab_context_switches", "Context switches of the process.", labels=["kind"]
    )
    switches.add_metric(["voluntary"], used.voluntary_switches)
    switches.add_metric(["involuntary"], used.involuntary_switches)
    yield switches
    sampler.sample()
    yield GaugeMetricFamily(
        "cxlab_rss_bytes", "Resident memory, children summed.", value=sampler.current_rss
    )
    yield GaugeMetricFamily(
        "cxlab_peak_rss_bytes",
        "Peak resident memory so far.",
        value=max(sampler.peak_rss, measure.peak_rss_bytes_of_self()),
    )
    yield GaugeMetricFamily(
        "cxlab_threads", "OS threads now, children summed.", value=sampler.current_threads
    )


def _seconds(query: str, name: str) -> float:
    """A query's number of seconds (0 when absent or not a number)."""
    for value in parse_qs(query).get(name, []):
        try:
            return max(0.0, float(value))
        except ValueError:
            return 0.0
    return 0.0


class _Handler(BaseHTTPRequestHandler):
    """/metrics, the start barrier's /ready and /start, /done and /result (CONTRACT.md)."""

    registry: CollectorRegistry
    barrier: StartBarrier
    end: EndOfTasks

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        if path == "/metrics":
            done_before = self.end.done
            self._answer(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
            self.end.answered("final=1" in url.query.split("&"), done_before)
        elif path == "/done":
            done = self.end.done or self.end.wait_done(_seconds(url.query, "wait"))
            self._answer(200 if done else 503, b"done\n" if done else b"running\n")
        elif path == "/result":  # not the final read: it ends nothing
            result = self.end.result
            if result is None:
                self._answer(503, b"running\n")
            else:
                self._answer(200, result, "application/json")
        elif path == "/ready":
            ready = self.barrier.arrived
            self._answer(200 if ready else 503, b"ready\n" if ready else b"not ready\n")
        else:
            self._answer(404, b"not found\n")

    def do_POST(self) -> None:
        if urlsplit(self.path).path == "/start":
            self.barrier.release()
            self._answer(200, b"released\n")
        else:
            known = ("/metrics", "/ready", "/done", "/result")
            self._answer(405 if urlsplit(self.path).path in known else 404, b"")

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: stdout and stderr belong to the Result and the runner's own messages."""


class MetricsServer:
    """Serves the collector on 0.0.0.0:port/metrics (and /ready, /start, /done, /result) from a
    daemon thread (a greenlet under gevent), on a registry of its own so nothing but cxlab_
    metrics is exposed."""

    def __init__(
        self, port: int, collector: TrialCollector, barrier: StartBarrier, end: EndOfTasks
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: ThreadingHTTPServer | None = None
        if port:
            members = {"registry": self.registry, "barrier": barrier, "end": end}
            handler = type("Handler", (_Handler,), members)
            self._server = ThreadingHTTPServer(("0.0.0.0", port), handler)
            self._server.daemon_threads = True
            threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self._server is not None:
            # shutdown() returns once serve_forever's loop sees it, and the loop looks every
            # 0.5 s: the Pod would outlive its Result by up to that. A listening socket shut
            # down is always ready, so the loop comes round at once.
            self._server.socket.shutdown(socket.SHUT_RDWR)
            self._server.shutdown()
            self._server.server_close()
