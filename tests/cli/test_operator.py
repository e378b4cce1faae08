"""`cxlab operator` hands the handlers one start-up object (cxlab.controller.start) in kopf's
memo, and the handlers' start-up builds the operator from it, not from module globals; kopf
running the handlers itself (`kopf run -m cxlab.controller.handlers`) gets one made from the
environment. Offline: kopf.run, the cluster and the Pod watch are stand-ins."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import kopf
import pytest

import cxlab.cli.operator as command
import cxlab.controller.leader as leader
from cxlab.cli import main
from cxlab.cli.settings import ClusterPlaces, Settings
from cxlab.config import OperatorConfig
from cxlab.controller import handlers
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.start import MEMO_KEY, OperatorStart

SETTINGS = Settings(
    config=OperatorConfig(workers=3, host_port=9201),
    cluster=ClusterPlaces(service_host=None, kubeconfig="/nowhere", default=Path("/nowhere")),
    pod_namespace="cxlab-system",
)


def leads(metrics: OperatorMetrics) -> float | None:
    return metrics.registry.get_sample_value("cxlab_operator_leader")


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What kopf.run was called with; kopf's logging and the cluster left alone."""
    called: dict[str, Any] = {}
    monkeypatch.setattr(kopf, "run", lambda **kwargs: called.update(kwargs))
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    monkeypatch.setattr(command, "connect", lambda settings, label: called.update(label=label))
    return called


def test_the_operator_hands_its_start_up_object_to_the_handlers(ran: dict[str, Any]) -> None:
    argv = ["operator", "--namespace", "lab-a", "--namespace", "lab-b", "--metrics-port", "0"]
    assert main(argv, SETTINGS) == 0
    start = ran["memo"][MEMO_KEY]
    assert isinstance(start, OperatorStart)
    assert start.config == dataclasses.replace(SETTINGS.config, operator_metrics_port=0)
    assert start.namespaces == ("lab-a", "lab-b")
    assert start.metrics is not None and leads(start.metrics) == 1.0, "no Lease asked: it leads"
    assert ran["namespaces"] == ["lab-a", "lab-b"] and ran["clusterwide"] is False
    assert ran["label"] == "operator", "the cluster is looked for before anything starts"


class Standby:
    """The standby's health port, not served."""

    def __init__(self, port: int) -> None:
        self.port = port

    def close(self) -> None:
        pass


def test_the_lease_is_in_the_pods_namespace_from_the_settings(
    ran: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    elections: list[Any] = []

    class Election:
        def __init__(self, namespace: str, name: str, *_: Any) -> None:
            self.namespace, self.name, self.released = namespace, name, False
            elections.append(self)

        def acquire(self, stop: Any) -> bool:
            return True

        def keep(self, lost: Any, stop: Any) -> None:
            pass

        def release(self) -> None:
            self.released = True

    monkeypatch.setattr(leader, "LeaderElection", Election)
    monkeypatch.setattr(leader, "StandbyHealth", Standby)
    assert main(["operator", "--leader-elect", "--health-port", "0", "--metrics-port", "0"],
                SETTINGS) == 0  # fmt: skip
    [election] = elections
    assert (election.namespace, election.name) == ("cxlab-system", "cxlab-operator")
    assert election.released, "a clean stop hands the Lease over"
    assert leads(ran["memo"][MEMO_KEY].metrics) == 1.0


class Pods:
    """The Pod watch, as the start-up handler builds it (not started for real)."""

    def __init__(self, *_: Any, **kwargs: Any) -> None:
        self.kwargs, self.done_watches = kwargs, None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def configure(memo: kopf.Memo, monkeypatch: pytest.MonkeyPatch) -> kopf.OperatorSettings:
    """The handlers' start-up, offline; the namespaces it sweeps are recorded in the memo."""
    monkeypatch.setattr(handlers, "load_configuration", lambda: None)
    monkeypatch.setattr(handlers, "PodIndex", Pods)

    async def sweep(kube: Any, namespaces: tuple[str, ...], finalizer: str) -> None:
        memo.swept = namespaces

    monkeypatch.setattr(handlers, "keep_sweeping", sweep)
    settings = kopf.OperatorSettings()

    async def start_up() -> None:
        await handlers.configure(settings=settings, memo=memo)
        await asyncio.sleep(0)  # the sweeper's first step
        handlers.shut_down(memo)

    asyncio.run(start_up())
    return settings


def test_the_handlers_start_from_the_object_in_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    start = OperatorStart(SETTINGS.config, OperatorMetrics(), ("lab-a",))
    memo = kopf.Memo({MEMO_KEY: start})
    settings = configure(memo, monkeypatch)
    assert memo.config is start.config, "the reconcile loops read their intervals from it"
    assert settings.execution.max_workers == 3
    assert memo.reconciler.config is start.config and memo.reconciler.metrics is start.metrics
    assert memo.pods.kwargs["clusterwide"] is False and memo.pods.kwargs["host_port"] == 9201
    assert memo.swept == ("lab-a",)


def test_kopf_run_alone_starts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXLAB_WORKERS", "5")
    monkeypatch.setenv("CXLAB_OPERATOR_METRICS_PORT", "0")
    memo = kopf.Memo()
    settings = configure(memo, monkeypatch)
    assert settings.execution.max_workers == 5 and memo.config.workers == 5
    assert memo.pods.kwargs["clusterwide"] is True and "swept" not in memo
    assert leads(memo.reconciler.metrics) == 1.0
