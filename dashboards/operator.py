"""Operator health: what the cxlab operator reports about itself (cxlab_operator_*)."""

from __future__ import annotations

from typing import Any

from dashboards.panels import build, datasource_variable, graph, query, single


def _quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket[$__rate_interval])))"


def dashboard() -> Any:
    panels = [
        single(
            "Operator up",
            "Whether Prometheus reached the operator's /metrics on its last scrape.",
            "bool",
            'max(up{job="cxlab-operator"})',
        ),
        single(
            "Experiments running",
            "Experiments the operator last saw in phase Running.",
            "short",
            'sum(cxlab_operator_experiments{phase="Running"})',
        ),
        graph(
            "Experiments by phase",
            "Experiments the operator tracks, by the phase it last saw.",
            "short",
            query("sum by (phase) (cxlab_operator_experiments)", "{{phase}}"),
        ),
        graph(
            "Trials started and finished",
            "Trial Pods created, and trials recorded in status by outcome, per second.",
            "ops",
            query("sum(rate(cxlab_operator_trials_started_total[$__rate_interval]))", "started"),
            query(
                "sum by (outcome) (rate(cxlab_operator_trials_finished_total[$__rate_interval]))",
                "finished {{outcome}}",
            ),
        ),
        graph(
            "Reconcile duration",
            "p50 and p99 of one reconcile pass over one experiment.",
            "s",
            query(_quantile(0.5, "cxlab_operator_reconcile_duration_seconds"), "p50"),
            query(_quantile(0.99, "cxlab_operator_reconcile_duration_seconds"), "p99"),
        ),
        graph(
            "Reconcile errors",
            "Reconcile passes that raised, per second (kopf retries them).",
            "ops",
            query("sum(rate(cxlab_operator_reconcile_errors_total[$__rate_interval]))", "errors"),
        ),
        graph(
            "Trial scrapes",
            "The operator's reads of running trials' /metrics for live progress, by outcome.",
            "ops",
            query(
                "sum by (outcome) (rate(cxlab_operator_trial_scrapes_total[$__rate_interval]))",
                "{{outcome}}",
            ),
        ),
        graph(
            "Trial scrape duration p99",
            "p99 of one read of a running trial's /metrics.",
            "s",
            query(_quantile(0.99, "cxlab_operator_trial_scrape_duration_seconds"), "p99"),
        ),
        graph(
            "Status writes",
            "Status patches to experiments per second.",
            "ops",
            query("sum(rate(cxlab_operator_status_writes_total[$__rate_interval]))", "writes"),
        ),
        graph(
            "API requests by verb",
            "Requests the operator sent the apiserver per second, by verb: its passes' reads "
            "and writes and the Events it posts (kopf's own watches are not counted).",
            "reqps",
            query(
                "sum by (verb) (rate(cxlab_operator_api_requests_total[$__rate_interval]))",
                "{{verb}}",
            ),
        ),
        graph(
            "Active replica",
            "1 for the replica that holds the Lease and reconciles, 0 for one standing by; "
            "a handover shows as the 1 moving from one instance to another.",
            "short",
            query("max by (instance) (cxlab_operator_leader)", "{{instance}}"),
        ),
    ]
    return build(
        "cxlab / operator health",
        "cxlab-operator",
        "The cxlab operator's own metrics: experiments, trials, reconcile passes, writes.",
        [datasource_variable()],
        panels,
    )
