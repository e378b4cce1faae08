"""`cxlab history DIR`: the trend of a history folder (`cxlab run --history DIR`), the newest
run's regressions, as the schedules' own policy finds them, and its capacity plan."""

from __future__ import annotations

import argparse
import sys

from cxlab.cli.exits import USAGE_ERROR
from cxlab.cli.settings import Settings
from cxlab.experiments.status import ExperimentStatus
from cxlab.inputs import InputError
from cxlab.local.history_folder import load_history
from cxlab.schedules.regression import Policy, flagged, regressions
from cxlab.table import capacity_text
from cxlab.trend import plan_trend, regressions_text, trend_tables


def history_command(args: argparse.Namespace, settings: Settings) -> int:
    """The trend of a history folder, the newest run's regressions and its capacity plan."""
    try:
        entries, newest = load_history(args.folder)
    except InputError as error:
        print(f"cxlab: {error}", file=sys.stderr)
        return USAGE_ERROR
    names = [e.run for e in entries]
    if args.acknowledged and args.acknowledged not in names:
        print(
            f"cxlab: --acknowledged: {args.acknowledged!r} is not a run in {args.folder}; "
            f"name one of: {', '.join(names[-5:])}",
            file=sys.stderr,
        )
        return USAGE_ERROR
    policy = Policy(
        min_relative_change=args.min_change,
        significance=args.significance,
        baseline_runs=args.baseline_runs,
    )
    entries = flagged(entries, policy, args.acknowledged)
    found = regressions(entries, policy, args.acknowledged)
    plan = ExperimentStatus.read(newest["status"]).capacity_plan if newest else None
    newest_name = newest["metadata"]["name"] if newest else None
    parts = [
        trend_tables(entries),
        plan_trend(entries),
        regressions_text(found, newest_name),
        capacity_text(plan),
    ]
    print("\n\n".join(p for p in parts if p))
    return 0
