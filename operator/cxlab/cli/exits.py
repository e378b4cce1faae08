"""The CLI's exit statuses (the package's docstring says when each is given) and the one
way a command refuses: one line on stderr, `cxlab: SOURCE: PROBLEM`, then exit 2."""

from __future__ import annotations

import sys

from cxlab.conditions import condition_of
from cxlab.experiments.status import ExperimentStatus, Phase

TRIAL_FAILED = 1
USAGE_ERROR = 2
OBJECTIVES_BROKEN = 3
OBJECTIVES_INCONCLUSIVE = 4
TIMED_OUT = 124  # as coreutils' timeout
INTERRUPTED = 130  # as a shell reports SIGINT
# Several experiments in one file: the run exits with the gravest of their statuses.
GRAVITY = (0, OBJECTIVES_INCONCLUSIVE, TRIAL_FAILED, OBJECTIVES_BROKEN)


def exit_status(status: ExperimentStatus) -> int:
    """A finished experiment's exit status (cxlab.cli's docstring)."""
    verdict = condition_of(status.conditions, "ObjectivesMet")
    if verdict is not None and verdict.status == "False":
        return OBJECTIVES_BROKEN
    if status.phase != Phase.SUCCEEDED:
        return TRIAL_FAILED
    if verdict is not None and verdict.status == "Unknown":
        return OBJECTIVES_INCONCLUSIVE
    return 0


def usage(source: str, problem: str) -> SystemExit:
    """Say what is wrong with SOURCE; the caller raises what this returns."""
    print(f"cxlab: {source}: {problem}", file=sys.stderr)
    return SystemExit(USAGE_ERROR)
