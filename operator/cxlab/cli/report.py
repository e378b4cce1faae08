"""`cxlab report SOURCE [--out FILE]`: an experiment's HTML report, the local backend's page
for a cluster experiment too."""

from __future__ import annotations

import argparse
from pathlib import Path

from cxlab.cli.settings import Settings
from cxlab.cli.sources import read_document
from cxlab.report import render_report


def report_command(args: argparse.Namespace, settings: Settings) -> int:
    """The HTML report of an experiment: the local backend's, for a cluster experiment too."""
    document = read_document(settings, args.source, args.namespace)
    out = args.out or Path(f"{document['metadata']['name']}-report.html")
    out.write_text(render_report(document))
    print(out)
    return 0
