"""Reading a running trial's progress, and its final values, from its Prometheus endpoint —
the same way for a local subprocess and a Pod."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def _get(host: str, port: int, path: str, timeout: float) -> str | None:
    """The body of a 200 answer; None for anything else (503 is an HTTPError) or none."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout) as reply:
            return str(reply.read().decode())
    except OSError:
        return None


def is_done(host: str, port: int, timeout: float) -> bool:
    """Whether the runner's tasks have ended (its /done: a trial Pod's readiness probe)."""
    return _get(host, port, "/done", timeout) is not None


def result_of(host: str, port: int, timeout: float) -> str | None:
    """The runner's Result once its tasks have ended (GET /result: the document its
    termination message will carry); None before, or from a runner without /result."""
    return _get(host, port, "/result", timeout)


def final_read(host: str, port: int, timeout: float) -> bool:
    """The final read of a runner whose tasks have ended (its /done answers 200): it says it
    finished; the runner waits for this read (--final-read), then exits."""
    text = _get(host, port, "/metrics?final=1", timeout)
    for family in text_string_to_metric_families(text or ""):
        if family.name == "cxlab_trial_finished":
            return any(sample.value == 1 for sample in family.samples)
    return False


def tasks_done(host: str, port: int, timeout: float) -> int | None:
    """Tasks the runner has finished so far; None while it does not answer."""
    text = _get(host, port, "/metrics", timeout)
    for family in text_string_to_metric_families(text or ""):
        if family.name == "cxlab_tasks_completed":
            return int(sum(s.value for s in family.samples if s.name.endswith("_total")))
    return None
