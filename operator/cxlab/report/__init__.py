"""The experiment report: one self-contained HTML file with inline SVG charts."""

from cxlab.report.html import render_report

__all__ = ["render_report"]
