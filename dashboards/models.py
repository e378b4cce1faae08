"""Model comparison: the summary tables of an experiment as plots — wall time against
workers per RTT, CPU % and peak memory per model — from the finished trials' last values."""

from __future__ import annotations

from typing import Any

from dashboards.panels import RUNNER, bars, build, experiment_variables, query_variable

RTT_TRIALS = f'{RUNNER},trial=~".+-rtt$rtt-r[0-9]+"'


def finished(metric: str, selector: str = RUNNER) -> str:
    """The metric's last value per finished trial Pod, with the trial's workers label."""
    return (
        f"(last_over_time({metric}{{{selector}}}[$__range])"
        f" and on (namespace, pod) (last_over_time(cxlab_trial_finished{{{selector}}}[$__range])"
        f" == 1))"
        f" * on (namespace, pod) group_left (workers)"
        f" group by (namespace, pod, workers) (last_over_time(cxlab_trial_info{{{selector}}}"
        f"[$__range]))"
    )


def dashboard() -> Any:
    cpu = (
        f"({finished('cxlab_cpu_user_seconds_total')} + on (namespace, pod) group_left"
        f" last_over_time(cxlab_cpu_system_seconds_total{{{RUNNER}}}[$__range]))"
        f" / on (namespace, pod) last_over_time(cxlab_trial_elapsed_seconds{{{RUNNER}}}"
        f"[$__range]) * 100"
    )
    panels = [
        bars(
            "Wall time vs workers, RTT $rtt",
            "Mean wall time of the task phase (cxlab_trial_elapsed_seconds when the trial "
            "finished) over repetitions, by workers (x) and model (bars); one panel per RTT.",
            "s",
            f"avg by (model, workers) ({finished('cxlab_trial_elapsed_seconds', RTT_TRIALS)})",
            "workers",
            "model",
        ).repeat("rtt"),
        bars(
            "CPU % by model",
            "Process CPU (user + system, children included) over the task phase's wall time, "
            "in % of one core, mean over repetitions, by workers (x) and model (bars).",
            "percent",
            f"avg by (model, workers) ({cpu})",
            "workers",
            "model",
        ),
        bars(
            "Peak memory by model",
            "Largest peak RSS of the runner (children summed for processes) over "
            "repetitions, by workers (x) and model (bars).",
            "bytes",
            f"max by (model, workers) ({finished('cxlab_peak_rss_bytes')})",
            "workers",
            "model",
        ),
    ]
    rtt = (
        query_variable(
            "rtt",
            "RTT",
            'label_values(cxlab_trial_info{experiment="$experiment"}, trial)',
            multi=True,
        )
        .regex("/-rtt([0-9a-z]+)-r[0-9]+$/")
        .all_value("[0-9a-z]+")
    )
    return build(
        "cxlab / model comparison",
        "cxlab-models",
        "The models of one experiment side by side, from the finished trials' final values.",
        [*experiment_variables(), rtt],
        panels,
    )
