"""The rate search's table (status.rateSearch): per line its searched rate, the interval it
lies in, its probes there, whether it is noisy and whose limit it is; then each line's
answer in a sentence. Rows for cxlab.table to render."""

from __future__ import annotations

from collections.abc import Sequence

from cxlab.analysis.labels import rate_text
from cxlab.analysis.rate_search import RateSearch

SEARCH_HEADERS = [
    "variant / model", "held /s", "interval /s", "probes", "noisy", "limit", "service cpu",
    "generator cpu", "pods",
]  # fmt: skip


def _rate(rate: float | None) -> str:
    return "—" if rate is None else rate_text(rate)


def _share(share: float | None) -> str:
    return "—" if share is None else f"{share:.0%}"


def search_rows(searches: Sequence[RateSearch]) -> list[list[str]]:
    rows = []
    for search in searches:
        low, high = search.interval.low, search.interval.high
        spread = search.spread
        noisy = f"yes ({_rate(spread.low)} to {_rate(spread.high)})" if spread else "no"
        counted = [p for p in search.probes if p.measured]
        at_low = sum(1 for p in counted if low is not None and p.rate_per_second == low)
        rows.append([
            search.variant, _rate(search.rate_per_second), f"[{_rate(low)}, {_rate(high)})",
            f"{at_low}/{len(search.probes)}", noisy, search.limit or "—",
            _share(search.service_cpu_share), _share(search.generator_cpu_share),
            "—" if search.generator_pods is None else str(search.generator_pods),
        ])  # fmt: skip
    return rows


def search_legend(searches: Sequence[RateSearch]) -> list[str]:
    """The legend, and each line's answer."""
    return [
        "held: the highest rate every probe of which held, below every rate that broke (the "
        "interval's low end); probes: at that rate / in all (those the generator bound do "
        "not count); service cpu, generator cpu: the share of its cores each used there; "
        "pods: the generator Pods that offered it.",
        *(f"  {s.message}" for s in searches),
    ]
