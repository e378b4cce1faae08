"""Entry point: `python -m cxlab_runner --model asyncio --workload sleep --tasks 1000 ...`.

gevent and locust trials monkey-patch the standard library here, before anything else is
imported; every other model runs on the unpatched interpreter.
"""

from __future__ import annotations

import signal
import sys

from cxlab_runner.config import UsageError, parse_config


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        config = parse_config(argv)
    except UsageError as error:
        print(f"cxlab-runner: {error}", file=sys.stderr)
        return 2
    syscalls = None
    if config.syscalls:  # this process only watches: the trial runs again, under strace
        from cxlab_runner.syscalls import run_traced

        status, syscalls = run_traced([a for a in argv if a != "--syscalls"], config.result_path)
        if syscalls is None:
            return status
    if config.model in ("gevent", "locust"):
        from gevent import monkey

        monkey.patch_all()
    from cxlab_runner.trial import run_trial  # after patching: it imports threading

    # In a container the runner is PID 1, which the kernel shields from signals that have
    # no handler: without this, SIGTERM (a deleted Pod) would wait for the grace period's KILL.
    signal.signal(signal.SIGTERM, _stop)
    run_trial(config, syscalls)
    return 0


def _stop(signum: int, _frame: object) -> None:
    print("cxlab-runner: stopped by SIGTERM", file=sys.stderr)
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
