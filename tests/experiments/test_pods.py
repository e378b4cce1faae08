"""Trial and target Pod manifests (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from helpers.specs import document

from cxlab.config import OperatorConfig
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import view_pod
from cxlab.experiments.pods import build_host_pod, build_target_pod, build_trial_pod
from cxlab.experiments.resource import parse_experiment

CONFIG = OperatorConfig()


def trial_pod(config: OperatorConfig = CONFIG, **spec: Any) -> dict[str, Any]:
    experiment = parse_experiment(document(**spec))
    trial = plan_trials(experiment.spec)[-1]
    return build_trial_pod(
        experiment="x" * 40, namespace="lab", uid="u-1", spec=experiment.spec, trial=trial,
        attempt=3, config=config, target_url="http://10.0.0.9:8080/",
    )  # fmt: skip


def test_guaranteed_qos_with_whole_cpus() -> None:
    pod = trial_pod(resources={"cpu": 2, "memory": "1Gi"})
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "2", "memory": "1Gi"}


def test_restricted_pod_security() -> None:
    spec = trial_pod()["spec"]
    container = spec["containers"][0]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert spec["automountServiceAccountToken"] is False


def test_identity_ownership_and_result_channel() -> None:
    pod = trial_pod()
    metadata, container = pod["metadata"], pod["spec"]["containers"][0]
    assert metadata["name"] == "x" * 40 + "-t001-a3" and len(metadata["name"]) <= 63
    assert metadata["labels"]["cxlab.dev/experiment"] == "x" * 40
    assert metadata["labels"]["cxlab.dev/trial"] == "001-threads-w0-rtt100ms-r1"
    assert metadata["labels"]["app.kubernetes.io/managed-by"] == "cxlab-operator"
    [owner] = metadata["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "ConcurrencyExperiment",
        "u-1",
        True,
    )
    assert container["command"][:3] == ["python3", "-m", "cxlab_runner"]
    flags = dict(zip(container["command"][3::2], container["command"][4::2], strict=False))
    assert flags["--result-path"] == container["terminationMessagePath"] == "/dev/termination-log"
    assert flags["--metrics-port"] == "9100" and flags["--linger"] == CONFIG.linger
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["activeDeadlineSeconds"] == 900  # trialTimeout 15m


def test_goroutines_use_the_go_runner() -> None:
    pod = trial_pod(models=[{"model": "goroutines", "gomaxprocs": [4]}])
    command = pod["spec"]["containers"][0]["command"]
    assert command[0] == "cxlab-runner-go" and "--gomaxprocs" in command


def test_placement_and_exclusive_nodes() -> None:
    term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["bench"]}]}
    user_affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    pod = trial_pod(
        placement={
            "nodeSelector": {"pool": "bench"},
            "tolerations": [{"key": "bench", "operator": "Exists"}],
            "affinity": user_affinity,
        },
        exclusive=True,
    )
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"pool": "bench"}
    assert spec["tolerations"] == [{"key": "bench", "operator": "Exists"}]
    assert spec["affinity"]["nodeAffinity"] == user_affinity["nodeAffinity"]
    [term] = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"] == {"matchLabels": {"app.kubernetes.io/component": "trial"}}
    assert "affinity" not in trial_pod()["spec"]


def test_image_override() -> None:
    assert trial_pod(image="registry.example/runner:1")["spec"]["containers"][0]["image"] == (
        "registry.example/runner:1"
    )
    assert trial_pod()["spec"]["containers"][0]["image"] == CONFIG.runner_image


def test_http_trials_point_at_the_target() -> None:
    pod = trial_pod(workload={"type": "http", "tasks": 5, "rtt": "10ms", "responseBytes": 100})
    assert "http://10.0.0.9:8080/" in pod["spec"]["containers"][0]["command"]
    experiment = parse_experiment(
        document(workload={"type": "http", "tasks": 5, "rtt": "10ms", "responseBytes": 100})
    )
    target = build_target_pod(
        experiment="web", namespace="lab", uid="u", spec=experiment.spec, config=CONFIG
    )
    container = target["spec"]["containers"][0]
    assert container["command"] == ["cxlab-delay", "--listen=:8080", "--response-bytes=100"]
    assert "resources" not in container  # BestEffort: no share of the trials' exclusive cores
    assert target["metadata"]["labels"]["app.kubernetes.io/component"] == "delay-target"


def test_a_pod_of_several_is_named_labelled_and_probed_at_the_barrier() -> None:
    experiment = parse_experiment(
        document(models=[{"model": "asyncio", "pods": [3]}], resources={"cpu": 0.5},
                 pinning="preferred")
    )  # fmt: skip
    [trial] = plan_trials(experiment.spec)
    pod = build_trial_pod(
        experiment="ex", namespace="lab", uid="u-1", spec=experiment.spec, trial=trial,
        attempt=2, config=CONFIG, pod=1,
    )  # fmt: skip
    assert pod["metadata"]["name"] == "ex-t000-a2-p1"
    assert pod["metadata"]["labels"]["cxlab.dev/pod"] == "1"
    container = pod["spec"]["containers"][0]
    # started at the barrier (the runner's /ready), Ready once its tasks have ended (/done)
    assert container["startupProbe"]["httpGet"] == {"path": "/ready", "port": CONFIG.metrics_port}
    # the kubelet never restarts a runner before the runner's own barrier timeout ends it
    assert container["startupProbe"]["failureThreshold"] > 135  # s: period 1 s
    assert container["readinessProbe"]["httpGet"] == {"path": "/done", "port": CONFIG.metrics_port}
    command = container["command"]
    assert command[command.index("--final-read") + 1] == CONFIG.final_read == "10s"
    assert command[command.index("--pod") + 1] == "1"
    # the runner waits longer than the operator: the operator fails the trial, naming the Pod
    assert command[command.index("--barrier-timeout") + 1] == "2m15s"  # 120 s + 15 s
    assert container["resources"]["limits"]["cpu"] == "0.5"  # the shared pool, not a core
    alone = trial_pod()
    assert "startupProbe" not in alone["spec"]["containers"][0]  # one Pod starts at once
    assert alone["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/done"
    assert "--barrier-timeout" not in alone["spec"]["containers"][0]["command"]


def test_a_distributed_locust_master_listens_and_its_workers_reach_it() -> None:
    experiment = parse_experiment(
        document(workload={"type": "http", "tasks": 10, "rtt": "10ms"},
                 models=[{"model": "locust", "pods": [2]}])
    )  # fmt: skip
    [trial] = plan_trials(experiment.spec)

    def pod(index: int) -> dict[str, Any]:
        return build_trial_pod(
            experiment="ex", namespace="lab", uid="u-1", spec=experiment.spec, trial=trial,
            attempt=1, config=CONFIG, target_url="http://10.0.0.9:8080/", pod=index,
            locust_address="10.0.0.7:5557",
        )  # fmt: skip

    master, worker = pod(2)["spec"]["containers"][0], pod(0)["spec"]["containers"][0]
    assert {"name": "locust", "containerPort": 5557} in master["ports"]
    assert master["command"][master["command"].index("--locust-master") + 1] == "0.0.0.0:5557"
    assert master["command"][master["command"].index("--expect-workers") + 1] == "2"
    assert "startupProbe" in master and "startupProbe" not in worker  # only it has a barrier
    assert "--final-read" in master["command"] and "--final-read" in worker["command"]
    assert worker["command"][worker["command"].index("--locust-master") + 1] == "10.0.0.7:5557"
    assert worker["command"][worker["command"].index("--tasks") + 1] == "5"


def test_a_trial_of_several_pods_is_one_kueue_pod_group() -> None:
    experiment = parse_experiment(
        document(models=[{"model": "asyncio", "pods": [2]}], queueName="lab-queue")
    )
    [trial] = plan_trials(experiment.spec)
    pods = [
        build_trial_pod(
            experiment="ex", namespace="lab", uid="u-1", spec=experiment.spec, trial=trial,
            attempt=1, config=CONFIG, pod=index,
        )["metadata"]
        for index in (0, 1)
    ]  # fmt: skip
    groups = {m["labels"]["kueue.x-k8s.io/pod-group-name"] for m in pods}
    assert groups == {"ex-t000-a1-p0"}  # one group per attempt, admitted together
    assert {m["annotations"]["kueue.x-k8s.io/pod-group-total-count"] for m in pods} == {"2"}


def test_without_a_final_read_a_trial_pod_has_no_readiness_probe() -> None:
    """CXLAB_RUNNER_FINAL_READ=0s: the runner does not wait, nothing probes /done."""
    pod = trial_pod(config=replace(CONFIG, final_read="0s"))
    container = pod["spec"]["containers"][0]
    assert "readinessProbe" not in container and "--final-read" not in container["command"]


def test_an_unprobed_trial_pod_is_ready_only_when_the_operator_says_its_tasks_ended() -> None:
    """Its watch reserved, a trial Pod goes without the /done probe; the kubelet then calls it
    Ready as soon as it runs, which says nothing of its tasks."""
    experiment = parse_experiment(document())
    trial = plan_trials(experiment.spec)[-1]
    pod = build_trial_pod(
        experiment="ex", namespace="lab", uid="u-1", spec=experiment.spec, trial=trial,
        attempt=1, config=CONFIG, unprobed=True,
    )  # fmt: skip
    container = pod["spec"]["containers"][0]
    assert "readinessProbe" not in container
    assert container["command"][container["command"].index("--final-read") + 1] == "10s"
    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    view = view_pod(pod | {"status": running})
    assert view.unprobed and not view.ready
    probed = view_pod(trial_pod() | {"status": running})
    assert not probed.unprobed and probed.ready
    target = build_target_pod(
        experiment="web", namespace="lab", uid="u", spec=experiment.spec, config=CONFIG
    )  # not a trial: its readiness is its own
    assert view_pod(target | {"status": running}).ready


def host_pod(**spec: Any) -> dict[str, Any]:
    experiment = parse_experiment(document(**({"isolation": "process"} | spec)))
    return build_host_pod(
        experiment="lab1", namespace="lab", uid="u-1", spec=experiment.spec, config=CONFIG,
        index=2, token="t0ken",
    )  # fmt: skip


def test_a_trial_host_has_a_trial_pods_resources_placement_and_security() -> None:
    placement = {"nodeSelector": {"pool": "bench"}}
    pod = host_pod(resources={"cpu": 2, "memory": "1Gi"}, placement=placement, exclusive=True)
    trial = trial_pod(resources={"cpu": 2, "memory": "1Gi"}, placement=placement, exclusive=True)
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    assert pod["metadata"]["name"] == "lab1-host2"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "trial-host"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert container["resources"] == trial["spec"]["containers"][0]["resources"]
    assert container["securityContext"] == trial["spec"]["containers"][0]["securityContext"]
    assert spec["securityContext"] == trial["spec"]["securityContext"]
    assert spec["nodeSelector"] == {"pool": "bench"}
    assert container["command"] == ["python3", "-m", "cxlab_runner.trial_host", "--port", "9101"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 9101}
    # its token, in its environment; the operator reads it back from the Pod it watches
    assert {"name": "CXLAB_HOST_TOKEN", "value": "t0ken"} in container["env"]
    assert view_pod(pod).host_token == "t0ken" and "t0ken" not in repr(view_pod(pod))
    assert view_pod(trial).host_token is None
    # it lives as long as the experiment has trials: no deadline, never restarted
    assert "activeDeadlineSeconds" not in spec and spec["restartPolicy"] == "Never"
    # a host keeps off trial Pods' and other hosts' nodes; trial Pods keep off hosts' nodes
    # through this term too (a required anti-affinity holds both ways)
    [term] = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"] == {
        "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                              "values": ["trial", "trial-host"]}]
    }  # fmt: skip


def test_a_hosted_trial_writes_its_result_in_the_hosts_tmp_and_has_no_probes() -> None:
    experiment = parse_experiment(document(isolation="process"))
    trial = plan_trials(experiment.spec)[0]
    pod = build_trial_pod(
        experiment="lab1", namespace="lab", uid="u-1", spec=experiment.spec, trial=trial,
        attempt=1, config=CONFIG, hosted=True,
    )  # fmt: skip
    container = pod["spec"]["containers"][0]
    path = f"/tmp/{pod['metadata']['name']}.result"
    assert container["terminationMessagePath"] == path
    command = container["command"]
    assert command[command.index("--result-path") + 1] == path
    assert "--final-read" in command  # the operator reads it, as a trial Pod's
    assert "readinessProbe" not in container and "startupProbe" not in container


def test_a_copys_pod_has_the_cpu_its_containers_limits_allow_in_all() -> None:
    def copy_pod(*limits: str | None) -> dict[str, Any]:
        containers = [{"name": f"c{i}", "resources": {"limits": {"cpu": cpu}} if cpu else {}}
                      for i, cpu in enumerate(limits)]  # fmt: skip
        labels = {"app.kubernetes.io/component": "service-copy", "cxlab.dev/service-variant": "1"}
        return {"metadata": {"name": "cx-a-v1-x", "labels": labels},
                "spec": {"containers": containers}}  # fmt: skip

    assert view_pod(copy_pod("500m", "1")).cpu_limit == 1.5
    assert view_pod(copy_pod("500m", None)).cpu_limit is None  # one may take the node's spare
    assert view_pod(copy_pod()).cpu_limit is None
