"""What only a cluster can tell ends the experiment, within a bounded time (pure, no
cluster): a Pod the apiserver refuses, an image the kubelet cannot pull, a container it
cannot create. Each ends as failed trials and a Failed condition naming the field to change;
nothing is lost or done twice across a restart. The same on a real cluster:
tests/cluster/test_cluster_refusals.py."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers import ApiserverBase
from helpers.refusals import document, experiment
from kubernetes.client.exceptions import ApiException

from cxlab.config import OperatorConfig
from cxlab.controller.experiment_pass import Reconciler
from cxlab.controller.kube import PodRefused, refusal
from cxlab.controller.metrics import OperatorMetrics
from cxlab.controller.pass_state import PassReport
from cxlab.experiments.decide import Decision, Observed, Refusal, decide
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import PodView, view_pod
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ExperimentStatus, TrialEntry

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CONFIG = OperatorConfig(max_attempts=3, unschedulable_grace_seconds=15, image_pull_grace_seconds=60)
IMAGE = "cxlab.dev/does-not-exist:dev"
PULL_ERROR = (
    'failed to pull and unpack image "cxlab.dev/does-not-exist:dev": failed to resolve '
    'reference "cxlab.dev/does-not-exist:dev": dial tcp: lookup cxlab.dev: no such host'
)
# The apiserver's answer to a toleration with operator Exists and a value (a Status body).
INVALID = (
    'Pod "bad-t000-a1" is invalid: spec.tolerations[0].operator: Invalid value: "x": '
    "value must be empty when `operator` is 'Exists'"
)


def spec(**change: Any) -> ExperimentSpec:
    return parse_experiment(document(**change)).spec


def pod(trial: str, attempt: int = 1, phase: str = "Pending", age: float = 30,
        **fields: Any) -> PodView:  # fmt: skip
    base = PodView(
        name=f"bad-{trial}-a{attempt}", component="trial", trial=trial, attempt=attempt,
        phase=phase, reason=None, deleting=False, created=NOW - timedelta(seconds=age),
        ip=None, node="node-1", ready=phase == "Running", exit_code=None,
        termination_reason=None, termination_message=None, unschedulable=None,
    )  # fmt: skip
    return replace(base, **fields)


def pulling(trial: str, reason: str = "ErrImagePull", age: float = 30, **fields: Any) -> PodView:
    return pod(trial, age=age, waiting_reason=reason, waiting_message=PULL_ERROR, **fields)


def observe(
    s: ExperimentSpec, pods: list[PodView], recorded: dict[str, Any] | None = None,
    attempts: dict[str, int] | None = None, target_ready: bool = True,
) -> Observed:  # fmt: skip
    entries = {name: TrialEntry.model_validate(e) for name, e in (recorded or {}).items()}
    return Observed(s, plan_trials(s), entries, attempts or {}, pods, NOW,
                    target_ready=target_ready)  # fmt: skip


def documented(decision: Decision) -> Any:
    """The decision with its new entries as status writes them (documents)."""
    return replace(decision, finished=[e.document() for e in decision.finished])


def run(s: ExperimentSpec, pods: list[PodView], recorded: dict[str, Any] | None = None,
        attempts: dict[str, int] | None = None, target_ready: bool = True) -> Any:  # fmt: skip
    return documented(decide(observe(s, pods, recorded, attempts, target_ready), CONFIG))


# --- an image the kubelet cannot pull, a container it cannot create -----------------------


@pytest.mark.parametrize("reason", ["InvalidImageName", "ErrImageNeverPull"])
def test_an_image_that_can_never_start_fails_the_experiment_at_once(reason: str) -> None:
    s = spec(image=IMAGE)
    first = plan_trials(s)[0]
    stuck = pulling(first.name, reason, age=1)  # no grace: no retry can clear it
    decision = run(s, [stuck], attempts={first.name: 1})
    assert decision.failure_reason == "ImagePullFailed"
    assert decision.failure and reason in decision.failure and "spec.image" in decision.failure
    assert IMAGE in decision.failure and "after" not in decision.failure
    assert [e["phase"] for e in decision.finished] == ["Failed"] * 3
    assert all(e["message"] == decision.failure for e in decision.finished)
    assert decision.delete == [stuck.name] and decision.create == [] and decision.running == []


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_an_image_that_cannot_be_pulled_fails_the_experiment_after_the_grace(reason: str) -> None:
    s = spec(image=IMAGE)
    first = plan_trials(s)[0]
    young = pulling(first.name, reason, age=CONFIG.image_pull_grace_seconds - 1)
    waiting = run(s, [young], attempts={first.name: 1})
    assert waiting.failure is None and waiting.finished == [] and waiting.delete == []
    old = pulling(first.name, reason, age=CONFIG.image_pull_grace_seconds)
    decision = run(s, [old], attempts={first.name: 1})
    assert decision.failure_reason == "ImagePullFailed"
    # the kubelet's reason and message, the field and what to change
    assert f"({reason}: {PULL_ERROR})" in decision.failure
    assert f"check spec.image ({IMAGE})" in decision.failure and "after 60 s" in decision.failure
    assert [e["phase"] for e in decision.finished] == ["Failed"] * 3
    assert decision.finished[0]["attempts"] == 1 and decision.delete == [old.name]


def test_the_operators_runner_image_is_named_when_the_spec_has_none() -> None:
    s = spec()
    first = plan_trials(s)[0]
    decision = run(s, [pulling(first.name, "InvalidImageName")], attempts={first.name: 1})
    assert decision.failure and CONFIG.runner_image in decision.failure


@pytest.mark.parametrize("reason", ["CreateContainerConfigError", "CreateContainerError"])
def test_a_container_that_cannot_be_created_fails_after_the_grace(reason: str) -> None:
    s = spec()
    first = plan_trials(s)[0]
    message = "container has runAsNonRoot and image will run as root"
    stuck = pod(first.name, waiting_reason=reason, waiting_message=message, age=10)
    assert run(s, [stuck], attempts={first.name: 1}).failure is None
    decision = run(s, [replace(stuck, created=NOW - timedelta(minutes=5))],
                   attempts={first.name: 1})  # fmt: skip
    assert decision.failure_reason == "ContainerCreateFailed"
    assert f"{reason}: {message}" in decision.failure and "spec.image" in decision.failure


def test_a_container_still_being_created_is_left_alone() -> None:
    s = spec()
    first = plan_trials(s)[0]
    creating = pod(first.name, waiting_reason="ContainerCreating", age=3600)
    decision = run(s, [creating], attempts={first.name: 1})
    assert decision.failure is None and decision.finished == [] and decision.running


def test_an_image_that_ran_on_another_node_fails_only_the_trial_that_cannot_pull() -> None:
    s = spec(parallelism=2)
    first, second, third = plan_trials(s)
    pods = [pod(first.name, phase="Running", ip="10.0.0.1"), pulling(second.name, age=600)]
    decision = run(s, pods, attempts={first.name: 1, second.name: 1})
    assert decision.failure is None
    [entry] = decision.finished
    assert entry["name"] == second.name and "ErrImagePull" in entry["message"]
    assert [t for t, _ in decision.running] == [first]
    assert second.name not in decision.attempts
    assert decision.create == [(third, 1, 0)]


@pytest.mark.parametrize(
    ("fields", "reason", "words"),
    [({"waiting_reason": "ErrImagePull", "waiting_message": PULL_ERROR}, "ImagePullFailed",
      "the delay target: its container did not start after 60 s (ErrImagePull"),
     ({"unschedulable": "0/1 nodes are available: 1 node(s) didn't match Pod's node selector."},
      "Unschedulable", "the delay target cannot be scheduled: 0/1 nodes")],
)  # fmt: skip
def test_a_delay_target_that_cannot_start_fails_the_experiment(
    fields: dict[str, Any], reason: str, words: str
) -> None:
    # No trial starts before the delay target is ready: it must not wait on it for ever.
    s = spec(workload={"type": "http", "tasks": 5, "rtt": "10ms"}, image=IMAGE)
    target = replace(pod("", attempt=0, age=CONFIG.image_pull_grace_seconds, **fields),
                     component="delay-target", trial=None, name="bad-target")  # fmt: skip
    decision = run(s, [target], target_ready=False)
    assert decision.failure_reason == reason and decision.failure
    assert words in decision.failure
    assert [e["phase"] for e in decision.finished] == ["Failed"] * 3
    young = replace(target, created=NOW - timedelta(seconds=1))
    waiting = run(s, [young], target_ready=False)
    assert waiting.failure is None and waiting.waiting_for_target


def test_view_pod_reads_the_waiting_reason_and_message() -> None:
    body = {
        "metadata": {"name": "p", "labels": {"app.kubernetes.io/component": "trial"}},
        "status": {"phase": "Pending", "containerStatuses": [
            {"name": "runner", "state": {"waiting": {"reason": "ImagePullBackOff",
                                                     "message": PULL_ERROR}}}]},
    }  # fmt: skip
    view = view_pod(body)
    assert view.waiting_reason == "ImagePullBackOff" and view.waiting_message == PULL_ERROR


def test_the_pull_grace_is_an_operator_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OperatorConfig.from_environment().image_pull_grace_seconds == 90
    monkeypatch.setenv("CXLAB_IMAGE_PULL_GRACE", "2m")
    assert OperatorConfig.from_environment().image_pull_grace_seconds == 120


# --- a Pod the apiserver refuses ---------------------------------------------------------


def api_error(status: int, reason: str, message: str) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
         "reason": reason, "code": status}
    )  # fmt: skip
    return error


def test_a_refusal_is_the_status_message_not_a_repr() -> None:
    refused = refusal("bad-t000-a1", api_error(422, "Invalid", INVALID))
    assert refused is not None
    assert (refused.pod, refused.code, refused.reason, refused.message) == (
        "bad-t000-a1", 422, "Invalid", INVALID,
    )  # fmt: skip
    bad_request = refusal("p", api_error(400, "BadRequest", "no body"))
    assert bad_request is not None and bad_request.code == 400
    garbled = ApiException(status=422, reason="Unprocessable Entity")
    garbled.body = "<html>"
    plain = refusal("p", garbled)
    assert plain is not None and plain.message == "<html>"


@pytest.mark.parametrize(
    ("status", "reason"),
    [(409, "AlreadyExists"), (403, "Forbidden"), (429, "TooManyRequests"),
     (500, "InternalError"), (503, "ServiceUnavailable")],
)  # fmt: skip
def test_not_now_is_no_refusal(status: int, reason: str) -> None:
    message = 'pods "x" is forbidden: exceeded quota: q, requested: cpu=1, used: cpu=1'
    assert refusal("p", api_error(status, reason, message)) is None


def test_the_operators_own_missing_permission_is_no_refusal() -> None:
    message = (
        'pods is forbidden: User "system:serviceaccount:cxlab:cxlab" cannot create resource '
        '"pods" in API group "" in the namespace "lab"'
    )
    assert refusal("p", api_error(403, "Forbidden", message)) is None


@pytest.mark.parametrize(
    "message",
    [
        'pods "x" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true',
        'admission webhook "policy.example.com" denied the request: images from docker.io only',
        "pods \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request",
    ],
)
def test_a_pod_denied_by_admission_is_refused(message: str) -> None:
    refused = refusal("p", api_error(403, "Forbidden", message))
    assert refused is not None and refused.code == 403 and refused.message == message


def test_a_refused_pod_fails_every_unrecorded_trial() -> None:
    s = spec(parallelism=2, placement={"tolerations": [{"key": "a", "operator": "Exists"}]})
    trials = plan_trials(s)
    done = {"name": trials[0].name, "model": "threads", "workers": 1, "repetition": 1,
            "phase": "Succeeded"}  # fmt: skip
    running = pod(trials[1].name, phase="Running")
    observed = observe(s, [running], {trials[0].name: done}, {trials[1].name: 1})
    decision = decide(observed, CONFIG)
    assert decision.create == [(trials[2], 1, 0)]
    # its act step was refused that Pod, after the delay target: the next pass decides on it
    refusal = Refusal("bad-t002-a1", 422, "Invalid", INVALID, created=("bad-target",))
    refused = documented(decide(replace(observed, refused=refusal), CONFIG))
    assert refused.failure_reason == "PodRejected"
    assert refused.failure == (
        f"the apiserver refused Pod bad-t002-a1 (422 Invalid): {INVALID}; check "
        "spec.placement.tolerations: every Pod of the experiment has it, so none can run"
    )
    assert [e["name"] for e in refused.finished] == [t.name for t in trials[1:]]
    assert all(e["phase"] == "Failed" and e["message"] == refused.failure for e in refused.finished)
    assert refused.create == [] and refused.running == [] and refused.attempts == {}
    assert refused.delete == [running.name, "bad-target"]  # nothing of it runs on


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ('spec.containers[0].image: Invalid value: "a b"', "check spec.image:"),
        ("spec.containers[0].resources.requests: Invalid value", "check spec.resources:"),
        ("spec.nodeSelector: Invalid value: \"a b\"", "check spec.placement.nodeSelector:"),
        ("spec.affinity.nodeAffinity...: Invalid value", "check spec.placement.affinity:"),
        ('metadata.labels: Invalid value: "' + "x" * 64 + '": must be no more than 63',
         "check metadata.name and spec.models (a trial's name is a label value):"),
        ("something else", "check spec.placement, spec.image and spec.resources:"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_experiments_field(message: str, field: str) -> None:
    s = spec()
    observed = replace(observe(s, []), refused=Refusal("p", 422, "Invalid", message))
    refused = decide(observed, CONFIG)
    assert refused.failure and field in refused.failure


# --- the reconciler carries it out, and a restart loses and repeats nothing ----------------


class Apiserver(ApiserverBase):
    """The apiserver as the Reconciler sees it, refusing trial Pods with `error`."""

    def __init__(self, error: ApiException) -> None:
        self.error = error
        self.pods: dict[str, dict[str, Any]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self.deleted: list[str] = []
        self.fail_writes = 0  # the next writes fail (the operator dies before them)

    def write_status(
        self, namespace: str, name: str, document: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        status = copy.deepcopy(ExperimentStatus.read(document).document())  # as a valid status
        if self.fail_writes:
            self.fail_writes -= 1
            raise RuntimeError("the operator died")
        self.statuses.append(copy.deepcopy(status))
        return {"metadata": {"resourceVersion": str(len(self.statuses))}, "status": status}

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        self.refused.append(name)
        refused = refusal(name, self.error)
        if refused is not None:
            raise refused
        raise self.error

    def delete_pod(self, namespace: str, name: str) -> None:
        self.deleted.append(name)


def operator(kube: Apiserver) -> Reconciler:
    """An operator process: its passes share what it remembers (a refused Pod among it)."""
    return Reconciler(kube, CONFIG, OperatorMetrics(), clock=lambda: NOW)  # type: ignore[arg-type]


def reconcile(
    kube: Apiserver, body: dict[str, Any], events: list[tuple[str, str, str]],
    process: Reconciler | None = None,
) -> PassReport:  # fmt: skip
    """One pass of `process` (of a new operator, as after a restart, when None)."""
    done = (process or operator(kube)).reconcile(body, [], lambda *event: events.append(event))
    if kube.statuses:
        body["status"] = kube.statuses[-1]
    return done


def test_the_reconciler_ends_the_experiment_on_a_refused_pod() -> None:
    kube = Apiserver(api_error(422, "Invalid", INVALID))
    body, events = experiment(parallelism=2), []  # type: ignore[var-annotated]
    process = operator(kube)
    done = reconcile(kube, body, events, process)
    [counted] = kube.statuses  # the act step writes nothing: the next pass decides
    first = plan_trials(spec())[0]
    assert counted["phase"] == "Running" and counted["attempts"][first.name] == 1
    assert kube.refused == ["bad-t000-a1"]  # the first refusal stops the creating
    assert done.recheck_seconds == 0  # and that pass comes at once
    reconcile(kube, body, events, process)
    assert kube.refused == ["bad-t000-a1"]  # decided on, not created again
    _, ended = kube.statuses
    status = ended
    assert status["phase"] == "Failed" and status["progress"]["trialsFailed"] == 3
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "PodRejected"
    assert INVALID in failed["message"] and "spec.placement.tolerations" in failed["message"]
    assert "ApiException" not in failed["message"] and "HTTP response" not in failed["message"]
    assert all(e["message"] == failed["message"] for e in status["trials"])
    rejected = [e for e in events if e[1] == "PodRejected"]
    assert rejected == [("Warning", "PodRejected", failed["message"])]
    assert [e[1] for e in events].count("TrialFailed") == 3 and ("Failed" in [e[1] for e in events])
    # The next pass (or a restarted operator) finds it Failed: nothing is created or written.
    reconcile(kube, body, events, process)
    reconcile(kube, body, events)
    assert kube.refused == ["bad-t000-a1"] and len(kube.statuses) == 2


def test_a_crash_before_the_refusal_is_written_is_refused_again_once() -> None:
    kube = Apiserver(api_error(422, "Invalid", INVALID))
    body, events = experiment(), []  # type: ignore[var-annotated]
    kube.fail_writes = 0
    reconciler = Reconciler(kube, CONFIG, OperatorMetrics(), clock=lambda: NOW)  # type: ignore[arg-type]

    def dying_create(manifest: dict[str, Any]) -> bool:
        kube.fail_writes = 1  # the refusal's status write never happens
        return Apiserver.create_pod(kube, manifest)

    kube.create_pod = dying_create  # type: ignore[method-assign]
    reconciler.reconcile(body, [], lambda *event: events.append(event))  # counted, refused
    [counted] = kube.statuses
    with pytest.raises(RuntimeError):  # the next pass dies before it records the refusal
        reconciler.reconcile(body | {"status": counted}, [], lambda *e: events.append(e))
    assert kube.statuses == [counted]
    names = [t.name for t in plan_trials(spec())]
    assert counted["phase"] == "Running" and counted["attempts"] == dict(
        zip(names, [1, 0, 0], strict=True)
    )
    body["status"] = counted
    del kube.create_pod  # a restarted operator, the same apiserver
    restarted = operator(kube)
    reconcile(kube, body, events, restarted)
    reconcile(kube, body, events, restarted)
    assert kube.refused == ["bad-t000-a1", "bad-t000-a2"]  # its Pod was never there: retried
    status = kube.statuses[-1]
    assert status["phase"] == "Failed" and len(status["trials"]) == 3
    assert len({e["name"] for e in status["trials"]}) == 3


@pytest.mark.parametrize(("status", "reason"), [(403, "Forbidden"), (429, "TooManyRequests"),
                                                (500, "InternalError")])  # fmt: skip
def test_not_now_keeps_the_experiment_running(status: int, reason: str) -> None:
    message = 'pods "bad-t000-a1" is forbidden: exceeded quota: q'
    kube = Apiserver(api_error(status, reason, message))
    body, events = experiment(), []  # type: ignore[var-annotated]
    with pytest.raises(ApiException):  # kopf logs it and the timer tries again
        reconcile(kube, body, events)
    [counted] = kube.statuses
    assert counted["phase"] == "Running"
    assert not any(e[1] == "PodRejected" for e in events)


def test_a_refused_delay_target_ends_the_experiment_too() -> None:
    kube = Apiserver(api_error(422, "Invalid", INVALID.replace("bad-t000-a1", "bad-target")))
    body, events = experiment(workload={"type": "http", "tasks": 5, "rtt": "10ms"}), []  # type: ignore[var-annotated]
    process = operator(kube)
    reconcile(kube, body, events, process)
    reconcile(kube, body, events, process)
    assert kube.refused == ["bad-target"]
    status = kube.statuses[-1]
    assert status["phase"] == "Failed"
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["reason"] == "PodRejected" and "Pod bad-target" in failed["message"]


def test_refused_is_an_exception_with_the_apiservers_words() -> None:
    refused = PodRefused("p", 422, "Invalid", INVALID)
    assert str(refused) == f"p: 422 Invalid: {INVALID}"


def test_the_chart_sets_the_pull_grace() -> None:
    from helpers.chart import only, render

    def grace(*sets: str) -> str:
        deployment = only(render(*sets), "Deployment")
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        return str(env["CXLAB_IMAGE_PULL_GRACE"])

    assert grace() == "90s"
    assert grace("settings.imagePullGrace=2m") == "2m"
