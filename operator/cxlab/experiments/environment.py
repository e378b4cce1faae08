"""A finished run's environment: the calibration trials' figures (spec.calibration) and the
fingerprint of where they ran, so a schedule can tell a slower node, kernel or image from
slower code (cxlab.schedules.regression). Pure but for cxlab's own version."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from cxlab.experiments.plan import Trial
from cxlab.experiments.status import Calibration, Environment, TrialEntry


def cxlab_version() -> str | None:
    try:
        return version("cxlab")
    except PackageNotFoundError:  # run from a source tree without installing
        return None


def environment_of(
    trials: Sequence[Trial], entries: Sequence[TrialEntry], host: str | None = None
) -> Environment | None:
    """From the calibration trials' entries, with their Results (None when there were none).
    A calibration that failed leaves its figure out; the fingerprint comes from the first that
    has a Result. On a cluster an entry names its node; the local backend gives its `host`."""
    kinds = {t.name: t.calibrate for t in trials if t.calibrate}
    ran = {kinds[e.name]: e for e in entries if e.name in kinds}
    if not ran:
        return None
    first = next((e for e in ran.values() if e.result is not None), None)
    if first is None:
        return Environment(cxlab_version=cxlab_version())
    seen = first.result.get("host") if first.result else None  # the runner's fingerprint
    policy = "local" if host else ("static" if first.pinned else "none")
    figures = {kind: _median_latency(e) for kind, e in ran.items()}
    return Environment(
        node=host or first.node,
        cpu_model=seen["cpuModel"] if seen else None, kernel=seen["kernel"] if seen else None,
        cpu_manager_policy=policy,
        runner_image=first.image, cxlab_version=cxlab_version(),
        calibration=Calibration(cpu_loop_seconds=figures.get("cpu"),
                                sleep_seconds=figures.get("sleep")),
    )  # fmt: skip


def _median_latency(entry: TrialEntry) -> float | None:
    if entry.result is None or entry.failed:
        return None
    return float(entry.result["latencySeconds"]["p50"])
