"""`make bench-scale`: the operator at the scale of a cluster, on KWOK's fake nodes, beside
the commit it is compared with, in one run.

Two sizes: `small` (50 experiments x 100 trials on 100 fake nodes, `make bench-scale`) and
`large` (200 x 100 on 500, `make bench-scale-large`); parallelism 10 each. The real
apiserver, scheduler and operator; KWOK plays the kubelet (a trial Pod starts in 0.2-0.8 s,
ends after its expected duration with a Result, 2 % fail). The operator runs as the chart
runs it: two replicas with `--leader-elect`, one standing by. Halfway through, the active one
is killed (SIGKILL); the standby takes the Lease once it expires (15 s, the chart's) and
catches up. With CXLAB_SCALE_CHAOS=1 the apiserver is restarted at a quarter and etcd at
three quarters as well (hack/restart.sh).

Each operator runs from its own source tree: HEAD's, and the baseline commit's
(CXLAB_SCALE_BASELINE, `none` for no baseline), each exported with `git archive` under
build/bench/ (so the checkout can change while it runs). Prints, side by side: the
operator's CPU per trial and peak RSS, its API requests per trial by verb, trial Pod ended
→ trial recorded in status (p50, p99), the takeover (the trials that ended while no replica
led, recorded; the first new trial Pod of each experiment after the standby took the
Lease), and whether every trial was recorded exactly once (one entry, one Pod).
Prints figures; asserts nothing.

A run that has not recorded every trial after CXLAB_SCALE_GIVE_UP_SECONDS (6000; the
baseline's: CXLAB_SCALE_BASELINE_SECONDS, 1200 at the large size, which the baseline records
a few trials a minute of) stops: its figures are per trial recorded, and it says so.
CXLAB_SCALE_EXPERIMENTS and CXLAB_SCALE_TRIALS (a multiple of 10) make it smaller;
CXLAB_SCALE_PROFILE=DIR samples each operator process with py-spy (build/tools/py-spy), for
its first CXLAB_SCALE_PROFILE_SECONDS if set.
"""

from __future__ import annotations

import contextlib
import itertools
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import urllib3
from bench_operator import (
    DEFAULT_BASELINE,
    KUBECONFIG,
    ROOT,
    events,
    install_crds,
    memory_kib,
    remove_namespace,
    source_tree,
)

SIZES = {"small": (50, 100), "large": (200, 500)}  # experiments, fake nodes
SIZE = os.environ.get("CXLAB_SCALE_SIZE", "small")
EXPERIMENTS = int(os.environ.get("CXLAB_SCALE_EXPERIMENTS", SIZES[SIZE][0]))
NODES = SIZES[SIZE][1]
TRIALS = int(os.environ.get("CXLAB_SCALE_TRIALS", "100"))
BASELINE = os.environ.get("CXLAB_SCALE_BASELINE", DEFAULT_BASELINE)
CHAOS = os.environ.get("CXLAB_SCALE_CHAOS") == "1"
PROFILE = os.environ.get("CXLAB_SCALE_PROFILE")  # a folder: py-spy's samples of each process
# seconds of each process sampled from its start (0: its whole life): 30 shows a takeover
PROFILE_SECONDS = int(os.environ.get("CXLAB_SCALE_PROFILE_SECONDS", "0"))
PARALLELISM = 10
WORKERS = list(range(1, 11))  # 10 tasks at 100 ms: 1.0 s down to 0.1 s
TASKS, RTT = 10, 0.1
METRICS_PORT = 18095  # the first replica's; the next ones count up
# The Lease lives outside the run's namespace: the replicas outlive it (they take the
# experiments' finalizers off while it is deleted). The chart's lease duration.
LEASE_NAMESPACE, LEASE_SECONDS = "default", 15
KUBECTL = [str(ROOT / "build/k8s/bin/kubectl"), "--kubeconfig", str(KUBECONFIG)]
FAKE_NODES = {"nodeSelector": {"type": "kwok"},
              "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                               "effect": "NoSchedule"}]}  # fmt: skip
# A run that has not recorded every trial by then stops, and its figures are those of the
# trials it recorded (per trial: per trial recorded). The baseline's own limit: at the large
# size it records a few trials a minute, and would hold the machine for the whole limit.
GIVE_UP_SECONDS = int(os.environ.get("CXLAB_SCALE_GIVE_UP_SECONDS", "6000"))
BASELINE_SECONDS = int(os.environ.get("CXLAB_SCALE_BASELINE_SECONDS", str(GIVE_UP_SECONDS)))


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
    """The operator's replicas in one run, from one tree, as the chart runs them: each with
    `--leader-elect` (one Lease per run), one active and one standing by. The active one is
    killed halfway; the standby takes over once the Lease expires (LEASE_SECONDS, the
    chart's), and a new standby starts as the killed container would restart."""

    def __init__(self, tree: Path, namespace: str) -> None:
        self.tree = tree
        self.namespace = namespace  # the only one the operator serves
        self.lease_name = f"cxlab-bench-{namespace}"
        self.processes: dict[int, tuple[subprocess.Popen[bytes], int]] = {}  # pid → (, port)
        self.ports = iter(range(METRICS_PORT, METRICS_PORT + 100))
        self.cpu = 0.0  # seconds, of every process ended so far
        self.peaks: list[float] = []  # MiB, each process's, in the order they ended
        # when each process's peak was reached (time.time(): its high-water mark last rose,
        # as sampled every half second), in the same order: a burst's or a steady climb's
        self.peak_times: list[float] = []
        self.peak_at: dict[int, tuple[float, float]] = {}  # pid → (its peak so far, when)
        self.requests: Counter[str] = Counter()  # by verb, every process's
        self.last: dict[int, tuple[float, float, Counter[str]]] = {}  # pid → its last sample
        self.restarts: list[int | None] = []  # exit codes of the replicas that exited
        self.profilers: list[subprocess.Popen[bytes]] = []

    def start(self) -> int:
        """A replica; its pid (its Lease identity ends with it)."""
        log = open(ROOT / "build/cluster/logs/operator-bench-scale.log", "ab")  # noqa: SIM115
        path = f"{self.tree / 'operator'}:{self.tree / 'workloads' / 'python'}"
        port = next(self.ports)
        process = subprocess.Popen(
            [sys.executable, "-m", "cxlab.cli", "operator", "--health-port", "0",
             "--metrics-port", str(port), "--namespace", self.namespace, "--leader-elect",
             "--lease-namespace", LEASE_NAMESPACE, "--lease-name", self.lease_name,
             "--lease-duration", str(LEASE_SECONDS)],
            # MALLOC_ARENA_MAX as the chart runs it; the tree's sources before the venv's
            env={"MALLOC_ARENA_MAX": "2", **os.environ, "KUBECONFIG": str(KUBECONFIG),
                 "PYTHONPATH": path},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.processes[process.pid] = (process, port)
        self.last[process.pid] = (0.0, 0.0, Counter())
        if PROFILE:  # py-spy samples each process from outside (its own CPU is not counted)
            out = Path(PROFILE) / f"operator-{process.pid}.txt"
            self.profilers.append(subprocess.Popen(
                [str(ROOT / "build/tools/py-spy/bin/py-spy"), "record", "--nonblocking",
                 "--format", "raw", "--rate", "20", "--pid", str(process.pid),
                 "--output", str(out),
                 *(["--duration", str(PROFILE_SECONDS)] if PROFILE_SECONDS else [])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        return process.pid

    def lease(self) -> tuple[int | None, float | None]:
        """(pid of the Lease's holder, when it acquired it): None before any has."""
        coordination = kubernetes.client.CoordinationV1Api()
        try:
            spec = coordination.read_namespaced_lease(self.lease_name, LEASE_NAMESPACE).spec
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None, None
            raise
        except urllib3.exceptions.HTTPError:  # the apiserver restarting (chaos): not known
            return None, None
        holder = int(spec.holder_identity.rsplit("-", 1)[1]) if spec.holder_identity else None
        acquired = spec.acquire_time.timestamp() if spec.acquire_time else None
        return holder, acquired

    def restart_exited(self) -> None:
        """A replica that exited on its own is started again, as the kubelet restarts its
        container: a leader that could not renew its Lease for two thirds of its duration
        (the apiserver away) exits by design. Its figures are its last sample's."""
        for pid, (process, _) in list(self.processes.items()):
            if process.poll() is None:
                try:
                    cpu, rss, _ = self.sample(pid, requests=False)
                except (OSError, ValueError):  # exiting right now: next round
                    continue
                self.last[pid] = (cpu, rss, self.last[pid][2])
                continue
            cpu, rss, requests = self.last.pop(pid)
            self.cpu, self.requests = self.cpu + cpu, self.requests + requests
            self._keep_peak(pid, rss)
            del self.processes[pid]
            self.restarts.append(process.returncode)
            if len(self.restarts) > 10:
                sys.exit("the operator's replicas keep exiting: see "
                         "build/cluster/logs/operator-bench-scale.log")  # fmt: skip
            self.start()

    def sample_requests(self) -> None:
        """The running replicas' request counts, kept for one that exits."""
        for pid in self.processes:
            with contextlib.suppress(OSError, ValueError):  # exiting right now
                self.last[pid] = self.sample(pid)

    def sample(self, pid: int, requests: bool = True) -> tuple[float, float, Counter[str]]:
        """(CPU seconds, peak RSS MiB, requests by verb) of a running replica (its metrics
        not read without `requests`)."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        rss = memory_kib(pid, "VmHWM:") / 1024
        if rss > self.peak_at.get(pid, (0.0, 0.0))[0]:
            self.peak_at[pid] = (rss, time.time())
        counted: Counter[str] = Counter()
        if not requests:
            return cpu, rss, counted
        port = self.processes[pid][1]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("cxlab_operator_api_requests_total{"):
                        verb = line.split('verb="')[1].split('"')[0]
                        counted[verb] = int(float(line.rsplit(" ", 1)[1]))
        except OSError:
            pass
        return cpu, rss, counted

    def account(self, pid: int) -> None:
        """Add a running replica's figures (before it is killed or stopped)."""
        self.last.pop(pid, None)
        cpu, rss, requests = self.sample(pid)
        self.cpu += cpu
        self._keep_peak(pid, rss)
        self.requests += requests

    def _keep_peak(self, pid: int, rss: float) -> None:
        """A replica's peak RSS and when it was reached, once its figures are final."""
        self.peaks.append(rss)
        self.peak_times.append(self.peak_at.get(pid, (0.0, math.nan))[1])

    def running(self, pid: int) -> None:
        """Exits the benchmark if the replica has (its metrics port taken, say): it would
        otherwise wait for a Lease nobody takes."""
        process, _ = self.processes[pid]
        if process.poll() is not None:
            raise SystemExit(
                f"the operator (pid {pid}) exited ({process.returncode}) before "
                f"it led: see build/cluster/logs/operator-bench-scale.log"
            )

    def kill(self, pid: int) -> None:
        """SIGKILL: no chance to tidy up."""
        self.account(pid)
        process, _ = self.processes.pop(pid)
        process.kill()
        process.wait()

    def high_water(self) -> float:
        """The highest peak RSS (MiB) of the replicas running now, over their lives."""
        return max((memory_kib(pid, "VmHWM:") / 1024 for pid in self.processes), default=0.0)

    def account_running(self) -> None:
        for pid in self.processes:
            self.account(pid)

    def stop(self) -> None:
        """Every replica ended (accounted for already)."""
        for process, _ in self.processes.values():
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # an older operator's stop can hang: its port
                process.kill()  # would be taken from the next run's replicas
                process.wait()
        self.processes.clear()
        try:
            kubernetes.client.CoordinationV1Api().delete_namespaced_lease(
                self.lease_name, LEASE_NAMESPACE
            )
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
        for profiler in self.profilers:
            profiler.wait(timeout=60)  # it writes its samples once its process has gone


class ApiserverRequests:
    """Every client's requests to the apiserver, from its own counter (which a restart of
    the apiserver sets back to zero: counted up to the restart, then from zero)."""

    def __init__(self) -> None:
        self.before = self.counter()
        self.counted = 0

    @staticmethod
    def counter() -> int:
        text = subprocess.run([*KUBECTL, "get", "--raw", "/metrics"], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("apiserver_request_total{")))  # fmt: skip

    def restarting(self) -> None:
        self.counted += self.counter() - self.before
        self.before = 0

    def total(self) -> int:
        return self.counted + self.counter() - self.before


def import_floor_mib(tree: Path) -> float:
    """The operator's RSS once its modules are imported and its client made (which imports
    what it needs lazily), before it does anything."""
    probe = (
        "import cxlab.controller.handlers\n"
        "from cxlab.controller.kube import Kube, load_configuration\n"
        "load_configuration(); Kube()\n"
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')))"
    )
    path = f"{tree / 'operator'}:{tree / 'workloads' / 'python'}"
    env = {"MALLOC_ARENA_MAX": "2", **os.environ, "PYTHONPATH": path, "KUBECONFIG": str(KUBECONFIG)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env=env)  # fmt: skip
    return int(out.stdout) / 1024


@dataclass
class Seen:
    """What the benchmark's watches saw of one run (time.time() throughout)."""

    ended: dict[tuple[str, str], float] = field(default_factory=dict)  # trial → Pod ended
    pods_of: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    added: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # Pods
    recorded: dict[tuple[str, str], float] = field(default_factory=dict)  # first in status
    entries: Counter[tuple[str, str]] = field(default_factory=Counter)  # entries at the end
    sizes: dict[str, int] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)


def watch(core: Any, custom: Any, namespace: str, seen: Seen) -> list[threading.Thread]:
    def watch_pods() -> None:
        # plain dicts (deserialize=False): this machine's two cores are the operator's too
        for event in events(core.list_namespaced_pod, namespace, seconds=GIVE_UP_SECONDS,
                            label_selector="cxlab.dev/trial", deserialize=False):  # fmt: skip
            pod, moment = event["object"], time.time()
            labels = pod["metadata"]["labels"]
            key = (labels["cxlab.dev/experiment"], labels["cxlab.dev/trial"])
            if pod["metadata"]["name"] not in seen.pods_of[key]:
                seen.pods_of[key].add(pod["metadata"]["name"])
                seen.added[key[0]].append(moment)
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                seen.ended.setdefault(key, moment)
            if seen.done.is_set():
                return

    def watch_experiments() -> None:
        listing = (custom.list_namespaced_custom_object, "cxlab.dev", "v1alpha1", namespace,
                   "concurrencyexperiments")  # fmt: skip
        for event in events(*listing, seconds=GIVE_UP_SECONDS):
            body, moment = event["object"], time.time()
            name, status = body["metadata"]["name"], body.get("status") or {}
            for entry in status.get("trials") or []:
                seen.recorded.setdefault((name, entry["name"]), moment)
            if status.get("phase") in ("Succeeded", "Failed") and name not in seen.finished:
                seen.finished[name] = moment
                seen.sizes[name] = len(json.dumps(body))
                for entry in status.get("trials") or []:
                    seen.entries[(name, entry["name"])] += 1
                if len(seen.finished) == EXPERIMENTS:
                    seen.done.set()
                    return

    threads = [threading.Thread(target=watch_pods, daemon=True),
               threading.Thread(target=watch_experiments, daemon=True)]  # fmt: skip
    for thread in threads:
        thread.start()
    return threads


def restart(component: str, requests: ApiserverRequests, log: list[str], began: float) -> None:
    if component == "kube-apiserver":
        requests.restarting()
    at = time.time() - began
    done = subprocess.run([str(ROOT / "hack/restart.sh"), component], capture_output=True,
                          text=True)  # fmt: skip
    outcome = "back" if done.returncode == 0 else f"FAILED: {done.stderr.strip()[-300:]}"
    log.append(f"{component} at {at:.0f} s, {outcome} after {time.time() - began - at:.0f} s")


def run(label: str, tree: Path, limit: int) -> dict[str, str]:
    """One run of the benchmark with the operator from `tree`, for at most `limit` seconds;
    its figures by row."""
    install_crds(tree)
    core, custom = kubernetes.client.CoreV1Api(), kubernetes.client.CustomObjectsApi()
    namespace = f"cxlab-scale-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    operator = Operator(tree, namespace)
    first = operator.start()
    total = EXPERIMENTS * TRIALS
    seen = Seen()
    watch(core, custom, namespace, seen)
    while operator.lease()[0] is None:  # the first replica leads: the second stands by
        operator.running(first)
        time.sleep(0.2)
    operator.start()
    time.sleep(5)  # the operator's start-up and the watches' first lists are not measured
    requests = ApiserverRequests()
    began = time.time()
    print(f"[{time.strftime('%H:%M:%S')}] {label}: {EXPERIMENTS} experiments", file=sys.stderr)
    for i in range(EXPERIMENTS):
        custom.create_namespaced_custom_object(
            "cxlab.dev", "v1alpha1", namespace, "concurrencyexperiments", experiment(f"s{i:03d}")
        )
    killed_at = successor = leader = None
    chaos: list[str] = []
    # (fraction of trials recorded, what happens then)
    steps = [(0.5, "operator")] + ([(0.25, "kube-apiserver"), (0.75, "etcd")] if CHAOS else [])
    steps.sort()
    restarts: list[threading.Thread] = []
    rounds = itertools.count()
    gave_up: int | None = None
    while not seen.done.wait(0.5):
        operator.restart_exited()
        if next(rounds) % 20 == 0:  # every 10 s: what a replica that exits had sent
            operator.sample_requests()
        if killed_at is not None and successor is None:
            holder, acquired = operator.lease()
            if holder is not None and holder != leader:  # the standby took over
                successor = acquired
                operator.start()  # the killed container, restarted: the next standby
        if steps and len(seen.recorded) >= total * steps[0][0]:
            _, what = steps.pop(0)
            if what == "operator":
                while (leader := operator.lease()[0]) is None:
                    time.sleep(0.5)
                killed_at = time.time()
                operator.kill(leader)
            else:  # in the background: the watches and the operator ride it out
                thread = threading.Thread(target=restart, args=(what, requests, chaos, began))
                thread.start()
                restarts.append(thread)
        if time.time() - began > limit:
            print(f"{label}: gave up after {limit} s", file=sys.stderr)
            gave_up = limit
            break
    for thread in restarts:
        thread.join()
    elapsed = gave_up or max(seen.finished.values(), default=time.time()) - began
    everyone = requests.total()
    operator.account_running()
    rows = figures(seen, operator, tree, began, elapsed, everyone, killed_at, successor, chaos,
                   gave_up)  # fmt: skip
    remove_namespace(core, custom, namespace, seconds=300)
    # Deleting every experiment at once is a burst of its own (after the figures above)
    rows["peak RSS once all are deleted"] = f"{operator.high_water():.0f} MiB"
    operator.stop()
    return rows


def figures(
    seen: Seen, operator: Operator, tree: Path, began: float, elapsed: float, everyone: int,
    killed_at: float | None, successor: float | None, chaos: list[str], gave_up: int | None,
) -> dict[str, str]:  # fmt: skip
    planned = EXPERIMENTS * TRIALS
    total = max(1, len(seen.recorded))  # per trial: per trial recorded
    latencies = sorted(seen.recorded[k] - t for k, t in seen.ended.items() if k in seen.recorded)
    counts = Counter(seen.entries.values())
    extra_pods = sum(1 for pods in seen.pods_of.values() if len(pods) > 1)
    mine = sum(operator.requests.values())
    verbs = ", ".join(f"{v} {n / total:.2f}" for v, n in sorted(operator.requests.items()))
    rows = {
        # seen in status at least once; the entries are counted in finished experiments'
        # statuses, once (a run that gave up has trials in unfinished ones)
        "trials recorded": f"{len(seen.recorded)} of {planned}"
        + (f", {len(seen.entries)} in finished ones" if len(seen.entries) != total else "")
        + (f" (gave up after {gave_up} s)" if gave_up else ""),
        "recorded more than once": f"{sum(n for c, n in counts.items() if c > 1)}",
        "trials with more than one Pod": f"{extra_pods}",
        "total time": f"{elapsed:.0f} s",
        "operator CPU per trial": f"{1000 * operator.cpu / total:.1f} ms ({operator.cpu:.0f} s)",
        "operator peak RSS": f"{max(operator.peaks):.0f} MiB",
        "  each process": ", ".join(f"{p:.0f}" for p in operator.peaks)
        + f"; imports {import_floor_mib(tree):.0f}",
        "  each reached at": ", ".join(f"{t - began:.0f}" for t in operator.peak_times) + " s",
        "operator API requests per trial": f"{mine / total:.2f}",
        "  by verb": verbs,
        "everyone's API requests per trial": f"{everyone / total:.1f}",
        "Pod ended -> recorded p50": f"{_quantile(latencies, 0.5):.2f} s",
        "Pod ended -> recorded p99": f"{_quantile(latencies, 0.99):.2f} s",
        "Pod ended -> recorded max": f"{latencies[-1] if latencies else 0:.2f} s",
        "largest experiment object": f"{max(seen.sizes.values(), default=0) / 1024:.0f} KiB",
    }
    if killed_at is not None and successor is not None:
        acting = min((t for t in seen.recorded.values() if t >= successor), default=math.inf)
        # The trials it had to catch up on: ended before it acted, not recorded before the
        # kill.
        down = [k for k, t in seen.ended.items()
                if t <= acting and seen.recorded.get(k, math.inf) >= killed_at]  # fmt: skip
        waited = sorted(seen.recorded[k] - seen.ended[k] for k in down if k in seen.recorded)
        caught = [seen.recorded[k] for k in down if k in seen.recorded]
        # experiments with trials still to start when it took over (not those whose every
        # Pod was made before: the large size's first admitted end before the kill)
        firsts = [min((t for t in times if t >= successor), default=math.inf)
                  for times in seen.added.values()
                  if sum(t < successor for t in times) < TRIALS]  # fmt: skip
        firsts = [t - successor for t in firsts]
        rows["kill -9 at"] = f"{killed_at - began:.0f} s"
        rows["standby took the Lease"] = f"{successor - killed_at:.1f} s after the kill"
        rows["successor's first status write"] = f"{acting - successor:.1f} s after it led"
        rows["trials to catch up on"] = (
            f"{len(down)}: all recorded {max(caught) - killed_at:.1f} s after the kill, "
            f"ended -> recorded p99 {_quantile(waited, 0.99):.1f} s"
            if caught else f"{len(down)}"
        )  # fmt: skip
        rows["first new Pod per experiment"] = (
            f"p50 {_quantile(firsts, 0.5):.1f} s, max {max(firsts, default=0):.1f} s after it led"
        )
    if operator.restarts:  # a leader that could not renew (the apiserver away) exits
        rows["replicas that exited on their own"] = (
            f"{len(operator.restarts)} (exit {', '.join(map(str, operator.restarts))}), "
            "each started again"
        )
    for line in chaos:
        rows[f"restart of {line.split(' ')[0]}"] = line.split(" ", 1)[1]
    return rows


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def main() -> None:
    kubernetes.config.load_kube_config(config_file=str(KUBECONFIG))
    core = kubernetes.client.CoreV1Api()
    nodes = core.list_node(label_selector="type=kwok").items
    ready = [n for n in nodes if any(c.type == "Ready" and c.status == "True"
                                     for c in n.status.conditions or [])]  # fmt: skip
    if len(ready) < NODES:
        sys.exit(f"bench-scale {SIZE} needs {NODES} Ready fake nodes (make kwok-up "
                 f"KWOK_NODES={NODES}); found {len(ready)}")  # fmt: skip
    trees = {} if BASELINE == "none" else {f"baseline {BASELINE}": source_tree(BASELINE)}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    # HEAD as committed (a change not yet committed is not measured: say so)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "operator",
                            "workloads/python"], capture_output=True, text=True).stdout  # fmt: skip
    if dirty.strip():
        print("bench-scale measures HEAD as committed; not the changes beside it", file=sys.stderr)
    trees[f"HEAD {head}"] = source_tree(head)
    columns = {
        label: run(
            label, tree, BASELINE_SECONDS if label.startswith("baseline") else GIVE_UP_SECONDS
        )
        for label, tree in trees.items()
    }
    chaos = " and the apiserver and etcd restarted" if CHAOS else ""
    print(f"Operator at scale on KWOK ({time.strftime('%Y-%m-%d')}): {EXPERIMENTS} experiments"
          f" x {TRIALS} trials (parallelism {PARALLELISM}) on {NODES} fake nodes, a kill -9 of "
          f"the operator halfway{chaos}; ideal {expected_seconds():.0f} s of tasks per "
          f"experiment")  # fmt: skip
    rows = list(dict.fromkeys(r for c in columns.values() for r in c))
    width = 2 + max(len(v) for c in columns.values() for v in (*c.values(), *columns))
    print(f"  {'':<36}" + "".join(f"{label:<{width}}" for label in columns))
    for row in rows:
        print(f"  {row:<36}" + "".join(f"{c.get(row, '-'):<{width}}" for c in columns.values()))
    if len(columns) == 2:
        base, this = columns.values()
        ratio = _number(this["operator CPU per trial"]) / _number(base["operator CPU per trial"])
        print(f"  CPU per trial, this / baseline: {ratio:.2f}")


def _number(text: str) -> float:
    return float(text.split()[0])


if __name__ == "__main__":
    main()
