"""What Prometheus saw of a finished trial's container: CPU throttling and peak memory
working set (cAdvisor, scraped through the kubelet), over exactly the trial's Pod window.

Query building is pure; `PrometheusClient` is a small HTTP client with a timeout. Nothing
here raises into the reconcile: a value Prometheus does not have is listed in `missing`,
never reported as zero.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cxlab.experiments.status import PrometheusUsage, prometheus_usage

CONTAINER = "runner"  # the trial Pod's one container (pods.py)

# name in status → what it is, for the `missing` list and the docs
FIELDS = ("cpuThrottledRatio", "memoryWorkingSetBytes")


@dataclass(frozen=True)
class TrialWindow:
    namespace: str
    pod: str
    start: datetime
    end: datetime

    @property
    def seconds(self) -> int:
        """The range of the queries, whole seconds, at least 1."""
        return max(1, math.ceil((self.end - self.start).total_seconds()))


def _over_window(function: str, metric: str, window: TrialWindow) -> str:
    """`function` over the window of the runner container's series or, where cAdvisor sees
    only the Pod's cgroup (the local cluster: containerd containers under cgroupfs), of the
    Pod's (container="") — the runner plus the idle pause process."""
    pod = f'namespace="{window.namespace}",pod="{window.pod}"'
    window_range = f"[{window.seconds}s]"
    runner = f'{function}({metric}{{{pod},container="{CONTAINER}"}}{window_range})'
    whole_pod = f'{function}({metric}{{{pod},container=""}}{window_range})'
    return f"({runner} or on (namespace, pod) {whole_pod})"


def trial_queries(window: TrialWindow) -> dict[str, str]:
    """PromQL per status field, evaluated at the window's end over the window's length.

    cAdvisor's counters are born with the cgroup, so their largest value inside the window
    is the whole trial's count: one sample suffices (increase() would need two, and a trial
    of a few seconds often gives cAdvisor's housekeeping only one)."""
    throttled = _over_window("max_over_time", "container_cpu_cfs_throttled_periods_total", window)
    periods = _over_window("max_over_time", "container_cpu_cfs_periods_total", window)
    memory = _over_window("max_over_time", "container_memory_working_set_bytes", window)
    return {
        "cpuThrottledRatio": f"sum({throttled}) / sum({periods} > 0)",
        # A cgroup with a live process never has a zero working set: 0 is cAdvisor's
        # placeholder for a cgroup it has no stats for (seen on the local cluster), not data.
        "memoryWorkingSetBytes": f"max({memory} > 0)",
    }


def _timestamp(moment: datetime) -> str:
    return f"{moment.timestamp():.3f}"


class PrometheusClient:
    def __init__(self, url: str, timeout_seconds: float = 2.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout_seconds

    def instant(self, query: str, at: datetime) -> float | None:
        """The value of a one-series (or aggregated) query at a moment; None when empty."""
        parameters = urllib.parse.urlencode({"query": query, "time": _timestamp(at)})
        with urllib.request.urlopen(
            f"{self.url}/api/v1/query?{parameters}", timeout=self.timeout
        ) as reply:
            body: dict[str, Any] = json.load(reply)
        if body.get("status") != "success":
            raise ValueError(f"Prometheus answered {body.get('error') or body}")
        result = body["data"]["result"]
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) or math.isinf(value) else value


Query = Callable[[str, datetime], float | None]


def trial_usage(window: TrialWindow, query: Query) -> PrometheusUsage:
    """The status entry's `prometheus` field: the values found, `missing` for the others,
    and `error` when Prometheus could not be asked at all (the reconcile goes on)."""
    found: dict[str, float | int] = {}
    missing: list[str] = []
    for name, promql in trial_queries(window).items():
        try:
            value = query(promql, window.end)
        except Exception as error:
            why = f"{type(error).__name__}: {error}"[:300]
            missing = [f for f in FIELDS if f not in found]
            return prometheus_usage(window.seconds, found, missing, why)
        if value is None:
            missing.append(name)
        elif name == "memoryWorkingSetBytes":
            found[name] = int(value)
        else:
            found[name] = round(value, 4)
    return prometheus_usage(window.seconds, found, missing)
