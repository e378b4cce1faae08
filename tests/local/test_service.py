"""A variant's command line and environment, and what cxlab run refuses of spec.service."""

from __future__ import annotations

from typing import Any

import pytest

from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.spec.service import ServiceSubject
from cxlab.local.cores import NotEnoughCores, service_cores
from cxlab.local.service import (
    ServiceRefused,
    check_local_service,
    exit_text,
    service_argv,
    service_environment,
)

COMMAND = ["gunicorn", "--bind", "127.0.0.1:8000", "httpbin:app"]


def _subject(**variants: Any) -> ServiceSubject:
    return ServiceSubject.model_validate({"command": COMMAND, "variants": variants or None})


def _spec(**service: Any) -> ExperimentSpec:
    return ExperimentSpec.model_validate({
        "service": {"command": COMMAND, **service},
        "workload": {"type": "http", "tasks": 10, "target": {"url": "http://127.0.0.1:8000/"}},
        "models": [{"model": "asyncio", "workers": [4]}],
    })  # fmt: skip


def test_a_named_variants_args_are_appended_to_the_command() -> None:
    subject = _subject(named=[{"name": "sync-2", "args": ["--workers", "2"]}, {"name": "plain"}])
    first, second = subject.variant_list()
    assert service_argv(subject, first) == [*COMMAND, "--workers", "2"]
    assert service_argv(subject, second) == COMMAND


def test_a_named_variants_command_replaces_service_command() -> None:
    subject = _subject(named=[{"name": "uv", "command": ["uvicorn", "app:app"], "args": ["-w"]}])
    assert service_argv(subject, subject.variant_list()[0]) == ["uvicorn", "app:app", "-w"]


def test_the_environment_is_cxlab_runs_then_the_named_variants_then_the_axes() -> None:
    subject = _subject(
        named=[{"name": "a", "env": [{"name": "MODE", "value": "fast"},
                                     {"name": "W", "value": "1"}]}],
        env=[{"name": "W", "values": ["2", "4"]}],
    )  # fmt: skip
    environ = {"PATH": "/bin", "MODE": "slow", "KEEP": "yes"}
    envs = [service_environment(environ, v) for v in subject.variant_list()]
    assert envs == [
        {"PATH": "/bin", "MODE": "fast", "KEEP": "yes", "W": "2"},
        {"PATH": "/bin", "MODE": "fast", "KEEP": "yes", "W": "4"},
    ]
    assert environ == {"PATH": "/bin", "MODE": "slow", "KEEP": "yes"}  # not changed


@pytest.mark.parametrize(
    ("service", "field"),
    [
        ({"variants": {"replicas": [1, 2]}}, "service.variants.replicas"),
        ({"variants": {"resources": [{"cpu": 1}]}}, "service.variants.resources"),
        ({"variants": {"named": [{"name": "a"}, {"name": "b", "image": "app:2"}]}},
         "service.variants.named[1].image"),
    ],
)  # fmt: skip
def test_what_a_process_cannot_have_is_refused_naming_the_field(
    service: dict[str, Any], field: str
) -> None:
    with pytest.raises(ServiceRefused) as refused:
        check_local_service(_spec(**service))
    assert str(refused.value).startswith(f"{field}: ")


def test_a_deployment_alone_is_for_a_cluster() -> None:
    spec = ExperimentSpec.model_validate({
        "service": {"deployment": "api"},
        "workload": {"type": "http", "tasks": 10,
                     "target": {"service": {"name": "api", "port": 80}}},
        "models": [{"model": "asyncio", "workers": [4]}],
    })  # fmt: skip
    with pytest.raises(ServiceRefused, match=r"^service.deployment: cxlab run has no Deployment"):
        check_local_service(spec)


def test_one_replica_and_no_variants_are_fine() -> None:
    check_local_service(_spec(variants={"replicas": [1]}))
    check_local_service(_spec())


def test_the_service_gets_the_cores_the_trials_leave() -> None:
    assert service_cores({1}, [0, 1]) == {0}
    assert service_cores({2, 3}, [0, 1, 2, 3]) == {0, 1}
    with pytest.raises(NotEnoughCores, match=r"^resources.cpu: .*spec.service needs cores"):
        service_cores({0, 1}, [0, 1])


def test_an_exit_reads_as_a_status_or_a_signal() -> None:
    assert exit_text(3) == "exit status 3"
    assert exit_text(-9) == "killed by SIGKILL"
