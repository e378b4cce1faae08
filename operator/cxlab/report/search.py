"""The report's rate search (status.rateSearch): the latency each probe measured against the
rate it offered, a curve per line through the probes that counted, those that held filled,
those that broke hollow, those the generator bound crossed and off the curve, the objective
across; then each line's answer, and its probes in the order they ran."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from cxlab.analysis.capacity_plan import Probe
from cxlab.analysis.labels import rate_text, share_text
from cxlab.analysis.rate_search import RateSearch
from cxlab.analysis.service_figures import cpu_share
from cxlab.experiments.spec import LatencyTarget
from cxlab.experiments.status import TrialEntry
from cxlab.report import svg
from cxlab.report.data import Context, Style
from cxlab.report.tables import _table
from cxlab.search_rows import SEARCH_HEADERS, search_legend, search_rows
from cxlab_contract.durations import parse_duration

_RATE_AXIS = svg.Axis("offered rate (tasks/s, all Pods)", "linear", svg.format_count, True)


def _styles(searches: Sequence[RateSearch], context: Context) -> dict[str, Style]:
    """The line's colour in the other charts; a line they lack gets the next one free."""
    styles = dict(context.styles)
    for search in searches:
        if search.variant not in styles:
            i = len(styles)
            styles[search.variant] = Style(
                svg.PALETTE[i % len(svg.PALETTE)], svg.SHAPES[i % len(svg.SHAPES)]
            )
    return styles


def _at(probes: Sequence[Probe]) -> tuple[svg.Point, ...]:
    # a probe without a latency (it failed) has no place on the chart: the table has it
    return tuple(
        svg.Point(p.rate_per_second, p.latency_seconds)
        for p in probes
        if p.latency_seconds is not None
    )


def _line_series(search: RateSearch, style: Style) -> list[svg.Series]:
    counted = [p for p in search.probes if p.measured]
    bound = [p for p in search.probes if p.generator_bound is not None]
    line, color, shape = search.variant, style.color, style.shape
    series = [
        svg.Series(f"{line} held", _at([p for p in counted if p.holds]), color, shape,
                   joined=False),
        svg.Series(f"{line} broke", _at([p for p in counted if not p.holds]), color, shape,
                   joined=False, hollow=True),
        svg.Series(f"{line} generator's", _at(bound), color, "cross", joined=False),
    ]  # fmt: skip
    curve = _at(counted)
    if len(curve) > 1:  # a single point would be a second marker over its own
        series.insert(0, svg.Series(line, curve, color, markers=False))
    return series


def _objective(rates: Sequence[float], target: LatencyTarget) -> svg.Series:
    """The objective as a dashed line across every rate probed."""
    limit = parse_duration(target.max)
    return svg.Series(
        f"objective: {target.percentile} ≤ {target.max}",
        (svg.Point(min(rates), limit), svg.Point(max(rates), limit)),
        svg.REFERENCE_COLOR, dashed=True, markers=False,
    )  # fmt: skip


def _chart(searches: Sequence[RateSearch], target: LatencyTarget | None, context: Context) -> str:
    styles = _styles(searches, context)
    series = [s for search in searches for s in _line_series(search, styles[search.variant])]
    rates = [p.rate_per_second for search in searches for p in search.probes]
    if target is not None and rates:
        series.append(_objective(rates, target))
    percentile = target.percentile if target else "p99"
    return svg.line_chart(
        f"Rate search: {percentile} latency vs offered rate",
        _RATE_AXIS,
        svg.Axis(f"{percentile} latency (log scale)", "log", svg.format_seconds),
        series,
        "filled: held · hollow: broke · crossed: the generator's, not counted",
    )


def _service_share(trial: TrialEntry | None) -> str:
    return share_text(cpu_share(trial.service, trial.result) if trial else None)


def _verdict(probe: Probe) -> tuple[str, str]:
    """What the search made of the probe, and why."""
    if probe.failed is not None:
        return "failed", probe.failed
    if probe.generator_bound is not None:
        return "generator's", probe.generator_bound
    return ("held", "") if probe.holds else ("broke", probe.shortfall or "")


def _probes_table(
    searches: Sequence[RateSearch], percentile: str, trials: Mapping[str, TrialEntry]
) -> str:
    rows = []
    for search in searches:
        for index, p in enumerate(search.probes, 1):
            verdict, why = _verdict(p)
            latency = "—" if p.latency_seconds is None else svg.format_seconds(p.latency_seconds)
            rows.append([
                escape(search.variant), str(index), escape(rate_text(p.rate_per_second)),
                str(p.pods), escape(latency), escape(verdict), escape(why),
                _service_share(trials.get(p.trial)), escape(p.trial),
            ])  # fmt: skip
    headers = [
        "variant / model", "probe", "rate/s", "Pods", percentile, "", "why", "service cpu",
        "trial",
    ]  # fmt: skip
    return _table(headers, rows, numeric={1, 2, 3, 4, 7})


def search_section(
    searches: Sequence[RateSearch], target: LatencyTarget | None, context: Context
) -> str:
    """Nothing when no rate was searched."""
    if not searches:
        return ""
    legend, *answers = search_legend(searches)
    lines = [[escape(cell) for cell in row] for row in search_rows(searches)]
    answered = "".join(f"<li>{escape(a.strip())}</li>" for a in answers)
    percentile = target.percentile if target else "p99"
    probes = _probes_table(searches, percentile, {t.name: t for t in context.trials})
    return (
        '<section id="rate-search"><h2>Rate search</h2>'
        f'<div class="charts"><figure class="chart">{_chart(searches, target, context)}'
        f"</figure></div>{_table(SEARCH_HEADERS, lines, {1, 3, 6, 7, 8})}"
        f'<p class="note">{escape(legend)}</p><ul>{answered}</ul>'
        f"<h3>Probes</h3>{probes}</section>"
    )
