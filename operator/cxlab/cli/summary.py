"""`cxlab summary SOURCE`: an experiment's summary tables in the terminal (a result.json,
`-` for kubectl's JSON on stdin, or cx/NAME from the cluster)."""

from __future__ import annotations

import argparse

from cxlab.cli.settings import Settings
from cxlab.cli.sources import read_document
from cxlab.table import render_summary


def summary_command(args: argparse.Namespace, settings: Settings) -> int:
    """The terminal summary of an experiment (result.json, `-`, or cx/NAME)."""
    print(render_summary(read_document(settings, args.source, args.namespace)))
    return 0
