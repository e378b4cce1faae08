"""The trial host: runs trial Pods' runner commands as fresh processes in one long-lived Pod.

A Pod per trial costs about three seconds of start-up and teardown per trial. With
`isolation: process` the operator keeps one host Pod per parallel slot instead, with the
trial's resources and pinned cores, and runs each trial in it as a fresh process: what the
local backend does on a laptop (a fresh process on the same cores). The operator POSTs the
trial Pod's manifest; the host runs its container's command and reports the trial back as a
Pod document (the metadata as posted, a status shaped as the kubelet writes it), which the
operator reads with the Pod parser it reads trial Pods with
(operator/cxlab/experiments/pod_view.py).

    python3 -m cxlab_runner.trial_host --port 9101

HTTP API (JSON bodies). With a token in its environment (CXLAB_HOST_TOKEN, as the
operator's host Pods have), every request but /healthz must show it
(`Authorization: Bearer <token>`), else 401: whoever can reach the Pod's port cannot start or
stop its trials unless they can read its Pod too.

- `GET /healthz`: 200 once the fork server is warm, 503 before (a trial posted before then
  waits for it).
- `POST /trials`, a Pod manifest: starts its first container's command. 201 and the trial's
  document; 200 and the document already known for that name (the operator may POST again
  after a restart); 400 naming the field of a malformed manifest; 409 when another trial's
  process is still running after `--start-wait` (one trial at a time: the host is one slot).
- `GET /trials?version=V&wait=S`: `{"version": N, "items": [documents]}`, once N > V or
  after S seconds (at most 60); at once without `version`. `GET /trials/<name>`: one document.
- `DELETE /trials/<name>`: stops its process (SIGTERM, the grace period, SIGKILL), removes
  its files and forgets it. 200, 404 when unknown.

A Python runner of a model that does not monkey-patch the standard library comes from a warm
fork server, whose imports are done once; everything else is exec'd.

One module per concern: manifest.py (a trial Pod's manifest, checked), host.py (the one slot:
a trial's life), fork_server.py (how its process starts: forked warm, or exec'd),
supervision.py (signals, reaping, OOM kills, inotify), pod_document.py (the trial as the
kubelet reports a Pod), http_api.py (the API above), __main__.py (the command line).
"""

from cxlab_runner.trial_host.host import START_WAIT_SECONDS, Conflict, TrialHost, Unavailable
from cxlab_runner.trial_host.manifest import BadRequest, TrialSpec, parse_manifest, runner_only
from cxlab_runner.trial_host.pod_document import LOG_BYTES, LOG_LINES, MESSAGE_BYTES

__all__ = [
    "LOG_BYTES",
    "LOG_LINES",
    "MESSAGE_BYTES",
    "START_WAIT_SECONDS",
    "BadRequest",
    "Conflict",
    "TrialHost",
    "TrialSpec",
    "Unavailable",
    "parse_manifest",
    "runner_only",
]
