"""workload.target as the operator and cxlab run read it: the runner flags (never a secret),
the trial Pod (Secret-backed variables, the CA volume, labels), what cxlab run refuses, and a
trial that failed too often."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.rule_cases import manifest

from cxlab.analysis.outcome import classify, too_many_failures
from cxlab.config import OperatorConfig
from cxlab.experiments.plan import plan_trials, runner_command
from cxlab.experiments.pods import LABEL_TARGET_NAMESPACE, LABEL_TARGET_SERVICE, build_trial_pod
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab.local.target import TargetRefused, is_loopback, local_target

SECRET = {"secretKeyRef": {"name": "api-token", "key": "token"}}


def spec_with(target: dict[str, Any], **workload: Any) -> ExperimentSpec:
    document = manifest(workload={"type": "http", "tasks": 10, "target": target, **workload})
    return parse_experiment(document).spec


def test_a_service_is_called_by_its_dns_name_in_the_experiments_namespace() -> None:
    spec = spec_with({"service": {"name": "api", "port": 8080, "path": "/v1/items?x=1"}})
    assert spec.workload.target is not None
    assert spec.workload.target.resolved_url("team-a") == "http://api.team-a.svc:8080/v1/items?x=1"
    other = spec_with({"service": {"name": "api", "namespace": "shared", "port": 443,
                                   "scheme": "https"}})  # fmt: skip
    assert other.workload.target is not None
    assert other.workload.target.resolved_url("team-a") == "https://api.shared.svc:443/"
    assert not spec.workload.delay_target


def test_the_runner_flags_name_a_secrets_variable_never_its_value_or_secret() -> None:
    spec = spec_with(
        {
            "service": {"name": "api", "port": 80},
            "method": "POST",
            "body": '{"q": 1}',
            "headers": [
                {"name": "Authorization", "valueFrom": SECRET},
                {"name": "Accept", "value": "application/json"},
            ],
            "expectedStatuses": [200, "300-304"],
            "timeout": "2s",
        }
    )
    trial = plan_trials(spec)[0]
    argv = runner_command(spec, trial, experiment="e", target_url="http://api.ns.svc:80/")
    assert "--rtt" not in argv
    joined = " ".join(argv)
    assert "api-token" not in joined  # not even the Secret's name
    pairs = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag.startswith("--")}
    assert pairs["--target-mode"] == "direct"
    assert pairs["--header-env"] == "Authorization=CXLAB_HEADER_0"
    assert pairs["--header"] == "Accept: application/json"
    assert pairs["--method"] == "POST"
    assert pairs["--body"] == '{"q": 1}'
    assert pairs["--ok-status"] == "200,300-304"
    assert pairs["--request-timeout"] == "2s"


def test_the_trial_pod_gets_the_secret_through_the_kubelet_and_the_ca_as_a_file() -> None:
    spec = spec_with(
        {
            "service": {"name": "api", "port": 443, "scheme": "https"},
            "headers": [{"name": "X-Key", "valueFrom": SECRET}, {"name": "X-A", "value": "1"}],
            "tls": {"ca": {"configMapKeyRef": {"name": "api-ca", "key": "bundle.pem"}}},
        }
    )
    pod = build_trial_pod(
        experiment="e", namespace="team-a", uid="u", spec=spec, trial=plan_trials(spec)[0],
        attempt=1, config=OperatorConfig(), target_url="https://api.team-a.svc:443/",
    )  # fmt: skip
    runner = pod["spec"]["containers"][0]
    assert runner["env"] == [
        {"name": "CXLAB_HEADER_0", "valueFrom": {"secretKeyRef": SECRET["secretKeyRef"]}}
    ]
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "target-ca")
    assert volume["configMap"] == {
        "name": "api-ca", "items": [{"key": "bundle.pem", "path": "ca.crt"}]
    }  # fmt: skip
    mount = next(m for m in runner["volumeMounts"] if m["name"] == "target-ca")
    argv = runner["command"]
    assert argv[argv.index("--tls-ca") + 1] == f"{mount['mountPath']}/ca.crt"
    assert mount["readOnly"] is True
    labels = pod["metadata"]["labels"]
    assert labels[LABEL_TARGET_SERVICE] == "api"
    assert labels[LABEL_TARGET_NAMESPACE] == "team-a"


def test_a_ca_from_a_secret_is_a_secret_volume() -> None:
    spec = spec_with(
        {
            "url": "https://api.example/",
            "tls": {"ca": {"secretKeyRef": {"name": "api-ca", "key": "ca.pem"}}},
        }
    )
    pod = build_trial_pod(
        experiment="e", namespace="ns", uid="u", spec=spec, trial=plan_trials(spec)[0],
        attempt=1, config=OperatorConfig(), target_url="https://api.example/",
    )  # fmt: skip
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "target-ca")
    assert volume["secret"] == {
        "secretName": "api-ca",
        "items": [{"key": "ca.pem", "path": "ca.crt"}],
    }
    assert LABEL_TARGET_SERVICE not in pod["metadata"]["labels"]


def test_plans_show_a_secret_header_as_where_it_comes_from() -> None:
    spec = spec_with(
        {
            "url": "http://127.0.0.1:8080/",
            "headers": [
                {"name": "Authorization", "valueFrom": {"env": "API_TOKEN"}},
                {"name": "X-Key", "valueFrom": SECRET},
            ],
        }
    )
    assert spec.workload.target is not None
    lines = spec.workload.target.describe()
    assert "  Authorization: <from env API_TOKEN>" in lines
    assert "  X-Key: <from secret api-token/token>" in lines


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.3.2.1", True), ("localhost", True), ("::1", True),
     ("10.0.0.1", False), ("example.com", False), ("0.0.0.0", False), ("::", False)],
)  # fmt: skip
def test_loopback_is_an_address_of_this_machine_by_itself(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _target(**fields: Any) -> Any:
    spec = spec_with({"url": "http://127.0.0.1:8080/", **fields})
    return spec.workload.target


def test_cxlab_run_refuses_a_remote_url_unless_allowed() -> None:
    remote = _target(url="http://api.example:8080/")
    with pytest.raises(
        TargetRefused,
        match=r"workload.target.url: api.example is not a loopback.*--allow-remote-target",
    ):
        local_target(remote, {})
    assert local_target(remote, {}, allow_remote=True).url == "http://api.example:8080/"
    assert local_target(_target(url="http://[::1]:9/"), {}).url == "http://[::1]:9/"


def test_cxlab_run_reads_a_header_secret_from_its_environment_only() -> None:
    secret = {"name": "Authorization", "valueFrom": {"env": "API_TOKEN"}}
    target = _target(headers=[{"name": "X-A", "value": "1"}, secret])
    found = local_target(target, {"API_TOKEN": "s3cret"})
    assert found.env == {"CXLAB_HEADER_1": "s3cret"}
    assert "s3cret" not in repr(found)
    with pytest.raises(TargetRefused, match=r"headers\[1\].valueFrom.env: .*API_TOKEN is not set"):
        local_target(target, {})
    with pytest.raises(TargetRefused, match=r"headers\[1\].valueFrom.env"):
        local_target(target, {"API_TOKEN": ""})


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"service": {"name": "api", "port": 80}}, "workload.target.service"),
        ({"url": "http://127.0.0.1/", "headers": [{"name": "A", "valueFrom": SECRET}]},
         r"workload.target.headers\[0\].valueFrom.secretKeyRef"),
        ({"url": "https://127.0.0.1/",
          "tls": {"ca": {"configMapKeyRef": {"name": "c", "key": "k"}}}}, "workload.target.tls.ca"),
    ],
)  # fmt: skip
def test_cxlab_run_refuses_what_needs_a_cluster(target: dict[str, Any], field: str) -> None:
    with pytest.raises(TargetRefused, match=rf"^{field}: "):
        local_target(spec_with(target).workload.target, {})  # type: ignore[arg-type]


def _result(ok: int, failed: int, **kinds: int) -> Any:
    return {
        "tasksOk": ok, "tasksFailed": failed, "cpus": [0],
        "failureKinds": {"connect": 0, "timeout": 0, "tls": 0, "status": 0, "other": 0, **kinds},
        "errors": [{"message": "dial tcp 10.0.0.9:80: connect: connection refused",
                    "count": failed}] if failed else [],
    }  # fmt: skip


def test_a_trial_failing_more_than_its_bound_names_the_kinds_and_the_bound() -> None:
    why = too_many_failures(_result(4, 6, connect=5, timeout=1), 0.5)
    assert why is not None
    assert why.startswith("6 of 10 requests failed (60%: connect 5, timeout 1)")
    assert "connection refused" in why and "maxFailureRatio 0.5" in why
    assert too_many_failures(_result(5, 5, status=5), 0.5) is None  # at the bound: kept
    assert too_many_failures(_result(0, 10, status=10), None) is None  # the delay target's


def test_classify_fails_the_trial_but_keeps_its_result() -> None:
    spec = spec_with({"url": "http://127.0.0.1:8080/", "maxFailureRatio": 0.1})
    trial = plan_trials(spec)[0]
    outcome = classify(trial, [_result(8, 2, status=2)], 1, max_failure_ratio=0.1)
    assert not outcome.succeeded and outcome.result is not None
    assert outcome.error is not None and "status 2" in outcome.error
    assert classify(trial, [_result(8, 2, status=2)], 1, max_failure_ratio=0.2).succeeded
