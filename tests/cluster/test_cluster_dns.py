"""The local cluster's DNS (CoreDNS from hack/cluster-up.sh, set up as kubeadm does): a trial
Pod, as the operator builds it, resolves a Service by its cluster name."""

from __future__ import annotations

import json
import time

from helpers.cluster import SHARED_POOL, Lab, experiment_spec

from cxlab.config import OperatorConfig
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pods import TERMINATION_LOG, build_trial_pod
from cxlab.experiments.resource import parse_experiment

# What the runner image's Python asks the resolver the kubelet configured (the Pod's
# /etc/resolv.conf: kube-dns, then the search domains), written where the Result would go.
RESOLVE = f"""
import json, socket, sys
names = sys.argv[1:]
found = {{n: sorted({{a[4][0] for a in socket.getaddrinfo(n, 80, socket.AF_INET)}}) for n in names}}
resolv = open("/etc/resolv.conf").read()
open("{TERMINATION_LOG}", "w").write(json.dumps({{"found": found, "resolv": resolv}}))
"""


def test_a_trial_pod_resolves_a_service_by_its_cluster_name(lab: Lab) -> None:
    service = lab.core.create_namespaced_service(
        lab.namespace,
        {
            "metadata": {"name": "dns-smoke"},
            "spec": {"ports": [{"port": 80}], "selector": {"app": "nothing-yet"}},
        },
    )
    spec = parse_experiment(
        {"apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
         "metadata": {"name": "dns"},
         # in the shared pool: a Pod the operator does not queue would otherwise wait for the
         # node's one exclusive core behind every other test's trials (it was still Pending
         # after 120 s in a cold run on a machine kept busy)
         "spec": experiment_spec([{"model": "asyncio"}], **SHARED_POOL)}
    ).spec  # fmt: skip
    pod = build_trial_pod(
        experiment="dns", namespace=lab.namespace, uid="u-dns", spec=spec,
        trial=plan_trials(spec)[0], attempt=1, config=OperatorConfig(),
    )  # fmt: skip
    pod["metadata"].pop("ownerReferences")  # no experiment owns it here
    container = pod["spec"]["containers"][0]
    container.pop("readinessProbe", None)
    full = f"dns-smoke.{lab.namespace}.svc.cluster.local"
    container["command"] = ["python3", "-c", RESOLVE, full, "dns-smoke", "kubernetes.default"]
    lab.core.create_namespaced_pod(lab.namespace, pod)
    name = pod["metadata"]["name"]
    deadline = time.monotonic() + 120
    while (seen := lab.core.read_namespaced_pod(name, lab.namespace)).status.phase not in (
        "Succeeded",
        "Failed",
    ):
        assert time.monotonic() < deadline, f"the Pod is still {seen.status.phase}"
        time.sleep(0.5)
    terminated = seen.status.container_statuses[0].state.terminated
    assert seen.status.phase == "Succeeded", terminated.message
    answer = json.loads(terminated.message)
    cluster_ip = service.spec.cluster_ip
    # the full name, the short one through the search path, and the apiserver's Service
    assert answer["found"] == {
        full: [cluster_ip],
        "dns-smoke": [cluster_ip],
        "kubernetes.default": ["10.96.0.1"],
    }, answer
    assert "nameserver 10.96.0.10" in answer["resolv"], answer["resolv"]
    assert f"search {lab.namespace}.svc.cluster.local svc.cluster.local" in answer["resolv"]
    warnings = [e.reason for e in lab.events(name, kind="Pod", timeout=0)]
    assert "MissingClusterDNS" not in warnings, warnings
