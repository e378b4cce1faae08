"""spec.objectives judged (pure, shared by both backends): each point in an objective's scope is
Met, Broken or Inconclusive from the 95 % interval of its repetitions' mean, each objective
from its points, the experiment from its objectives (the ObjectivesMet condition); and which
trials abortOnFail makes pointless while the experiment runs.

Why an interval and not the median: a pipeline gates on the verdict, so "met" must mean the
measurements leave little doubt, and a point whose interval straddles its bound says so
(Argo Rollouts' Inconclusive) with the repetitions that would decide it. One repetition has
no interval: its value decides, as k6's thresholds do."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from cxlab.analysis.labels import workers_label
from cxlab.analysis.outcome import TrialOutcome
from cxlab.analysis.recommend import AnyRecommendation, NoRateHeld, RateRecommendation
from cxlab.analysis.stats import t975
from cxlab.analysis.summary import PointRuns, Summary, group_points
from cxlab.experiments.fields import memory_bytes
from cxlab.experiments.plan import Trial
from cxlab.experiments.spec import GROWS_WITH_LOAD, ExperimentSpec, Objective
from cxlab.experiments.status import ObjectivePoint, ObjectiveStatus, Verdict
from cxlab_contract.durations import format_duration, parse_duration
from cxlab_contract.figures import significant
from cxlab_contract.result import Result

Unit = Literal["seconds", "bytes", "share", "rate", "count"]
MET: Verdict = "Met"
BROKEN: Verdict = "Broken"
INCONCLUSIVE: Verdict = "Inconclusive"
# Rows kept per objective in status (broken and inconclusive first; the counts are whole):
# 16 objectives of 50 rows of at most about 260 bytes are 0.2 MiB, beside a thousand compact
# trial entries (0.5 MiB) well inside etcd's 1.5 MiB per object.
MAX_ROWS = 50
# Past this, "more repetitions" is no answer: the point is too noisy, or on its bound.
MAX_NEEDED = 1000
_ORDER = {BROKEN: 0, INCONCLUSIVE: 1, MET: 2}


@dataclass(frozen=True)
class Bound:
    """An objective's bound in the metric's unit, and which side of it is good."""

    value: float
    at_most: bool  # the metric must stay at or below value (else at or above)
    metric: str  # as tables name it: "latency p99"
    unit: Unit

    def holds(self, value: float) -> bool:
        return value <= self.value if self.at_most else value >= self.value

    @property
    def text(self) -> str:
        return f"{'≤' if self.at_most else '≥'} {shown(self.unit, self.value)}"


def bound_of(objective: Objective) -> Bound:
    if objective.latency is not None:
        seconds = parse_duration(objective.latency.max)
        return Bound(seconds, True, f"latency {objective.latency.percentile}", "seconds")
    if objective.failure_ratio is not None:
        return Bound(float(objective.failure_ratio.max), True, "failure ratio", "share")
    if objective.throughput is not None:
        return Bound(float(objective.throughput.min), False, "throughput", "rate")
    if objective.efficiency is not None:
        return Bound(float(objective.efficiency.min), False, "efficiency", "share")
    if objective.cpu_per_task is not None:
        return Bound(parse_duration(objective.cpu_per_task.max), True, "CPU per task", "seconds")
    if objective.peak_rss is not None:
        return Bound(float(memory_bytes(objective.peak_rss.max)), True, "peak RSS", "bytes")
    if objective.start_skew is not None:
        return Bound(parse_duration(objective.start_skew.max), True, "start skew", "seconds")
    assert objective.dropped is not None
    return Bound(float(objective.dropped.max), True, "dropped", "count")


def value_of(objective: Objective, result: Result) -> float | None:
    """The objective's metric in one Result; None where the trial has none (a start skew of
    one Pod, an efficiency of a run for a time)."""
    tasks = result["tasksOk"] + result["tasksFailed"]
    if objective.latency is not None:
        return float(result["latencySeconds"][objective.latency.percentile])
    if objective.failure_ratio is not None:
        return result["tasksFailed"] / tasks if tasks else None
    if objective.throughput is not None:
        return float(result["throughputPerSecond"])
    if objective.efficiency is not None:
        efficiency = result.get("efficiency")
        return None if efficiency is None else float(efficiency)
    if objective.cpu_per_task is not None:  # per task of the trial, as a schedule compares it
        cpu = result["cpuUserSeconds"] + result["cpuSystemSeconds"]
        return cpu / max(int(result["tasks"]), 1)
    if objective.peak_rss is not None:
        return float(result["peakRssBytes"])
    if objective.start_skew is not None:
        skew = result.get("startSkewSeconds")
        return None if skew is None else float(skew)
    arrival = result.get("arrival")
    return None if arrival is None else float(arrival["dropped"])


def shown(unit: str, value: float) -> str:
    """A value of the metric as messages and tables show it."""
    if unit == "seconds":
        return format_duration(float(f"{value:.3g}"))
    if unit == "bytes":
        return f"{value / 2**20:.4g} MiB"
    if unit == "share":
        return f"{value:.4g}" if value in (0, 1) else f"{value * 100:.3g} %"
    if unit == "rate":
        return f"{value:.4g}/s"
    return f"{value:.4g}"


@dataclass(frozen=True)
class Judged:
    """One point's values against a bound."""

    verdict: Verdict
    mean: float | None
    low: float | None = None
    high: float | None = None
    needed: int | None = None  # inconclusive: repetitions in all that would decide


def judge(values: Sequence[float], bound: Bound, one_decides: bool = True) -> Judged:
    """Met when the 95 % t interval of the values' mean is within the bound, Broken when it is
    wholly beyond, else Inconclusive with the repetitions that would decide it. One value
    decides alone when `one_decides` (an experiment of one repetition); else it is
    Inconclusive (a running experiment with more repetitions to come)."""
    if not values:
        return Judged(INCONCLUSIVE, None)
    mean = statistics.fmean(values)
    if len(values) == 1:
        if one_decides:
            return Judged(MET if bound.holds(mean) else BROKEN, mean)
        return Judged(INCONCLUSIVE, mean)
    sd = statistics.stdev(values)
    half = t975(len(values) - 1) * sd / math.sqrt(len(values))
    # every metric here is a time, a size, a share or a count: never below 0 (as stats cuts)
    low, high = max(mean - half, 0.0), mean + half
    worst, best = (high, low) if bound.at_most else (low, high)
    if bound.holds(worst):
        return Judged(MET, mean, low, high)
    if not bound.holds(best):
        return Judged(BROKEN, mean, low, high)
    return Judged(INCONCLUSIVE, mean, low, high, repetitions_needed(mean, sd, bound.value))


def repetitions_needed(mean: float, sd: float, bound: float) -> int | None:
    """The fewest repetitions whose 95 % interval, with this mean and spread, would leave the
    bound outside it; None when none would (the mean is on the bound) within MAX_NEEDED."""
    distance = abs(mean - bound)
    if distance == 0:
        return None
    for n in range(2, MAX_NEEDED + 1):
        if t975(n - 1) * sd / math.sqrt(n) < distance:
            return n
    return None


def in_scope(objective: Objective, trial: Trial) -> bool:
    """Whether a point of the matrix is among those the objective names (scope every)."""
    if objective.models is not None and trial.model not in objective.models:
        return False
    return objective.workers is None or trial.workers in objective.workers


def _recommended(group: PointRuns, recommendations: Iterable[AnyRecommendation]) -> bool:
    trial = group.trial
    ours = (trial.variant, trial.workers, trial.pods, trial.rtt_seconds, trial.rate_per_second)
    for r in recommendations:
        if isinstance(r, NoRateHeld):  # names no configuration
            continue
        rate = r.rate_per_second if isinstance(r, RateRecommendation) else trial.rate_per_second
        if (r.variant, r.workers, r.pods, r.rtt_seconds, rate) == ours:
            return True
    return False


def configuration_text(
    variant: str, model: str, workers: int, pods: int, rtt: float | None, rate: float | None
) -> str:
    """A point as messages and tables name it: threads, 100 workers, RTT 100ms, 2000/s."""
    parts = [variant, workers_label(model, workers, pods)]
    if rtt is not None:
        parts.append(f"RTT {format_duration(rtt)}")
    if rate is not None:
        parts.append(f"{rate:g}/s")
    return ", ".join(parts)


def point_label(trial: Trial) -> str:
    return configuration_text(
        trial.variant,
        trial.model,
        trial.workers,
        trial.pods,
        trial.rtt_seconds,
        trial.rate_per_second,
    )


def row_label(point: ObjectivePoint) -> str:
    """An objective's table row named as its messages name the point."""
    return configuration_text(
        point.variant, point.model, point.workers, point.pods or 1, point.rtt_seconds,
        point.rate_per_second,
    )  # fmt: skip


def row_needed(point: ObjectivePoint) -> str:
    """An objective's table row's repetitions that would decide it (inconclusive only)."""
    if point.verdict != INCONCLUSIVE:
        return "—"
    if point.repetitions < 2:
        return "2 or more"  # no spread yet to reckon with
    if point.repetitions_needed is None:
        return "none would decide"  # the mean is on the bound, or past MAX_NEEDED
    return f"{point.repetitions_needed:,}"


def row_figure(unit: str, point: ObjectivePoint) -> str:
    """An objective's table row's figure: 310ms [290ms, 330ms], or why there is none."""
    return _figure(unit, point.value, point.low, point.high, point.repetitions)


def objective_name(objective: Objective) -> str:
    bound = bound_of(objective)
    return objective.name or f"{bound.metric} {bound.text}"


@dataclass(frozen=True)
class _Row:
    group: PointRuns
    values: list[float]
    judged: Judged


def _rows(
    objective: Objective,
    groups: Sequence[PointRuns],
    recommendations: Sequence[AnyRecommendation],
    one_decides: bool,
) -> list[_Row]:
    bound, rows = bound_of(objective), []
    for group in groups:
        if objective.scope == "recommended":
            if not _recommended(group, recommendations):
                continue
        elif not in_scope(objective, group.trial):
            continue
        if group.members and all(o.skipped for o in group.members):
            continue  # not run: a point it can only do worse than broke (abortOnFail)
        values = [v for r in group.results if (v := value_of(objective, r)) is not None]
        if group.results and not values:
            continue  # the metric does not apply here (a start skew of one Pod)
        rows.append(_Row(group, values, judge(values, bound, one_decides)))
    return rows


def _point(row: _Row) -> ObjectivePoint:
    trial, judged = row.group.trial, row.judged
    rounded = [
        None if v is None else significant(v) for v in (judged.mean, judged.low, judged.high)
    ]
    return ObjectivePoint(
        variant=trial.variant, model=trial.model, pods=trial.pods if trial.pods > 1 else None,
        workers=trial.workers, rtt_seconds=trial.rtt_seconds, rate_per_second=trial.rate_per_second,
        repetitions=len(row.values), value=rounded[0], low=rounded[1], high=rounded[2],
        verdict=judged.verdict, repetitions_needed=judged.needed,
    )  # fmt: skip


def figure_text(unit: str, judged: Judged, repetitions: int) -> str:
    """A point's figure: 310ms [290ms, 330ms] over 3 repetitions."""
    return _figure(unit, judged.mean, judged.low, judged.high, repetitions)


def _figure(
    unit: str, mean: float | None, low: float | None, high: float | None, repetitions: int
) -> str:
    if mean is None:
        return "no repetition counted"
    if low is None or high is None:
        return f"{shown(unit, mean)} (n={repetitions}, no interval)"
    return f"{shown(unit, mean)} [{shown(unit, low)}, {shown(unit, high)}]"


def _uncounted(group: PointRuns) -> str:
    """Why a point's other repetitions are not counted: ", 2 saturated" and the like."""
    why = [(group.failed, "failed"), (group.saturated, "saturated"), (group.unpinned, "unpinned")]
    return "".join(f", {count} {what}" for count, what in why if count)


def _margin(judged: Judged, bound: Bound) -> float:
    """How near a met point's interval comes to the bound (larger: nearer)."""
    if bound.at_most:
        return judged.high if judged.high is not None else judged.mean or 0.0
    return -(judged.low if judged.low is not None else judged.mean or 0.0)


def _message(objective: Objective, rows: list[_Row], verdict: Verdict, skipped: int) -> str:
    bound, name = bound_of(objective), objective_name(objective)
    if not rows:
        return f"{name}: inconclusive, no point in its scope was measured"
    counts = {v: sum(r.judged.verdict == v for r in rows) for v in _ORDER}
    total = len(rows)
    if verdict == MET:
        worst = max(rows, key=lambda r: _margin(r.judged, bound))
        figure = figure_text(bound.unit, worst.judged, len(worst.values))
        return (
            f"{name}: met at all {total} point(s); closest {point_label(worst.group.trial)}: "
            f"{figure}, bound {bound.text}"
        )
    first = next(r for r in rows if r.judged.verdict == verdict)
    figure = figure_text(bound.unit, first.judged, len(first.values))
    label = point_label(first.group.trial)
    if verdict == BROKEN:
        text = (
            f"{name}: broken at {counts[BROKEN]} of {total} point(s), first {label}: {figure}, "
            f"bound {bound.text}"
        )
        if skipped:
            text += f"; {skipped} trial(s) skipped (abortOnFail)"
        return text
    if len(first.values) < 2:
        counted = f"{len(first.values)} repetition(s) counted" + _uncounted(first.group)
        return (
            f"{name}: inconclusive at {counts[INCONCLUSIVE]} of {total} point(s), first {label}: "
            f"{figure}; {counted}: too few for an interval"
        )
    needed = first.judged.needed
    decide = (
        f"about {needed} repetitions would decide it"
        if needed is not None
        else "no number of repetitions would decide it (its mean is on the bound)"
    )
    return (
        f"{name}: inconclusive at {counts[INCONCLUSIVE]} of {total} point(s), first {label}: "
        f"{figure} straddles {bound.text} with {len(first.values)} repetitions; {decide}"
    )


def judge_objectives(
    spec: ExperimentSpec, outcomes: Sequence[TrialOutcome], summary: Summary
) -> list[ObjectiveStatus]:
    """Each objective's verdict and table over the sweep's outcomes (the matrix's trials, not
    probes, verifications or calibrations)."""
    sweep = [o for o in outcomes if not o.trial.follows]
    groups = group_points(sweep, spec.pinning)
    recommendations = summary.recommendations
    judged = []
    for objective in spec.objectives or ():
        # One repetition decides only where one was asked for: of three, the one counted
        # beside two saturated ones is no verdict.
        rows = _rows(objective, groups, recommendations, one_decides=spec.repetitions == 1)
        verdicts = [r.judged.verdict for r in rows]
        verdict = (
            BROKEN if BROKEN in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts or not rows
            else MET
        )  # fmt: skip
        skipped = sum(
            1 for o in sweep if o.skipped and o.skipped.startswith(_skip_prefix(objective))
        )
        ordered = sorted(rows, key=lambda r: _ORDER[r.judged.verdict])
        bound = bound_of(objective)
        judged.append(
            ObjectiveStatus(
                name=objective_name(objective),
                metric=bound.metric,
                bound=bound.text,
                unit=bound.unit,
                verdict=verdict,
                message=_message(objective, ordered, verdict, skipped),
                met=verdicts.count(MET),
                broken=verdicts.count(BROKEN),
                inconclusive=verdicts.count(INCONCLUSIVE),
                skipped_trials=skipped or None,
                points=[_point(r) for r in ordered[:MAX_ROWS]],
            )
        )
    return judged


def summed_up(objectives: Sequence[ObjectiveStatus]) -> tuple[bool | None, str, str]:
    """The ObjectivesMet condition (status, reason, message): False when one is broken,
    Unknown when none is but one is inconclusive, True when all are met (or there are none:
    nothing to gate on)."""
    if not objectives:
        return True, "NoObjectives", "spec.objectives is empty: nothing to gate on"
    verdicts = [o.verdict for o in objectives]
    message = "; ".join(o.message for o in objectives)
    if BROKEN in verdicts:
        return False, "ObjectiveBroken", message
    if INCONCLUSIVE in verdicts:
        return None, "Inconclusive", message
    return True, "AllObjectivesMet", message


# ---- abortOnFail, while the experiment runs ----


def _skip_prefix(objective: Objective) -> str:
    return f"objective {objective_name(objective)} broken at "


def _worse(broken: Trial, trial: Trial, arrivals: bool) -> bool:
    """Whether `trial` can only do worse than `broken` on a metric that grows with load: the
    same variant, Pods and RTT, and more load: a higher rate (arrivals) at the same workers,
    or more workers (a counted or closed run; 0 = one per task, the most)."""
    if (trial.variant, trial.pods, trial.rtt_seconds) != (
        broken.variant, broken.pods, broken.rtt_seconds,
    ):  # fmt: skip
        return False
    if arrivals:
        faster = (trial.rate_per_second or 0) > (broken.rate_per_second or 0)
        return trial.workers == broken.workers and faster
    if trial.rate_per_second != broken.rate_per_second or broken.workers == 0:
        return False
    return trial.workers == 0 or trial.workers > broken.workers


def skipped_trials(
    spec: ExperimentSpec, trials: Sequence[Trial], outcomes: Sequence[TrialOutcome]
) -> dict[str, str]:
    """The sweep's trials not yet run that abortOnFail skips, each with why: a point in the
    objective's scope is surely broken (its interval beyond the bound; with one repetition
    planned, its value) and the trial can only do worse. A function of the recorded outcomes,
    so a restart skips the same ones."""
    aborting = [o for o in spec.objectives or () if o.abort_on_fail]
    if not aborting:
        return {}
    ran = {o.trial.name for o in outcomes}
    waiting = [t for t in trials if not t.follows and t.name not in ran]
    groups = group_points([o for o in outcomes if not o.trial.follows], spec.pinning)
    arrivals = spec.workload.arrival is not None
    skipped: dict[str, str] = {}
    for objective in aborting:
        assert objective.metric in GROWS_WITH_LOAD
        bound = bound_of(objective)
        for group in groups:
            if not in_scope(objective, group.trial):
                continue
            values = [v for r in group.results if (v := value_of(objective, r)) is not None]
            judged = judge(values, bound, one_decides=spec.repetitions == 1)
            if judged.verdict != BROKEN:
                continue
            why = (
                f"{_skip_prefix(objective)}{point_label(group.trial)}: "
                f"{figure_text(bound.unit, judged, len(values))}, bound {bound.text}"
            )
            for trial in waiting:
                if trial.name in skipped or not in_scope(objective, trial):
                    continue
                if _worse(group.trial, trial, arrivals):
                    skipped[trial.name] = why
    return skipped
