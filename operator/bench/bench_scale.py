"""`make bench-scale`: the operator at the scale of a cluster, on KWOK's fake nodes.

50 experiments x 100 trials, parallelism 10 each, on 100 fake nodes (hack/kwok.sh): the real
apiserver, scheduler and operator; KWOK plays the kubelet (a trial Pod starts in 0.2-0.8 s,
ends after its expected duration with a Result, 2 % fail). Halfway through, the operator is
killed (SIGKILL) and started again. Prints: the operator's CPU seconds and peak RSS, apiserver
requests per trial (the operator's own, and everyone's), trial Pod ended → trial recorded in
status (p50, p99), the total time against the ideal, and whether every trial was recorded
exactly once (one entry, one Pod). Prints figures; asserts nothing.

CXLAB_SCALE_EXPERIMENTS and CXLAB_SCALE_TRIALS (a multiple of 10) make it smaller.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import kubernetes
from bench_operator import KUBECONFIG, ROOT, events, memory_kib, remove_namespace

EXPERIMENTS = int(os.environ.get("CXLAB_SCALE_EXPERIMENTS", "50"))
TRIALS = int(os.environ.get("CXLAB_SCALE_TRIALS", "100"))
PARALLELISM = 10
WORKERS = list(range(1, 11))  # 10 tasks at 100 ms: 1.0 s down to 0.1 s
TASKS, RTT = 10, 0.1
METRICS_PORT = 18095
KUBECTL = [str(ROOT / "build/k8s/bin/kubectl"), "--kubeconfig", str(KUBECONFIG)]
FAKE_NODES = {"nodeSelector": {"type": "kwok"},
              "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                               "effect": "NoSchedule"}]}  # fmt: skip


def experiment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cxlab.dev/v1alpha1",
        "kind": "ConcurrencyExperiment",
        "metadata": {"name": name},
        "spec": {
            "workload": {"type": "sleep", "tasks": TASKS, "rtt": f"{int(RTT * 1000)}ms"},
            "models": [{"model": "asyncio", "workers": WORKERS}],
            "repetitions": TRIALS // len(WORKERS),
            "parallelism": PARALLELISM,
            "placement": FAKE_NODES,
        },
    }


def expected_seconds() -> float:
    """One experiment's trials back to back, `PARALLELISM` at a time: the ideal makespan
    of its tasks alone (KWOK adds 0.2-0.8 s of start-up per trial besides)."""
    per_trial = [math.ceil(TASKS / w) * RTT for w in WORKERS] * (TRIALS // len(WORKERS))
    return sum(per_trial) / PARALLELISM


class Operator:
    def __init__(self, namespace_glob: str) -> None:
        self.glob = namespace_glob
        self.process: subprocess.Popen[bytes] | None = None
        self.cpu = 0.0  # seconds, of every process started so far (the killed one's too)
        self.peaks: list[float] = []  # MiB, each process's, in order (the killed one first)
        self.requests: Counter[str] = Counter()  # by verb, every process's

    def start(self) -> None:
        log = open(ROOT / "build/cluster/logs/operator-bench-scale.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cxlab.cli", "operator", "--health-port", "0",
             "--metrics-port", str(METRICS_PORT), "--namespace", self.glob],
            # MALLOC_ARENA_MAX as the chart runs it
            env={"MALLOC_ARENA_MAX": "2", **os.environ, "KUBECONFIG": str(KUBECONFIG)},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def sample(self) -> tuple[float, float, Counter[str]]:
        """(CPU seconds, peak RSS MiB, requests by verb) of the running process."""
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        rss = memory_kib(self.process.pid, "VmHWM:") / 1024
        requests: Counter[str] = Counter()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("cxlab_operator_api_requests_total{"):
                        verb = line.split('verb="')[1].split('"')[0]
                        requests[verb] = int(float(line.rsplit(" ", 1)[1]))
        except OSError:
            pass
        return cpu, rss, requests

    def account(self) -> None:
        """Add the running process's figures (before it is killed or stopped)."""
        cpu, rss, requests = self.sample()
        self.cpu += cpu
        self.peaks.append(rss)
        self.requests += requests

    def kill(self) -> None:
        assert self.process is not None
        self.account()
        self.process.kill()
        self.process.wait()

    def stop(self, account: bool = True) -> None:
        if self.process and self.process.poll() is None:
            if account:
                self.account()
            self.process.terminate()
            self.process.wait(timeout=30)


def apiserver_requests() -> int:
    text = subprocess.run([*KUBECTL, "get", "--raw", "/metrics"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("apiserver_request_total{")
        )
    )


def import_floor_mib() -> float:
    """The operator's RSS once its modules are imported, before it does anything."""
    probe = (
        "import cxlab.controller.handlers\n"
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env={"MALLOC_ARENA_MAX": "2", **os.environ})  # fmt: skip
    return int(out.stdout) / 1024


def main() -> None:
    kubernetes.config.load_kube_config(config_file=str(KUBECONFIG))
    core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
    nodes = core.list_node(label_selector="type=kwok").items
    ready = [n for n in nodes if any(c.type == "Ready" and c.status == "True"
                                     for c in n.status.conditions or [])]  # fmt: skip
    if len(ready) < 100:
        sys.exit(f"bench-scale needs 100 Ready fake nodes (make kwok-up); found {len(ready)}")
    namespace = f"cxlab-scale-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    operator = Operator("cxlab-scale-*")
    operator.start()
    total = EXPERIMENTS * TRIALS
    ended: dict[tuple[str, str], float] = {}  # (experiment, trial) → first seen ended
    pods_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    recorded: dict[tuple[str, str], float] = {}  # → first seen in status
    entries_seen: Counter[tuple[str, str]] = Counter()  # entries per trial at the end
    sizes: dict[str, int] = {}
    finished: dict[str, float] = {}
    done = threading.Event()

    def watch_pods() -> None:
        # plain dicts (deserialize=False): this machine's two cores are the operator's too
        for event in events(core.list_namespaced_pod, namespace, seconds=3600,
                            label_selector="cxlab.dev/trial", deserialize=False):  # fmt: skip
            pod, seen = event["object"], time.time()
            labels = pod["metadata"]["labels"]
            key = (labels["cxlab.dev/experiment"], labels["cxlab.dev/trial"])
            pods_of[key].add(pod["metadata"]["name"])
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                ended.setdefault(key, seen)
            if done.is_set():
                return

    def watch_experiments() -> None:
        for event in events(custom.list_namespaced_custom_object, "cxlab.dev", "v1alpha1",
                            namespace, "concurrencyexperiments", seconds=3600):  # fmt: skip
            body, seen = event["object"], time.time()
            name, status = body["metadata"]["name"], body.get("status") or {}
            for entry in status.get("trials") or []:
                recorded.setdefault((name, entry["name"]), seen)
            if status.get("phase") in ("Succeeded", "Failed") and name not in finished:
                finished[name] = seen
                sizes[name] = len(json.dumps(body))
                for entry in status.get("trials") or []:
                    entries_seen[(name, entry["name"])] += 1
                if len(finished) == EXPERIMENTS:
                    done.set()
                    return

    threads = [threading.Thread(target=watch_pods, daemon=True),
               threading.Thread(target=watch_experiments, daemon=True)]  # fmt: skip
    for thread in threads:
        thread.start()
    time.sleep(5)  # the operator's start-up and the watches' first lists are not measured
    requests_before = apiserver_requests()
    began = time.time()
    for i in range(EXPERIMENTS):
        body = experiment(f"s{i:02d}")
        custom.create_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments", body
        )
    killed_at = None
    while not done.wait(0.5):
        assert operator.process is not None
        if operator.process.poll() is not None:  # not killed by us: it failed on its own
            remove_namespace(core, custom, namespace, seconds=0)
            sys.exit(f"the operator exited with {operator.process.returncode}: see "
                     "build/cluster/logs/operator-bench-scale.log")  # fmt: skip
        if killed_at is None and len(recorded) >= total // 2:
            killed_at = time.time()
            operator.kill()  # SIGKILL: no chance to tidy up
            operator.start()
        if time.time() - began > 3000:
            print("gave up after 50 minutes", file=sys.stderr)
            break
    elapsed = max(finished.values(), default=time.time()) - began
    everyone = apiserver_requests() - requests_before
    operator.account()
    report(locals())
    remove_namespace(core, custom, namespace, seconds=120)
    operator.stop(account=False)


def report(run: dict[str, Any]) -> None:
    total, operator = run["total"], run["operator"]
    latencies = sorted(run["recorded"][k] - t for k, t in run["ended"].items()
                       if k in run["recorded"])  # fmt: skip
    counts = Counter(run["entries_seen"].values())
    extra_pods = sum(1 for pods in run["pods_of"].values() if len(pods) > 1)
    mine = sum(operator.requests.values())
    verbs = ", ".join(f"{v} {n / total:.1f}" for v, n in sorted(operator.requests.items()))
    ideal = expected_seconds()
    rows = [
        ("experiments x trials (parallelism)", f"{EXPERIMENTS} x {TRIALS} ({PARALLELISM}) on "
                                               "100 fake nodes"),
        ("trials recorded", f"{len(run['entries_seen'])} of {total}"),
        ("recorded more than once", f"{sum(n for c, n in counts.items() if c > 1)}"),
        ("trials with more than one Pod", f"{extra_pods}"),
        ("kill -9 of the operator", f"at {run['killed_at'] - run['began']:.0f} s, after "
                                    f"{total // 2} trials recorded" if run["killed_at"] else "-"),
        ("total time", f"{run['elapsed']:.0f} s"),
        ("ideal (tasks only, each experiment)", f"{ideal:.0f} s; with KWOK's start-up "
                                                f"{ideal + 0.5 * TRIALS / PARALLELISM:.0f} s"),
        ("operator CPU", f"{operator.cpu:.0f} s ({1000 * operator.cpu / total:.0f} ms per trial)"),
        ("operator peak RSS", f"{max(operator.peaks):.0f} MiB (each process: "
                              + ", ".join(f"{p:.0f}" for p in operator.peaks)
                              + f"; its imports alone {import_floor_mib():.0f})"),
        ("apiserver requests per trial", f"operator {mine / total:.1f} "
                                         f"({verbs}); "
                                         f"everyone {run['everyone'] / total:.1f}"),
        ("Pod ended -> trial recorded", f"p50 {_quantile(latencies, 0.5):.3f} s, "
                                        f"p99 {_quantile(latencies, 0.99):.3f} s, "
                                        f"max {latencies[-1] if latencies else 0:.3f} s"),
        ("largest experiment object", f"{max(run['sizes'].values(), default=0) / 1024:.0f} KiB"),
    ]  # fmt: skip
    print(f"Operator at scale on KWOK ({time.strftime('%Y-%m-%d')}):")
    for label, value in rows:
        print(f"  {label:<38}{value}")


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


if __name__ == "__main__":
    main()
