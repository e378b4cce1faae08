"""A point's service figures: the medians of the repetitions that measured the service."""

from __future__ import annotations

from cxlab.analysis.service_figures import ServiceFigures, per_request, service_medians


def _figures(cpu: float, peak: int, restarts: int = 0, requests: int = 100) -> ServiceFigures:
    return ServiceFigures(
        cpu_seconds=cpu, cpu_per_request_seconds=per_request(cpu, requests),
        peak_memory_bytes=peak, restarts=restarts, samples=10,
    )  # fmt: skip


def test_medians_over_the_repetitions_and_restarts_summed() -> None:
    medians = service_medians([_figures(1.0, 300), _figures(3.0, 100, 1), _figures(2.0, 200, 2)])
    assert medians.service_cpu_seconds == 2.0
    assert medians.service_cpu_per_request_seconds == 0.02
    assert medians.service_peak_memory_bytes == 200
    assert medians.service_restarts == 3


def test_without_figures_every_field_is_absent() -> None:
    assert service_medians([None, None]).model_dump(exclude_none=True) == {}


def test_no_request_completed_has_no_cpu_per_request() -> None:
    assert per_request(1.5, 0) is None
    assert service_medians([_figures(1.0, 1, requests=0)]).service_cpu_per_request_seconds is None
