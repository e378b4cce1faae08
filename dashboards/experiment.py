"""Experiment overview: one experiment's trials while they run — progress, throughput,
in-flight tasks, latency, arrivals and their queue, CPU and memory by model and trial — and
its objectives' verdicts once it finished."""

from __future__ import annotations

from typing import Any

from dashboards.panels import (
    CONTAINER,
    OPERATOR_JOB,
    RUNNER,
    build,
    experiment_variables,
    graph,
    query,
    single,
    verdicts,
)

BY_TRIAL = "{{model}} {{trial}}"
OK = ',outcome="ok"'
# The experiment's objectives on the operator's /metrics (its own labels: namespace, name).
OBJECTIVES = f'{OPERATOR_JOB},name="$experiment"'
# One value per objective, max over replicas: the met gauge (1, 0) where the repetitions
# decided; where they did not the operator exports no met value, and the inconclusive gauge
# (1) shows as -1, a value of this panel's only.
VERDICTS = (
    f"max by (namespace, objective) (cxlab_experiment_objective_met{{{OBJECTIVES}}})"
    f" or -max by (namespace, objective) (cxlab_experiment_objective_inconclusive{{{OBJECTIVES}}})"
)


def _rate(metric: str, extra: str = "") -> str:
    return f"rate({metric}{{{RUNNER}{extra}}}[$__rate_interval])"


def dashboard() -> Any:
    panels = [
        single(
            "Tasks done",
            "Tasks finished (ok or failed) over tasks planned, summed over the experiment's "
            "trials seen in the time range.",
            "percentunit",
            f"sum(last_over_time(cxlab_tasks_completed_total{{{RUNNER}}}[$__range]))"
            f" / sum(last_over_time(cxlab_trial_tasks{{{RUNNER}}}[$__range]))",
        ),
        single(
            "Trials finished",
            "Trials whose runners (every Pod of a trial of several) reported every task "
            "ended (cxlab_trial_finished == 1).",
            "short",
            f"count(min by (trial) (last_over_time(cxlab_trial_finished{{{RUNNER}}}[$__range]))"
            f" == 1)",
        ),
        single(
            "Failed tasks",
            "Tasks that ended in an error, over the time range.",
            "short",
            f'sum(last_over_time(cxlab_tasks_completed_total{{{RUNNER},outcome="failed"}}'
            f"[$__range]))",
        ),
        single(
            "Peak RSS",
            "The largest peak resident memory of any trial in the time range (a trial of "
            "several Pods: their peaks summed).",
            "bytes",
            f"max(sum by (trial) (max_over_time(cxlab_peak_rss_bytes{{{RUNNER}}}[$__range])))",
        ),
        verdicts(
            "Objectives",
            "Each of spec.objectives once the experiment finished, as the operator judged it "
            "from the repetitions' 95% intervals: Met, Broken, or Inconclusive (an interval "
            "straddles the bound: more repetitions would decide). Empty while it runs, and "
            "for an experiment without objectives.",
            {"1": ("Met", "green"), "0": ("Broken", "red"), "-1": ("Inconclusive", "orange")},
            VERDICTS,
            "{{objective}}",
        ),
        graph(
            "Throughput",
            "Tasks completed successfully per second, by model and trial (summed over a "
            "trial's Pods).",
            "ops",
            query(
                f"sum by (model, trial) ({_rate('cxlab_tasks_completed_total', OK)})",
                BY_TRIAL,
            ),
        ),
        graph(
            "Tasks in flight",
            "Tasks started and not finished, by model and trial (summed over its Pods).",
            "short",
            query(f"sum by (model, trial) (cxlab_tasks_in_flight{{{RUNNER}}})", BY_TRIAL),
        ),
        graph(
            "Task latency p50 / p99",
            "Task latency quantiles from the runners' histograms, by model: from each task's "
            "start, or for arrival runs from its scheduled arrival (queueing in it).",
            "s",
            *(
                query(
                    f"histogram_quantile({q}, sum by (model, le) "
                    f"({_rate('cxlab_task_duration_seconds_bucket')}))",
                    f"{{{{model}}}} p{int(q * 100)}",
                )
                for q in (0.5, 0.99)
            ),
        ),
        # Arrival runs (spec.workload.arrival): what was offered, what was carried, the queue.
        graph(
            "Arrivals: offered vs issued",
            "Arrival runs: the scheduled rate now (cxlab_arrival_rate) beside the arrivals the "
            "generator issued per second and those dropped with every worker busy, by trial "
            "(summed over its Pods). Issued below offered: the generator cannot keep the rate.",
            "ops",
            query(f"sum by (model, trial) (cxlab_arrival_rate{{{RUNNER}}})", "{{trial}} offered"),
            query(f"sum by (model, trial) ({_rate('cxlab_arrivals_total')})", "{{trial}} issued"),
            query(
                f"sum by (model, trial) ({_rate('cxlab_arrivals_dropped_total')})",
                "{{trial}} dropped",
            ),
        ),
        graph(
            "Arrivals waiting for a worker",
            "Arrival runs: arrivals issued and not yet started (every worker busy), by trial "
            "(summed over its Pods). A queue that only grows: too few workers for the rate.",
            "short",
            query(f"sum by (model, trial) (cxlab_arrival_queue_length{{{RUNNER}}})", BY_TRIAL),
        ),
        graph(
            "Queue wait p99",
            "Arrival runs: the 99th percentile of how long started arrivals waited for a "
            "worker, by model. It is part of the latency above, which runs from each arrival's "
            "scheduled time.",
            "s",
            query(
                f"histogram_quantile(0.99, sum by (model, le) "
                f"({_rate('cxlab_task_queue_wait_seconds_bucket')}))",
                "{{model}} wait p99",
            ),
        ),
        graph(
            "CPU user",
            "User CPU of the runner processes (children included), in cores, by model and trial "
            "(summed over its Pods).",
            "percentunit",
            query(f"sum by (model, trial) ({_rate('cxlab_cpu_user_seconds_total')})", BY_TRIAL),
        ),
        graph(
            "CPU system",
            "System (kernel) CPU of the runner processes, in cores, by model and trial (summed "
            "over its Pods).",
            "percentunit",
            query(f"sum by (model, trial) ({_rate('cxlab_cpu_system_seconds_total')})", BY_TRIAL),
        ),
        graph(
            "Resident memory",
            "Resident set size of the runners (children summed for processes), by trial, "
            "summed over its Pods.",
            "bytes",
            query(f"sum by (model, trial) (cxlab_rss_bytes{{{RUNNER}}})", BY_TRIAL),
        ),
        graph(
            "Threads",
            "OS threads of the runner processes, by trial, summed over its Pods.",
            "short",
            query(f"sum by (model, trial) (cxlab_threads{{{RUNNER}}})", BY_TRIAL),
        ),
        graph(
            "Context switches",
            "Voluntary and involuntary context switches per second, by model.",
            "ops",
            query(
                f"sum by (model, kind) ({_rate('cxlab_context_switches_total')})",
                "{{model}} {{kind}}",
            ),
        ),
        graph(
            "Container working set",
            "cAdvisor's memory working set of each trial's runner container, or of its Pod "
            "where cAdvisor sees only Pods (what the memory limit is enforced against).",
            "bytes",
            query(f"max by (pod) (container_memory_working_set_bytes{{{CONTAINER}}})", "{{pod}}"),
        ),
    ]
    return build(
        "cxlab / experiment overview",
        "cxlab-experiment",
        "One ConcurrencyExperiment's trials as they run, from the runners' /metrics.",
        experiment_variables(),
        panels,
    )
