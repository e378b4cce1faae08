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


def _selector(window: TrialWindow) -> str:
    return f'{{namespace="{window.namespace}",pod="{window.pod}",container="{CONTAINER}"}}'


def trial_queries(window: TrialWindow) -> dict[str, str]:
    """PromQL per status field, evaluated at the window's end over the window's length.

    cAdvisor's counters are born with the container, so their largest value inside the
    window is the whole trial's count: one sample suffices (increase() would need two, and
    a trial of a few seconds often gives cAdvisor's housekeeping only one)."""
    selector, window_range = _selector(window), f"[{window.seconds}s]"
    throttled = f"container_cpu_cfs_throttled_periods_total{selector}"
    periods = f"container_cpu_cfs_periods_total{selector}"
    return {
        "cpuThrottledRatio": (
            f"sum(max_over_time({throttled}{window_range}))"
            f" / sum(max_over_time({periods}{window_range}) > 0)"
        ),
        "memoryWorkingSetBytes": (
            f"max(max_over_time(container_memory_working_set_bytes{selector}{window_range}))"
        ),
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


def trial_usage(window: TrialWindow, query: Query) -> dict[str, Any]:
    """The status entry's `prometheus` field: the values found, `missing` for the others,
    and `error` when Prometheus could not be asked at all (the reconcile goes on)."""
    found: dict[str, Any] = {"windowSeconds": window.seconds}
    missing: list[str] = []
    for name, promql in trial_queries(window).items():
        try:
            value = query(promql, window.end)
        except Exception as error:  # noqa: BLE001 - any failure is reported, never raised
            found["error"] = f"{type(error).__name__}: {error}"[:300]
            missing = [f for f in FIELDS if f not in found]
            break
        if value is None:
            missing.append(name)
        elif name == "memoryWorkingSetBytes":
            found[name] = int(value)
        else:
            found[name] = round(value, 4)
    if missing:
        found["missing"] = missing
    return found
