"""The act step of an experiment pass (cxlab.controller.actor) touches Pods only, once the
status is written, and calls no other step back: a Pod the apiserver refuses stops the
creating and is remembered (Memory.refused) as a fact for the next pass, which it asks for at
once; that pass decides and records the failure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from helpers import Apiserver

from cxlab.config import OperatorConfig
from cxlab.controller.actor import Actor
from cxlab.controller.admission import Admission
from cxlab.controller.kube import PodRefused
from cxlab.controller.live import LiveReads
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import Pass
from cxlab.controller.recorder import Recorder
from cxlab.experiments.decide import Observed, Refusal, decide
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.status import ExperimentStatus

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
INVALID = 'Pod "act-t001-a1" is invalid: spec.nodeSelector: Invalid value: "a b"'


class RefusesTheSecond(Apiserver):
    def create_pod(self, manifest: dict[str, Any]) -> bool:
        if len(self.pods) == 1:
            self.calls.append(f"refused {manifest['metadata']['name']}")
            raise PodRefused(manifest["metadata"]["name"], 422, "Invalid", INVALID)
        return super().create_pod(manifest)


def test_a_refused_pod_is_remembered_for_the_next_pass_and_nothing_is_written() -> None:
    document = {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "act", "namespace": "lab", "uid": "u-1", "generation": 1},
        "spec": {"workload": {"type": "sleep", "tasks": 2, "rtt": "1ms"}, "parallelism": 3,
                 "models": [{"model": "threads", "workers": [1, 2, 4]}]},
    }  # fmt: skip
    kube = RefusesTheSecond(document)
    spec = parse_experiment(document).spec
    config, metrics = OperatorConfig(), OperatorMetrics()
    observed = Observed(spec, plan_trials(spec), {}, {}, [], NOW)
    state = Pass(kube.body, ExperimentStatus(), spec, False, observed, Memory(), Admission())
    decision = decide(observed, config)
    assert len(decision.create) == 3
    recorded = Recorder(kube, config, metrics, LiveReads(config, metrics)).record(  # type: ignore[arg-type]
        state, decision, []
    )
    events: list[tuple[str, str, str]] = []
    actor = Actor(kube, config, metrics)  # type: ignore[arg-type]
    report = actor.act(state, decision, recorded, lambda *e: events.append(e))
    assert kube.calls == ["write status", "create act-t000-a1", "refused act-t001-a1"]
    assert state.memory.refused == Refusal("act-t001-a1", 422, "Invalid", INVALID,
                                           created=("act-t000-a1",))  # fmt: skip
    assert report.recheck_seconds == 0 and report.later is None  # the next pass, at once
    assert not [e for e in events if e[0] == "Warning"]  # that pass says it: it records it
