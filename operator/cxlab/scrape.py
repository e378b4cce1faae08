"""Reading a running trial's progress, and its final values, from its Prometheus endpoint —
the same way for a local subprocess and a Pod."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def is_done(host: str, port: int, timeout: float) -> bool:
    """Whether the runner's tasks have ended (its /done: a trial Pod's readiness probe)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/done", timeout=timeout) as reply:
            return bool(reply.status == 200)
    except OSError:  # 503 (HTTPError) while its tasks run, or no answer
        return False


def final_read(host: str, port: int, timeout: float) -> bool:
    """The final read of a runner whose tasks have ended (its /done answers 200): it says it
    finished; the runner waits for this read (--final-read), then exits."""
    try:
        with urllib.request.urlopen(
            f"http://{host}:{port}/metrics?final=1", timeout=timeout
        ) as reply:
            text = reply.read().decode()
    except OSError:
        return False
    for family in text_string_to_metric_families(text):
        if family.name == "cxlab_trial_finished":
            return any(sample.value == 1 for sample in family.samples)
    return False


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
