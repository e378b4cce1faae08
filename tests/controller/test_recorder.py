"""The record step of an experiment pass (cxlab.controller.recorder) only persists what decide
decided: the status after the decision, with the trials decide planned (Decision.planned),
never planned again nor read back from the ConfigMaps; the Results, and the summary, stored
before the status that points at them, against the version the pass read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from helpers import Apiserver, run_runner

from cxlab.analysis.outcome import TrialOutcome
from cxlab.config import OperatorConfig
from cxlab.controller.admission import Admission
from cxlab.controller.kube import StaleStatus
from cxlab.controller.live import LiveReads
from cxlab.controller.memory import Memory
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import Pass
from cxlab.controller.recorder import Recorder
from cxlab.experiments.decide import Decision, Observed
from cxlab.experiments.followups import Planned
from cxlab.experiments.plan import calibration_trials, plan_trials
from cxlab.experiments.record import trial_entry
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.status import ExperimentStatus, ServiceCopyRequest

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def body() -> dict[str, Any]:
    return {
        "apiVersion": "cxlab.dev/v1alpha1", "kind": "ConcurrencyExperiment",
        "metadata": {"name": "rec", "namespace": "lab", "uid": "u-1", "generation": 1,
                     "resourceVersion": "7"},
        "spec": {"workload": {"type": "sleep", "tasks": 2, "rtt": "1ms"},
                 "models": [{"model": "threads", "workers": [1, 2]}]},
    }  # fmt: skip


class NoReads(Apiserver):
    """Record reads nothing back: a list of the ConfigMaps fails the test."""

    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        raise AssertionError("the record step read the ConfigMaps back")


@pytest.fixture(scope="module")
def result() -> Any:
    return run_runner("threads", "--workload", "sleep", "--tasks", "2", "--rtt", "1ms")


def record(kube: Apiserver, follows: bool, result: Any) -> tuple[Pass, ExperimentStatus]:
    """Both trials of the sweep ended in this pass; decide planned a calibration trial after
    them when `follows` (this spec asks for none: planning again would drop it)."""
    document = kube.get_experiment("lab", "rec")
    spec = parse_experiment(document).spec
    sweep = plan_trials(spec)
    observed = Observed(spec, sweep, {}, dict.fromkeys([t.name for t in sweep], 1), [], NOW)
    decision = Decision(finished=[trial_entry(TrialOutcome(t, result)) for t in sweep])
    trials = [*sweep, calibration_trials(len(sweep))[0]] if follows else sweep
    decision.planned = Planned(trials, list(decision.finished), followed=True)
    state = Pass(document, ExperimentStatus(), spec, False, observed, Memory(), Admission())
    config, metrics = OperatorConfig(), OperatorMetrics()
    recorder = Recorder(kube, config, metrics, LiveReads(config, metrics))  # type: ignore[arg-type]
    return state, recorder.record(state, decision, [])


def test_the_record_step_writes_the_trials_decide_planned_and_reads_nothing_back(
    result: Any,
) -> None:
    kube = NoReads(body())
    state, new = record(kube, True, result)
    status = kube.body["status"]
    assert status["progress"]["trialsTotal"] == 3 and status["progress"]["trialsDone"] == 2
    assert status["phase"] == "Running" and new.phase == "Running"  # the calibration is left
    # the Results to their ConfigMap before the status that points at them; one write
    assert kube.calls == ["add to rec-results-0", "write status"]
    assert all(t["resultsIn"] == "rec-results-0" for t in status["trials"])
    assert state.written is not None and state.written["metadata"]["resourceVersion"] == "8"


def test_the_summary_goes_beside_the_results_before_the_status_that_points_at_them(
    result: Any,
) -> None:
    kube = NoReads(body())
    record(kube, False, result)
    status = kube.body["status"]
    assert status["phase"] == "Succeeded" and status["summary"]["summaryIn"] == "rec-summary"
    assert kube.calls == ["add to rec-results-0", "add to rec-summary", "write status"]


def test_the_status_is_written_only_against_the_version_the_pass_read(result: Any) -> None:
    kube = NoReads(body())
    kube.body["metadata"]["resourceVersion"] = "8"  # written since the pass read version 7
    document = body()
    kube.get_experiment = lambda namespace, name, full=False: document  # type: ignore[method-assign]
    with pytest.raises(StaleStatus):
        record(kube, True, result)
    assert "status" not in kube.body


def test_the_copys_request_read_before_admission_is_written_and_kept(result: Any) -> None:
    kube = NoReads(body())
    document = kube.get_experiment("lab", "rec")
    spec = parse_experiment(document).spec
    observed = Observed(spec, plan_trials(spec), {}, {}, [], NOW)
    config, metrics = OperatorConfig(), OperatorMetrics()
    recorder = Recorder(kube, config, metrics, LiveReads(config, metrics))  # type: ignore[arg-type]
    copy = ServiceCopyRequest(replicas=2, cpu=0.5, memory_bytes=2**26)
    state = Pass(document, ExperimentStatus(), spec, False, observed, Memory(), Admission())
    state.service_copy = copy
    decision = Decision(planned=Planned(plan_trials(spec), [], followed=True))
    first = recorder.record(state, decision, [])
    assert kube.body["status"]["serviceCopy"] == {"replicas": 2, "cpu": 0.5, "memoryBytes": 2**26}
    # an admitted pass reads no Deployment: the request stays, for the queue to hold
    later = Pass(kube.get_experiment("lab", "rec"), first, spec, False, observed, Memory(),
                 Admission())  # fmt: skip
    assert recorder.record(later, decision, []).service_copy == copy
