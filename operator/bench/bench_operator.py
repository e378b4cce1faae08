"""`make bench-operator`: what the operator costs on the real local cluster, in one run.

Side by side: the baseline commit's operator (CXLAB_BENCH_BASELINE, main before the lean
operator by default) and HEAD's, each from its own `git archive` under build/bench/, both
with a Pod per trial, and HEAD's with trial hosts (`isolation: process`: the trials run as
processes in one host Pod). Each time it starts its own operator, applies an experiment of
10 short trials (parallelism 1), and measures: the experiment's duration against the sum of
its trials' wall times (the goal for trial hosts: at most 1.5 x the walls + 2 s) and
against the baseline's (for a Pod per trial: a third less); one trial's tasks ended → the
next one's began (everything a trial costs beyond its tasks); apply → first trial Pod
created; each Pod's own start-up
(created → its runner's tasks began); trial Pod ended → next trial's Pod created; the
operator's overhead per trial (the experiment's duration outside every trial Pod's life,
per trial); status patches per trial (watch events whose status changed); the operator's
API requests per trial (its own counter, by verb); whether the metrics were collected; the
operator's RSS. Prints figures; asserts nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import urllib3
import yaml
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from cxlab.controller.kube import Kube
from cxlab.local.delay_target import free_port

ROOT = Path(__file__).resolve().parents[2]
KUBECONFIG = ROOT / "build" / "cluster" / "kubeconfig"
TRIALS = 10
# main before the lean operator (issue 31): what the benchmarks compare with by default
DEFAULT_BASELINE = "e70309d"
BASELINE = os.environ.get("CXLAB_BENCH_BASELINE", DEFAULT_BASELINE)


def experiment(name: str, isolation: str = "pod") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workload": {"type": "sleep", "tasks": 50, "rtt": "10ms"},
        "models": [{"model": "asyncio", "workers": [1, 2, 5, 10, 0]}],
        "repetitions": TRIALS // 5,
    }
    if isolation != "pod":  # the baseline knows no such field
        spec["isolation"] = isolation
    return {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": name},
        "spec": spec,
    }


def events(
    list_call: Callable[..., Any], *args: Any, seconds: float, **kwargs: Any
) -> Iterator[Any]:
    """Watch events for up to `seconds`. A watch the apiserver ends with 410 (its resource
    version expired) or 504 (its watch cache is behind the version a fresh list returned) is
    started again from the current state, as kopf and client-go's reflector do; so is one
    whose connection broke (the apiserver restarted: bench-scale's chaos runs)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        watcher = kubernetes.watch.Watch()
        try:
            yield from watcher.stream(list_call, *args, timeout_seconds=max(1, int(left)), **kwargs)
        except ApiException as error:
            if error.status not in (410, 500, 503, 504):
                raise
            print(
                f"watch ended with {error.status} ({error.reason}): watching again", file=sys.stderr
            )
            time.sleep(0.5)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            print(f"watch broke ({error!r:.100}): watching again", file=sys.stderr)
            time.sleep(1)
        except KeyError as error:
            # With deserialize=False the client reads an ERROR event's `raw_object`, which
            # only its deserialising path sets: the event (a 410, seen on the large size's
            # long run) surfaces as this KeyError. Start again as for the statuses above.
            if error.args != ("raw_object",):
                raise
            print("watch ended with an ERROR event: watching again", file=sys.stderr)
            time.sleep(0.5)


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


@dataclass
class PodSeen:
    """One trial Pod as the benchmark's watch saw it (time.time(), comparable with the
    Result's startedAtUnixSeconds: one machine, one clock)."""

    trial: str
    added: float
    ended: float | None = None  # first seen Succeeded or Failed
    scheduled: float | None = None  # first seen bound to a node
    deleting: float | None = None  # first seen with a deletionTimestamp


def source_tree(commit: str) -> Path:
    """The operator's Python sources at `commit`, exported once under build/bench/."""
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    tree = ROOT / "build" / "bench" / full[:12]
    if not (tree / ".exported-v2").exists():
        tree.mkdir(parents=True, exist_ok=True)
        parts = ["operator", "workloads/python", "manifests/crds"]
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", full, *parts],
                                 capture_output=True, check=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        (tree / ".exported-v2").touch()
    return tree


def install_crds(tree: Path) -> None:
    """The CRDs of the commit measured: the apiserver defaults a field a newer CRD adds
    (spec.isolation), and an older operator refuses the field it does not know. Waits
    until the apiserver serves the schema applied: a dry run defaults nothing the tree's
    CRD lacks."""
    crds = tree / "manifests" / "crds"
    subprocess.run([str(ROOT / "build" / "k8s" / "bin" / "kubectl"), "--kubeconfig",
                    str(KUBECONFIG), "apply", "--server-side", "--force-conflicts", "-f",
                    str(crds)], check=True, capture_output=True)  # fmt: skip
    crd = yaml.safe_load((crds / "concurrencyexperiments.cxlab.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields = set(schema["properties"]["spec"]["properties"])
    custom = kubernetes.client.CustomObjectsApi()
    deadline = time.monotonic() + 60
    while True:
        made = custom.create_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", "default", "concurrencyexperiments",
            experiment("crd-check"), dry_run="All",
        )  # fmt: skip
        if set(made["spec"]) <= fields:
            return
        if time.monotonic() > deadline:
            sys.exit(f"the apiserver still defaults fields the CRDs of {tree} lack")
        time.sleep(0.5)


def main() -> None:
    kubernetes.config.load_kube_config(config_file=str(KUBECONFIG))
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    # (source tree, CXLAB_RUNNER_FINAL_READ, spec.isolation) by column
    settings = {f"baseline {BASELINE}": (source_tree(BASELINE), "10s", "pod"),
                f"HEAD {head}": (source_tree(head), "10s", "pod"),
                f"HEAD {head}, trial hosts": (source_tree(head), "10s", "process")}  # fmt: skip
    columns = {label: measure(*setting) for label, setting in settings.items()}
    baseline = float(next(iter(columns.values()))["experiment duration"].split()[0])
    for rows in columns.values():
        duration = float(rows["experiment duration"].split()[0])
        rows["duration / the baseline's"] = f"{duration / baseline:.2f}"
    print(f"Operator on the local cluster: {TRIALS} trials of 50 sleep tasks at 10 ms")
    width = 2 + max(len(v) for rows in columns.values() for v in (*rows.values(), *columns))
    print(f"{'':<44}" + "".join(f"{label:<{width}}" for label in columns))
    for row in next(iter(columns.values())):
        print(f"{row:<44}" + "".join(f"{rows.get(row, '-'):<{width}}" for rows in columns.values()))


def operator_requests(port: int) -> dict[str, float]:
    """The operator's API requests so far, by verb (cxlab_operator_api_requests_total)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        sample.labels["verb"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "cxlab_operator_api_requests"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def measure(tree: Path, final_read: str, isolation: str) -> dict[str, str]:
    install_crds(tree)
    core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
    namespace = f"cxlab-bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    log = open(ROOT / "build" / "cluster" / "logs" / "operator-bench.log", "ab")  # noqa: SIM115
    command = [sys.executable, "-m", "cxlab.cli", "operator"]
    metrics_port = free_port()
    operator = subprocess.Popen(
        [*command, "--health-port", "0", "--metrics-port", str(metrics_port),
         "--namespace", "cxlab-bench-*"],
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG), "CXLAB_RUNNER_FINAL_READ": final_read,
             "PYTHONPATH": f"{tree / 'operator'}:{tree / 'workloads' / 'python'}"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        time.sleep(5)  # the operator's start-up is not what is measured
        before = operator_requests(metrics_port)
        name = "bench"
        pods: dict[str, PodSeen] = {}
        status_changes = 0
        done = threading.Event()

        def watch_pods() -> None:
            for event in events(core.list_namespaced_pod, namespace, seconds=300,
                                label_selector=f"cxlab.dev/experiment={name}"):  # fmt: skip
                pod, seen = event["object"], time.time()
                trial = pod.metadata.labels.get("cxlab.dev/trial")
                if trial is None:  # a trial host: its trials are not Pods
                    continue
                entry = pods.setdefault(pod.metadata.name, PodSeen(trial, added=seen))
                if pod.status.phase in ("Succeeded", "Failed") and entry.ended is None:
                    entry.ended = seen
                if pod.spec.node_name and entry.scheduled is None:
                    entry.scheduled = seen
                if pod.metadata.deletion_timestamp and entry.deleting is None:
                    entry.deleting = seen
                if done.is_set():
                    return

        def watch_status() -> None:
            nonlocal status_changes
            previous = json.dumps(None)  # created without a status
            for event in events(custom.list_namespaced_custom_object, "cxlab.dev", "v1alpha1",
                                namespace, "concurrencyexperiments", seconds=600):  # fmt: skip
                status = json.dumps(event["object"].get("status"), sort_keys=True)
                # a watch started again replays the object as ADDED: a change is a change
                if status != previous:
                    status_changes += 1
                previous = status
                if event["object"].get("status", {}).get("phase") in ("Succeeded", "Failed"):
                    done.set()
                    return

        # daemons: a failed apply must not leave the run waiting for the watches' timeouts
        threads = [
            threading.Thread(target=watch_pods, daemon=True),
            threading.Thread(target=watch_status, daemon=True),
        ]
        for thread in threads:
            thread.start()
        time.sleep(1)
        applied = time.time()
        custom.create_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments",
            experiment(name, isolation),
        )  # fmt: skip
        threads[1].join()
        finished = time.time()
        # with the trials' full entries (their Results are in ConfigMaps beside it)
        found = Kube().get_experiment(namespace, name, full=True)
        assert found is not None
        status = found["status"]
        after = operator_requests(metrics_port)
        rows = report(status, pods, applied, finished, status_changes)
        requests = {verb: after[verb] - before.get(verb, 0) for verb in after}
        by_verb = ", ".join(f"{v} {n / TRIALS:.1f}" for v, n in sorted(requests.items()) if n)
        rows["operator API requests per trial"] = f"{sum(requests.values()) / TRIALS:.1f}"
        rows["  by verb"] = by_verb
        collected = {c["type"]: c["status"] for c in status["conditions"]}["MetricsCollected"]
        rows["MetricsCollected"] = collected
        rss, peak = memory_kib(operator.pid, "VmRSS:"), memory_kib(operator.pid, "VmHWM:")
        rows["operator RSS now / peak"] = f"{rss / 1024:.0f} / {peak / 1024:.0f} MiB"
        return rows
    finally:
        remove_namespace(core, custom, namespace, seconds=60)
        operator.terminate()
        operator.wait(timeout=30)


def remove_namespace(core: Any, custom: Any, namespace: str, seconds: float) -> None:
    """Delete a benchmark's namespace while its operator still runs: the operator removes
    its experiments' finalizers. What is left after `seconds` (or with no operator, 0) loses
    them here: no later operator would, since kopf stops serving a namespace once it is
    Terminating, and the namespace would stay Terminating for good."""
    core.delete_namespace(namespace)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            core.read_namespace(namespace)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        time.sleep(1)
    listed = custom.list_namespaced_custom_object(
        "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments"
    )
    for body in listed["items"]:
        custom.patch_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments",
            body["metadata"]["name"], {"metadata": {"finalizers": None}},
        )  # fmt: skip


def report(
    status: dict[str, Any],
    pods: dict[str, PodSeen],
    applied: float,
    finished: float,
    status_changes: int,
) -> dict[str, str]:
    """The figures: the gaps the operator leaves between trials, apart from what each Pod
    takes to start (scheduling, the container, the runner's imports) and to run."""
    trials = [t for t in status["trials"] if t.get("result")]
    seen = sorted(pods.values(), key=lambda p: p.added)
    ended = [p.ended for p in seen if p.ended is not None]
    # one trial's tasks ended → the next one's began: all a trial costs beyond its tasks
    spans = sorted(
        (t["result"]["startedAtUnixSeconds"], t["result"]["wallSeconds"]) for t in trials
    )
    between = [b[0] - (a[0] + a[1]) for a, b in itertools.pairwise(spans)]
    last_end = max(a + w for a, w in spans)
    if not seen:  # trial hosts: no Pod per trial, so no Pod's figures
        walls = sum(w for _, w in spans)
        return {
            "phase": status["phase"],
            "experiment duration": f"{finished - applied:.1f} s",
            "sum of trial wall times": f"{walls:.2f} s",
            "duration / (1.5 x walls + 2 s)": f"{(finished - applied) / (1.5 * walls + 2):.2f}",
            "tasks ended -> next trial's tasks began": _spread(between),
            "apply -> first trial's tasks began": f"{spans[0][0] - applied:.2f} s",
            "last trial's tasks ended -> experiment finished": f"{finished - last_end:.2f} s",
            "status patches per trial": f"{status_changes / TRIALS:.1f} (of {status_changes})",
        }
    # completion of one trial's Pod → the next trial's Pod created (parallelism 1)
    pairs = list(itertools.pairwise(seen))
    gaps = [b.added - a.ended for a, b in pairs if a.ended]
    # Pod created → its runner's task phase began (the Pod's own start-up)
    started = {t["result"]["trial"]: t["result"].get("startedAtUnixSeconds") for t in trials}
    startups = [started[p.trial] - p.added for p in seen if started.get(p.trial)]
    ends = {t["result"]["trial"]: t["result"]["startedAtUnixSeconds"] + t["result"]["wallSeconds"]
            for t in trials if t["result"].get("startedAtUnixSeconds")}  # fmt: skip
    lifetimes = sum((p.ended or finished) - p.added for p in seen)
    overhead = (finished - applied - lifetimes) / len(trials)
    walls = sum(t["result"]["wallSeconds"] for t in trials)
    rows = [
        ("phase", status["phase"]),
        ("apply -> first trial Pod created", f"{seen[0].added - applied:.2f} s"),
        ("experiment duration", f"{finished - applied:.1f} s"),
        ("sum of trial wall times", f"{walls:.2f} s"),
        ("duration / (1.5 x walls + 2 s)", f"{(finished - applied) / (1.5 * walls + 2):.2f}"),
        ("tasks ended -> next trial's tasks began", _spread(between)),
        ("apply -> first trial's tasks began", f"{spans[0][0] - applied:.2f} s"),
        ("last trial's tasks ended -> experiment finished", f"{finished - last_end:.2f} s"),
        ("Pod start-up (created -> tasks), median", f"{statistics.median(startups):.2f} s"),
        ("trial Pod ended -> next Pod created", _spread(gaps)),
        # where a trial's seconds go, one Pod after another (medians over the trials)
        (
            "  created -> bound to the node",
            _median([p.scheduled - p.added for p in seen if p.scheduled]),
        ),
        (
            "  tasks ended -> deleted by the operator",
            _median([p.deleting - ends[p.trial] for p in seen if p.deleting and p.trial in ends]),
        ),
        (
            "  tasks ended -> Pod ended (Succeeded)",
            _median([p.ended - ends[p.trial] for p in seen if p.ended and p.trial in ends]),
        ),
        (
            "  Pod ended -> next Pod bound",
            _median([b.scheduled - a.ended for a, b in pairs if a.ended and b.scheduled]),
        ),
        (
            "  next Pod bound -> its tasks began",
            _median(
                [
                    started[p.trial] - p.scheduled
                    for p in seen[1:]
                    if p.scheduled and started.get(p.trial)
                ]
            ),
        ),
        ("last Pod ended -> experiment finished", f"{finished - max(ended):.2f} s"),
        ("operator overhead per trial", f"{overhead:.2f} s (outside every Pod's life)"),
        ("status patches per trial", f"{status_changes / TRIALS:.1f} (of {status_changes})"),
    ]
    return dict(rows)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" if values else "-"


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return (
        f"median {statistics.median(ordered):.3f} s, max {ordered[-1]:.3f} s (n = {len(ordered)})"
    )


if __name__ == "__main__":
    main()
