"""`python3 -m cxlab_runner.trial_host --port 9101`: the trial host (its package's docstring)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from cxlab_contract import HOST_TOKEN_ENV
from cxlab_runner.trial_host.host import START_WAIT_SECONDS, TrialHost, log
from cxlab_runner.trial_host.http_api import serve
from cxlab_runner.trial_host.manifest import RESULTS_FOLDER
from cxlab_runner.trial_host.supervision import become_subreaper


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cxlab-trial-host", description="Run trial Pods' runner commands as processes."
    )
    parser.add_argument("--port", type=int, default=9101)
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument(
        "--start-wait",
        type=float,
        default=START_WAIT_SECONDS,
        help="how long a start waits for the previous trial's process to end (seconds)",
    )
    parser.add_argument(
        "--pod-ip",
        default=os.environ.get("POD_IP"),
        help="the host Pod's IP, reported as each trial's podIP (default: $POD_IP)",
    )
    parser.add_argument(
        "--any-command",
        action="store_true",
        help=f"run any command, writing its Result anywhere (tests); by default only the "
        f"runners, their Results in {RESULTS_FOLDER}",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Out of the environment before any trial's process starts: its trials never see it.
    token = os.environ.pop(HOST_TOKEN_ENV, None) or None
    become_subreaper()
    host = TrialHost(args.start_wait, args.pod_ip, args.any_command)
    server = serve(host, args.address, args.port, token)
    # PID 1 in its container: the kernel delivers it no signal that has no handler.
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: stopping.set())
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    threading.Thread(target=host.warm_up, name="warm-up", daemon=True).start()
    log(f"listening on {args.address}:{args.port}")
    stopping.wait()
    log("stopping")
    host.shutdown()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
