"""Reading a running trial's progress from its Prometheus endpoint — the same way for a
local subprocess and a Pod."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def tasks_done(host: str, port: int, timeout: float) -> int | None:
    """Tasks the runner has finished so far; None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        if family.name == "cxlab_tasks_completed":
            return int(sum(s.value for s in family.samples if s.name.endswith("_total")))
    return None
