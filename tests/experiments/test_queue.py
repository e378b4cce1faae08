"""The queue for capacity and what the nodes can hold (pure): can never fit vs not now,
placement matching, FIFO with priorities and aging, no backfilling, held slots."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from helpers.specs import document

from cxlab.config import OperatorConfig
from cxlab.controller.admission import NodeReader, admit
from cxlab.experiments.decide import Observed
from cxlab.experiments.nodes import (
    Held,
    NodeView,
    Request,
    fits_now,
    matches,
    never_fits,
    quantity,
    view_node,
)
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import view_pod
from cxlab.experiments.pods import build_trial_pod
from cxlab.experiments.queue import (
    AGING_SECONDS,
    Candidate,
    candidate_of,
    order,
    spec_of,
    verdict,
)
from cxlab.experiments.queue import candidate as queue_candidate
from cxlab.experiments.record import Live, build_status
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.status import QueuePlace
from cxlab.table import render_summary

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
GI = Decimal(2**30)


def node(name: str = "n1", cpu: str = "1", memory: str = "8Gi", **spec: Any) -> NodeView:
    labels = spec.pop("labels", {})
    return view_node({
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory}},
    })  # fmt: skip


def request(cpu: int = 1, memory: str = "512Mi", **placement: Any) -> Request:
    spec = parse_experiment(document(resources={"cpu": cpu, "memory": memory},
                                     placement=placement)).spec  # fmt: skip
    return Request.of(spec)


def candidate(
    name: str, minutes_ago: float, *, admitted: bool = False, cpu: int = 1, slots: int = 1,
    priority: int = 0,
) -> Candidate:  # fmt: skip
    created = NOW - timedelta(minutes=minutes_ago)
    return Candidate("lab", name, created, priority, request(cpu), slots, admitted)


def test_quantities_as_nodes_write_them() -> None:
    assert quantity("2") == 2 and quantity("1950m") == Decimal("1.95")
    assert quantity("24386112Ki") == 24386112 * 1024 and quantity("1e3") == 1000
    with pytest.raises(ValueError):
        quantity("lots")


def test_a_request_no_node_can_hold_fails_with_the_numbers() -> None:
    nodes = [node("small", cpu="1"), node("big", cpu="2")]
    why = never_fits(request(cpu=4), nodes)
    assert why and "asks for 4 CPU(s)" in why and "(big) offers 2" in why
    memory = never_fits(request(memory="16Gi"), nodes)
    assert memory and "spec.resources.memory asks for 16.0Gi" in memory and "8.0Gi" in memory
    assert never_fits(request(cpu=2), nodes) is None
    assert never_fits(request(), []) == "the cluster has no nodes"


def test_placement_is_matched_as_the_scheduler_would() -> None:
    gpu = node("gpu", labels={"pool": "gpu", "zone": "a"},
               taints=[{"key": "gpu", "effect": "NoSchedule"}])  # fmt: skip
    plain = node("plain", labels={"pool": "bench"})
    assert not matches(gpu, request()) and matches(plain, request())
    tolerant = request(tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert matches(gpu, tolerant)
    assert not matches(plain, request(nodeSelector={"pool": "gpu"}))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}  # fmt: skip
    assert matches(gpu, request(affinity=affinity, tolerations=[{"operator": "Exists"}]))
    assert not matches(plain, request(affinity=affinity))
    why = never_fits(request(nodeSelector={"pool": "none"}), [gpu, plain])
    assert why and "no node matches spec.placement" in why


def test_a_cordoned_node_can_make_one_wait_never_fail() -> None:
    cordoned = node("c", unschedulable=True)
    assert never_fits(request(), [cordoned]) is None
    assert not fits_now(request(), [cordoned], [])


def test_held_slots_take_their_room() -> None:
    nodes = [node("a", cpu="1"), node("b", cpu="1")]
    one = request()
    assert fits_now(one, nodes, [Held(one, "a")])
    assert not fits_now(one, nodes, [Held(one, "a"), Held(one)])  # the unbound one takes b
    assert fits_now(one, nodes, [Held(request(cpu=2))])  # fits nowhere: waits, holds nothing


def _reference_fits(request: Request, nodes: list[NodeView], held: list[Held], pods: int) -> bool:
    """The placement rule as written down, slowly: bound slots on their node, then each
    unbound one on the first of the matching nodes sorted by free CPU (most first) that holds
    it; then the Pods of one more trial the same way."""
    free = {n.name: [n.cpu, n.memory] for n in nodes if not n.cordoned}
    by_name = {n.name: n for n in nodes}

    def take(want: Request, names: list[str]) -> bool:
        for name in names:
            if free[name][0] >= want.cpu and free[name][1] >= want.memory:
                free[name][0] -= want.cpu
                free[name][1] -= want.memory
                return True
        return False

    def roomiest(want: Request) -> list[str]:
        names = [n for n in free if matches(by_name[n], want)]
        return sorted(names, key=lambda n: free[n][0], reverse=True)

    for slot in [h for h in held if h.node is not None] + [h for h in held if h.node is None]:
        take(slot.request, [slot.node] if slot.node in free else roomiest(slot.request))
    return all(take(request, roomiest(request)) for _ in range(pods))


def test_incremental_placement_agrees_with_the_rule_written_slowly() -> None:
    import random

    rng = random.Random(31)
    taint = {"key": "pool", "value": "slow", "effect": "NoSchedule"}
    toleration = {"key": "pool", "operator": "Equal", "value": "slow", "effect": "NoSchedule"}
    for _ in range(400):
        nodes = [
            NodeView(f"n{i}", Decimal(rng.choice([1, 2, 4])), Decimal(rng.choice([1, 2, 8])) * GI,
                     labels={"pool": rng.choice("ab")}, cordoned=rng.random() < 0.1,
                     taints=(taint,) if rng.random() < 0.3 else ())
            for i in range(rng.randint(0, 6))
        ]  # fmt: skip
        # requests placed alike (equal, not the same objects) share their matching nodes
        requests = [
            Request(Decimal(rng.choice(["0.5", "1", "2"])), Decimal(rng.choice([1, 2])) * GI,
                    {"pool": rng.choice("ab")} if rng.random() < 0.5 else {},
                    (toleration,) if rng.random() < 0.5 else (), {})
            for _ in range(3)
        ]  # fmt: skip
        held = [
            Held(rng.choice(requests), rng.choice([None, None, *(n.name for n in nodes), "gone"]))
            for _ in range(rng.randint(0, 12))
        ]
        want, pods = rng.choice(requests), rng.randint(1, 3)
        assert fits_now(want, nodes, held, pods) == _reference_fits(want, nodes, held, pods)


def test_first_come_first_served() -> None:
    nodes = [node(cpu="1")]
    a, b, c = candidate("a", 3), candidate("b", 2), candidate("c", 1)
    first = verdict(a, [a, b, c], nodes, NOW)
    assert first.admit
    second = verdict(b, [a, b, c], nodes, NOW)  # a is admitted in its own pass: b waits
    assert not second.admit and second.position == 2 and "in use by lab/a" in second.message
    running = replace(a, admitted=True)
    third = verdict(c, [running, b, c], nodes, NOW)
    assert not third.admit and third.position == 2 and third.behind == "lab/b"
    alone = verdict(b, [running, b], nodes, NOW)
    assert alone.behind is None and "in use by lab/a" in alone.message
    assert verdict(b, [b, c], nodes, NOW).admit  # a finished


def test_no_small_experiment_overtakes_a_big_one_waiting() -> None:
    nodes = [node(cpu="2")]
    running = candidate("running", 10, admitted=True)  # holds one of the two CPUs
    big, small = candidate("big", 5, cpu=2), candidate("small", 1)
    waits = verdict(small, [running, big, small], nodes, NOW)
    assert not waits.admit and waits.behind == "lab/big"  # one CPU free, but big is first
    assert verdict(big, [big, small], nodes, NOW).admit


def test_priority_goes_first_and_waiting_raises_it() -> None:
    old, urgent = candidate("old", 4), candidate("urgent", 1, priority=1)
    assert [c.name for c in order([old, urgent], NOW)] == ["urgent", "old"]
    # every five minutes of waiting is one step of priority
    assert AGING_SECONDS == 300
    even = candidate("even", 6)  # one step: equal priority, and the older goes first
    assert [c.name for c in order([urgent, even], NOW)] == ["even", "urgent"]
    stale = candidate("stale", 11)  # two steps: past the urgent one
    assert [c.name for c in order([urgent, stale], NOW)] == ["stale", "urgent"]


def test_an_admitted_experiment_holds_its_parallelism_between_trials() -> None:
    nodes = [node(cpu="2")]
    wide = candidate("wide", 5, admitted=True, slots=2)  # between two of its trials
    assert not verdict(candidate("next", 1), [wide, candidate("next", 1)], nodes, NOW).admit
    narrow = replace(wide, slots=1)
    assert verdict(candidate("next", 1), [narrow, candidate("next", 1)], nodes, NOW).admit


def test_the_queue_reads_an_experiment_from_the_resource() -> None:
    body = document(parallelism=3, priority=5, repetitions=2)  # 4 trials
    body["metadata"] |= {"namespace": "lab", "creationTimestamp": "2026-11-23T11:00:00Z"}
    found = candidate_of(body, NOW)
    assert found is not None
    assert (found.key, found.priority, found.slots, found.admitted) == ("lab/demo", 5, 3, False)
    assert found.created == datetime(2026, 11, 23, 11, 0, tzinfo=UTC)
    body["status"] = {"phase": "Running", "trials": [{"name": "t"}] * 2}
    running = candidate_of(body, NOW)
    assert running is not None and running.admitted and running.slots == 2  # 2 of 4 left
    body["status"] = {"phase": "Succeeded"}
    assert candidate_of(body, NOW) is None


def test_the_queue_reads_the_spec_a_run_started_with_not_an_edit() -> None:
    body = document(parallelism=3, repetitions=2)  # 4 trials
    body["metadata"] |= {"namespace": "lab", "creationTimestamp": "2026-11-23T11:00:00Z"}
    body["status"] = {"phase": "Running", "startedSpec": json.dumps(body["spec"])}
    body["spec"] = body["spec"] | {"parallelism": 1, "priority": 9}  # edited since
    found = candidate_of(body, NOW)
    assert found is not None
    assert found == queue_candidate(body, spec_of(body), NOW)  # the uncached reading
    assert (found.priority, found.slots) == (0, 3)
    body["status"]["startedSpec"] = None  # not started: the spec as it is now
    assert candidate_of(body, NOW) == queue_candidate(body, spec_of(body), NOW)
    assert candidate_of(body, NOW).slots == 1  # type: ignore[union-attr]


def test_a_waiting_experiment_has_a_place_and_no_start_then_records_its_wait() -> None:
    experiment = parse_experiment(document())
    trials = plan_trials(experiment.spec)
    common = {"spec": experiment.spec, "trials": trials, "entries": [], "started_spec": "{}",
              "generation": 1}  # fmt: skip
    place = QueuePlace(position=2, length=3, behind="lab/big", since=NOW,
                          message="waiting behind lab/big (position 2 of 3)")  # fmt: skip
    typed = build_status(**common, live=Live(queue=place), old=None, now=NOW)
    waiting = typed.document()
    assert waiting["phase"] == "Pending" and "startTime" not in waiting
    assert waiting["progress"]["display"] == "queued 2/3" and waiting["queue"]["position"] == 2
    queued = {c["type"]: c for c in waiting["conditions"]}["Queued"]
    assert (queued["status"], queued["reason"]) == ("True", "WaitingBehind")
    text = render_summary({"metadata": {"name": "demo"}, "status": waiting})
    assert "queued: waiting behind lab/big" in text.splitlines()[0]
    later = NOW + timedelta(seconds=42)
    typed = build_status(**common, live=Live(starting=True, queued_seconds=42.04),
                         old=typed, now=later)  # fmt: skip
    started = typed.document()
    assert started["phase"] == "Running" and "queue" not in started
    assert started["startTime"] and started["queuedSeconds"] == 42.0
    admitted = {c["type"]: c for c in started["conditions"]}["Queued"]
    assert (admitted["status"], admitted["reason"]) == ("False", "Admitted")
    assert admitted["message"] == "waited 42.0 s; it was waiting behind lab/big (position 2 of 3)"
    again = build_status(**common, live=Live(starting=True), old=typed, now=later).document()
    assert again["queuedSeconds"] == 42.0  # kept, not measured again
    assert (
        "waited 42.0 s in the queue"
        in render_summary({"metadata": {"name": "demo"}, "status": again}).splitlines()[0]
    )


@pytest.mark.parametrize(("held", "waited"), [(False, 0.0), (True, 3.0)])
def test_a_wait_is_counted_only_when_the_queue_held_it(held: bool, waited: float) -> None:
    # created 3 s before the pass (the watch, an operator starting): admitted on its first
    # pass it waited for nothing; kept waiting by an earlier pass, for all of it
    body = document() | {"metadata": {"name": "e", "namespace": "lab",
                                      "creationTimestamp": "2026-11-23T11:59:57Z"}}  # fmt: skip
    spec = parse_experiment(body).spec
    observed = Observed(spec, plan_trials(spec), {}, {}, [], NOW)
    nodes = [{"metadata": {"name": "n1"}, "spec": {},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}]  # fmt: skip
    admission = admit(body, observed, None, [], NodeReader(lambda: nodes), held)
    assert admission.ruling is None and admission.waited == waited


def test_an_experiment_being_deleted_leaves_the_queue() -> None:
    body = document()
    body["metadata"] |= {"namespace": "lab", "deletionTimestamp": "2026-11-23T11:00:00Z"}
    assert candidate_of(body, NOW) is None


def test_with_a_queue_name_kueue_holds_the_queue() -> None:
    spec = parse_experiment(document(queueName="experiments")).spec
    trial = plan_trials(spec)[0]
    pod = build_trial_pod(experiment="demo", namespace="lab", uid="u", spec=spec, trial=trial,
                          attempt=1, config=OperatorConfig())  # fmt: skip
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "experiments"
    plain = parse_experiment(document()).spec
    assert "kueue.x-k8s.io/queue-name" not in build_trial_pod(
        experiment="demo", namespace="lab", uid="u", spec=plain, trial=trial, attempt=1,
        config=OperatorConfig(),
    )["metadata"]["labels"]  # fmt: skip
    gated = view_pod({**pod, "spec": {**pod["spec"], "schedulingGates": [
        {"name": "kueue.x-k8s.io/admission"}]}})  # fmt: skip
    assert gated.gated and not view_pod(pod).gated
    body = document(queueName="experiments")
    body["metadata"]["namespace"] = "lab"
    assert candidate_of(body, NOW) is None  # not in cxlab's own queue: Kueue's
    place = QueuePlace(since=NOW, message="waiting for admission by Kueue (LocalQueue x)")
    waiting = build_status(spec=spec, trials=plan_trials(spec), entries=[], started_spec="{}",
                           generation=1, live=Live(queue=place, starting=True), old=None,
                           now=NOW).document()  # fmt: skip
    assert waiting["phase"] == "Pending" and waiting["progress"]["display"] == "queued (Kueue)"
    reason = {c["type"]: c for c in waiting["conditions"]}["Queued"]["reason"]
    assert reason == "WaitingForKueue"


def test_a_trial_of_several_pods_waits_until_all_of_them_fit() -> None:
    from decimal import Decimal

    from cxlab.experiments.nodes import Held, NodeView, Request, fits_now

    node = NodeView("n", Decimal("1"), Decimal(2**34), {}, (), False)
    pod = Request(Decimal("0.3"), Decimal(2**27), {}, (), {})
    assert fits_now(pod, [node], [], pods=3)  # 0.9 of 1 CPU
    assert not fits_now(pod, [node], [], pods=4)
    assert not fits_now(pod, [node], [Held(pod)], pods=3)  # one held already
