"""The report's table of the service's own figures (spec.service), beside the generator's
CPU: the same rows as cxlab run's and cxlab summary's (cxlab.service_rows)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from cxlab.analysis.point import Point
from cxlab.service_rows import SERVICE_HEADERS, SERVICE_LEGEND, has_service_figures, service_rows


def service_table(points: Sequence[Point]) -> str:
    """A section with a row per point that measured the service; none without one."""
    if not has_service_figures(points):
        return ""
    head = "".join(
        f"<th{' class=num' if i else ''}>{escape(h)}</th>" for i, h in enumerate(SERVICE_HEADERS)
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=num' if i else ''}>{escape(c)}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in service_rows(points)
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return (
        f'<section><h2>The service</h2><p class="note">{escape(SERVICE_LEGEND)}</p>'
        f'<div class="table">{table}</div></section>'
    )
