"""Entry point: `python -m cxlab_runner --model asyncio --workload sleep --tasks 1000 ...`.

gevent and locust trials monkey-patch the standard library here, before anything else is
imported; every other model runs on the unpatched interpreter.
"""

from __future__ import annotations

import sys

from cxlab_runner.config import UsageError, parse_config


def main(argv: list[str] | None = None) -> int:
    try:
        config = parse_config(sys.argv[1:] if argv is None else argv)
    except UsageError as error:
        print(f"cxlab-runner: {error}", file=sys.stderr)
        return 2
    if config.model in ("gevent", "locust"):
        from gevent import monkey

        monkey.patch_all()
    from cxlab_runner.trial import run_trial  # after patching: it imports threading

    run_trial(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
