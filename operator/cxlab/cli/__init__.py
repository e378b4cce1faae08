"""`cxlab plan FILE` and `cxlab run FILE [--history DIR]`: the local backend from the command
line (plan shows an ExperimentSchedule's next firings and its runs' trials too); `cxlab history
DIR`: the trend, regressions and capacity plan of a history folder; `cxlab compare A B`: two
runs point by point; `cxlab summary` and `cxlab report`; `cxlab operator`: the Kubernetes
operator. One module per command; parser.py holds every flag; the commands read what lies
outside their flags (environment, clock) from one Settings built here at start-up.

Exit status of `cxlab run` and `cxlab wait cx/NAME` (a pipeline's gate, docs/objectives.md):
0 every trial ran and the objectives are met (or there are none), 1 a trial failed, 2 a spec
or set-up that cannot run (reported before anything is written; for wait, no such experiment
or a spec the operator refused), 3 an objective is broken (whatever else happened), 4 the
objectives are inconclusive (the repetitions cannot tell; the message says how many would),
124 wait's --timeout passed first. `cxlab compare`: 0 when no point of B is worse than A's, 1
when one is, 2 for a source it cannot read or two runs without a point in common. Any command
that reads a cluster and finds no configuration for one says so in one line: exit 2.
"""

from __future__ import annotations

import os
import sys

from cxlab.cli.exits import INTERRUPTED, USAGE_ERROR
from cxlab.cli.parser import build_parser
from cxlab.cli.settings import Settings


def main(argv: list[str] | None = None, settings: Settings | None = None) -> int:
    """Parse the flags, build the start-up Settings (unless a test hands its own), run."""
    args = build_parser().parse_args(argv)
    if settings is None:
        try:
            settings = Settings.from_environment()
        except ValueError as error:  # a CXLAB_* variable that is not what it should be
            print(f"cxlab: the operator's settings (CXLAB_* variables): {error}", file=sys.stderr)
            return USAGE_ERROR
    try:
        return int(args.handler(args, settings))
    except BrokenPipeError:  # `cxlab plan ... | head`: the reader has what it wanted
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so Python's exit flush is quiet
        return 0
    except KeyboardInterrupt:
        print("cxlab: interrupted; the results so far are in the results folder", file=sys.stderr)
        return INTERRUPTED
