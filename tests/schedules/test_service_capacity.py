"""A schedule of a service's capacity runs (cxlab.schedules.history.service_points, read by
cxlab.schedules.regression): each run's history keeps every variant's capacity per core and
planned replicas as a point of its own; a run whose service got slower (the user's Deployment
now runs half the gunicorn workers) is Regressed, naming the variant and the change, under
the same false-discovery control as every other metric; unchanged runs are not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from helpers.service_world import plan_of, run, spec_of, world

from cxlab.compare import compare
from cxlab.schedules.history import HistoryEntry, appended, history_entry
from cxlab.schedules.regression import regressions
from cxlab.times import timestamp

START = datetime(2026, 12, 1, tzinfo=UTC)


def entry(name: str, day: int, workers: dict[str, int] | None = None) -> HistoryEntry:
    """A scheduled run of the service's plan, its gunicorn as `workers` says, as the
    operator records it: from the finished run's document."""
    spec = spec_of({"enabled": False})
    done, _ = run(spec, world(workers=workers))
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": name},
        "spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        "status": {"phase": "Succeeded", "servicePlan": plan_of(spec, done).document()},
    }  # fmt: skip
    return history_entry(document, timestamp(START + timedelta(days=day)))


def test_each_variants_capacity_per_core_and_replicas_are_points_of_the_run() -> None:
    [four, two] = entry("run-1", 1).points or []
    # 4 sync workers of 53 ms searched to 75/s at one replica of 0.25 CPU: 300/s per core;
    # 150/s needs 3 replicas (the exact M/D/4: tests/experiments/test_service_verification.py)
    assert (four.point, four.model) == ("service sync-4-cpu0.25", "service")
    assert four.capacity_per_core == 300 and four.planned_replicas == 3
    assert two.point == "service sync-2-cpu0.25" and two.capacity_per_core == 150


def test_half_the_workers_raise_a_capacity_regression_naming_the_variant() -> None:
    history: list[HistoryEntry] = []
    for day in (1, 2):
        history = appended(history, entry(f"run-{day}", day), limit=10)
    assert regressions(history) == []  # two unchanged runs: nothing
    history = appended(history, entry("run-3", 3), limit=10)
    assert regressions(history) == []  # nor a third
    slower = appended(history, entry("run-4", 4, workers={"sync-4": 2}), limit=10)
    found = {(r.point, r.metric): r for r in regressions(slower)}
    assert set(found) == {
        ("service sync-4-cpu0.25", "capacityPerCore"),
        ("service sync-4-cpu0.25", "plannedReplicas"),
    }, found
    per_core = found[("service sync-4-cpu0.25", "capacityPerCore")]
    assert (per_core.before, per_core.after) == (300, 150)
    assert "capacityPerCore of service sync-4-cpu0.25: 300/s per core → 150/s per core" in (
        per_core.message()
    )
    replicas = found[("service sync-4-cpu0.25", "plannedReplicas")]
    assert replicas.before == 3 and replicas.after > 3
    assert f"3 replicas → {replicas.after:g} replicas" in replicas.message()


def test_cxlab_compare_shows_the_capacity_points_side_by_side() -> None:
    compared = compare(entry("run-1", 1), entry("run-2", 2, workers={"sync-4": 2}))
    shown = {(c.point, c.metric) for c in compared.changes}
    assert ("service sync-4-cpu0.25", "capacityPerCore") in shown
    assert ("service sync-4-cpu0.25", "wallSeconds") not in shown  # not a service's metric
