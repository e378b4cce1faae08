"""The experiment document (spec + status) → one self-contained HTML page: the answer first
(the objectives' verdict, recommendations, the capacity plan, the rate search, the objectives'
points, knees), then the curves behind it per RTT, then every number in tables.

Pure and deterministic: everything shown comes from the document, so the same document
renders to the same bytes and a report can be regenerated from result.json at any time."""

from __future__ import annotations

from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ExperimentStatus
from cxlab.report.capacity import capacity_section
from cxlab.report.charts import rtt_section
from cxlab.report.data import Context, Json, by_rtt, report_points, variant_styles
from cxlab.report.header import answer_section, header_section
from cxlab.report.objectives import objectives_section, verdict_banner
from cxlab.report.page import page_html
from cxlab.report.rates import rate_sections
from cxlab.report.search import search_section
from cxlab.report.service import service_table
from cxlab.report.tables import failed_table, knees_table, points_table, skipped_table


def render_report(document: Json) -> str:
    """The report of one experiment as a complete HTML page (no scripts, no external files)."""
    spec: Json = document.get("spec") or {}
    typed = ExperimentSpec.model_validate(spec)  # its defaults, not the report's own
    status = ExperimentStatus.read(document.get("status"))  # the shape both backends write
    summary = status.summary
    trials = status.entries
    points = report_points(summary, trials, typed)
    context = Context(
        spec=spec,
        trials=trials,
        knees=list(summary.knees or []) if summary else [],
        styles=variant_styles(points),
    )
    if typed.workload.arrival is not None:  # knees in the rate: charts against it
        body = rate_sections(points, context, trials)
    else:
        body = [
            knees_table(context.knees),
            *(rtt_section(rtt, members, context) for rtt, members in by_rtt(points)),
            points_table(points, summary),
            service_table(points),
            failed_table(trials),
            skipped_table(trials),
        ]
    sections = [
        header_section(document, typed, status, trials),
        verdict_banner(typed, status),
        answer_section(summary, status),
        capacity_section(status.capacity_plan),
        search_section(status.rate_search or [], typed.probe_latency, context),
        objectives_section(status),
        *body,
    ]
    name = str((document.get("metadata") or {}).get("name", "experiment"))
    return page_html(f"cxlab · {name}", "".join(sections), document)
