"""`cxlab plan`'s listing of an experiment with a service subject: each variant's trials
together, in the variants' order, named with the variant's number, and what each variant
changes in the Deployment's Pod template, in words."""

from __future__ import annotations

from typing import Any

from cxlab.cli.plan_text import plan_text
from cxlab.experiments.resource import ConcurrencyExperiment

TARGET = {"service": {"name": "httpbin", "port": 80, "path": "/delay/0.05"}}


def experiment(service: dict[str, Any]) -> ConcurrencyExperiment:
    return ConcurrencyExperiment.model_validate({
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "svc"},
        "spec": {"service": service, "repetitions": 2,
                 "workload": {"type": "http", "duration": "5s", "target": TARGET},
                 "models": [{"model": "asyncio", "workers": [16, 64]}]},
    })  # fmt: skip


def test_each_variant_runs_its_trials_together_and_says_what_it_changes() -> None:
    text = plan_text(experiment({
        "deployment": "httpbin",
        "variants": {
            "named": [{"name": "sync-2", "args": ["--workers", "2", "httpbin:app"]},
                      {"name": "gevent", "image": "httpbin:2",
                       "env": [{"name": "A", "value": "b c"}]}],
            "replicas": [1, 3],
            "resources": [{"cpu": 0.5, "memory": "256Mi"}],
        },
    }))  # fmt: skip
    rows = [line.split()[0] for line in text.splitlines() if line[:3].isdigit()]
    # 4 variants x 2 repetitions x 2 worker counts, each variant's 4 trials in a row
    assert len(rows) == 16
    assert [row.split("-")[1] for row in rows] == [f"sv{v}" for v in (1, 2, 3, 4) for _ in "abcd"]
    assert "sync-2-r1-cpu0.5-mem256Mi / asyncio" in text
    assert "service under test: Deployment httpbin, each variant a copy of it behind a copy " \
           "of Service httpbin" in text  # fmt: skip
    assert "sv1 sync-2-r1-cpu0.5-mem256Mi: replicas 1, cpu 0.5, memory 256Mi, args --workers 2 " \
           "httpbin:app" in text  # fmt: skip
    assert "sv4 gevent-r3-cpu0.5-mem256Mi: replicas 3, cpu 0.5, memory 256Mi, image httpbin:2, " \
           "A='b c'" in text  # fmt: skip


def test_without_variants_the_one_variant_is_the_deployment_as_it_is() -> None:
    text = plan_text(experiment({"deployment": "httpbin"}))
    assert "  sv1 default: as it is" in text
    assert "000-sv1-asyncio-w16-r1" in text


def test_the_rate_search_is_shown_per_variant_after_its_trials() -> None:
    variants = {"named": [{"name": "sync-2"}, {"name": "sync-4"}]}
    made = experiment({"deployment": "httpbin", "variants": variants})
    spec = made.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    spec["workload"] = {
        "type": "http",
        "target": TARGET,
        "arrival": {"ratePerSecond": 20, "duration": "5s", "process": "uniform"},
    }
    spec["search"] = {"rate": {"start": 20, "duration": "5s", "repeats": 2,
                               "latency": {"max": "250ms"}}}  # fmt: skip
    text = plan_text(ConcurrencyExperiment.model_validate({
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "svc"}, "spec": spec}))  # fmt: skip
    assert (
        "then per variant and model a rate search: up to 8 rates of one Pod, 5s each (uniform "
        "arrivals, queueing), from 20/s, each boundary rate 2 times, holding p99 ≤ 250ms, a "
        "probe its generator bound again with twice the Pods (up to 4); in turn:\n"
        "  sv1 sync-2: its trials, then its search (asyncio) against it\n"
        "  sv2 sync-4: its trials, then its search (asyncio) against it"
    ) in text
