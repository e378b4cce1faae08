"""The queue counts a service's copy with its trials (cxlab.experiments.queue): an experiment
whose copy and trial Pods do not fit together waits instead of leaving its copy
Unschedulable, and an admitted one holds its copy's room until it finishes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from helpers.specs import document

from cxlab.controller.admission import NodeReader, admit
from cxlab.experiments.decide import Observed
from cxlab.experiments.nodes import NodeView, Request
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.queue import Candidate, candidate_of, verdict, with_copy
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec.examples import served
from cxlab.experiments.status import ServiceCopyRequest

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
MI = 2**20
FOUR = [NodeView("n1", Decimal(4), Decimal(16 * 2**30))]


def trial(cpu: str) -> Request:
    return Request(Decimal(cpu), Decimal(256 * MI), {}, (), {})


def worker(name: str) -> Candidate:
    """An admitted experiment whose one trial holds a whole CPU."""
    return Candidate("lab", name, NOW - timedelta(minutes=9), 0, trial("1"), 1, True)


def copy_of(cpu: float, replicas: int = 1, **placement: Any) -> ServiceCopyRequest:
    return ServiceCopyRequest(replicas=replicas, cpu=cpu, memory_bytes=64 * MI, **placement)


def subject(copy: ServiceCopyRequest | None, minutes_ago: float = 1) -> Candidate:
    created = NOW - timedelta(minutes=minutes_ago)
    plain = Candidate("lab", "capacity", created, 0, trial("0.25"), 1, False)
    return with_copy(plain, copy)


def test_a_copy_that_does_not_fit_beside_the_trials_waits_for_room() -> None:
    # three workers' trials hold 3 of the 4 CPUs: the trial fits, the copy beside it not
    workers = [worker(n) for n in ("w1", "w2", "w3")]
    alone = subject(None)
    assert verdict(alone, [*workers, alone], FOUR, NOW).admit  # without its copy it would
    waits = subject(copy_of(1.0))
    seen = verdict(waits, [*workers, waits], FOUR, NOW)
    assert not seen.admit and "waiting for capacity" in seen.message
    assert verdict(waits, [*workers[:2], waits], FOUR, NOW).admit  # one worker done
    two = subject(copy_of(0.5, replicas=2))  # replicas x the Pod's request
    assert not verdict(two, [*workers, two], FOUR, NOW).admit
    small = subject(copy_of(0.25, replicas=3))
    assert verdict(small, [*workers, small], FOUR, NOW).admit  # 0.25 + 3 x 0.25


def test_an_admitted_experiment_holds_its_copy_until_it_finishes() -> None:
    body = document(**served(), resources={"cpu": 1})
    body["metadata"] |= {"namespace": "lab", "creationTimestamp": "2026-11-23T11:50:00Z"}
    body["status"] = {
        "phase": "Running",
        "serviceCopy": copy_of(2.0).document(),  # between two variants: no copy Pod now
    }
    running = candidate_of(body, NOW)
    assert running is not None and running.copy_pods == 1
    assert running.copy is not None and running.copy.cpu == 2
    # 1 CPU for its trial, 2 for its copy: the next one-CPU trial with a one-CPU copy waits
    later = with_copy(Candidate("lab", "later", NOW, 0, trial("1"), 1, False), copy_of(1.0))
    assert not verdict(later, [running, later], FOUR, NOW).admit
    body["status"].pop("serviceCopy")
    assert verdict(later, [candidate_of(body, NOW), later], FOUR, NOW).admit  # type: ignore[list-item]


def test_one_ahead_waits_with_its_copy_counted() -> None:
    workers = [worker(n) for n in ("w1", "w2")]
    ahead = subject(copy_of(1.5), minutes_ago=5)  # 0.25 + 1.5 of the 2 CPUs free
    behind = Candidate("lab", "behind", NOW, 0, trial("0.5"), 1, False)
    # ahead is admitted in its own pass with its copy: 0.25 of 2 CPUs left, behind waits
    seen = verdict(behind, [*workers, ahead, behind], FOUR, NOW)
    assert not seen.admit and "in use by" in seen.message and "lab/capacity" in seen.message
    bigger = subject(copy_of(2.0), minutes_ago=5)  # cannot start yet: first in line
    assert verdict(behind, [*workers, bigger, behind], FOUR, NOW).behind == "lab/capacity"


def test_the_copy_goes_where_its_pod_template_may_go() -> None:
    nodes = [
        NodeView("trials", Decimal(2), Decimal(2**34), {"pool": "trials"}),
        NodeView("services", Decimal(1), Decimal(2**34), {"pool": "services"}),
    ]
    placed = subject(copy_of(1.0, node_selector={"pool": "services"}))
    assert verdict(placed, [placed], nodes, NOW).admit
    anywhere_too_big = subject(copy_of(1.5, node_selector={"pool": "services"}))
    assert not verdict(anywhere_too_big, [anywhere_too_big], nodes, NOW).admit


def _admit(copy: ServiceCopyRequest, cpu: str = "2", cordoned: bool = False, **spec: Any) -> Any:
    body = document(**({**served(), "resources": {"cpu": 1}} | spec))
    body["metadata"] |= {"namespace": "lab", "creationTimestamp": "2026-11-23T11:59:00Z"}
    spec = parse_experiment(body).spec
    observed = Observed(spec, plan_trials(spec), {}, {}, [], NOW)
    node = {"metadata": {"name": "n1"}, "spec": {"unschedulable": cordoned},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi"}}}  # fmt: skip
    return admit(body, observed, None, [], NodeReader(lambda: [node]), False, copy)


def test_a_copy_that_never_fits_beside_a_trial_fails_at_once() -> None:
    refused = _admit(copy_of(1.5))  # 1 CPU trial + 1.5 CPU copy on a 2-CPU node
    assert refused.ruling is not None and refused.ruling.failure is not None
    assert refused.ruling.failure_reason == "DoesNotFit"
    assert "beside its service's copy: 1 replica(s) of 1.5 CPU(s)" in refused.ruling.failure
    assert _admit(copy_of(1.0)).ruling is None  # admitted
    assert _admit(copy_of(1.0), cordoned=True).ruling.failure is None  # cordoned: it waits


def test_a_searched_service_holds_room_for_its_probes_grown_to_max_pods() -> None:
    """A probe its generator binds runs again with more Pods, up to search.rate.maxPods,
    beside the copy: the queue counts those Pods from the start, so the grown probe is never
    left Pending, and one that could never fit is refused at once, naming the field."""
    search = {"rate": {"start": 10, "latency": {"max": "250ms"}, "maxPods": 2}}
    body = document(**served(), resources={"cpu": 0.5}, pinning="preferred", search=search)
    del body["spec"]["workload"]["tasks"]
    body["spec"]["workload"]["arrival"] = {"ratePerSecond": 20, "duration": "2s"}
    body["metadata"] |= {"namespace": "lab", "creationTimestamp": "2026-11-23T11:59:00Z"}
    workload = dict(body["spec"]["workload"])
    seen = candidate_of(body, NOW)
    assert seen is not None and seen.pods == 2
    body["spec"]["search"]["rate"]["maxPods"] = 4
    assert (seen := candidate_of(body, NOW)) is not None and seen.pods == 4
    del body["spec"]["service"]  # a search of the client never grows its generator
    body["spec"]["workload"]["target"] = {"url": "http://api/"}
    assert (seen := candidate_of(body, NOW)) is not None and seen.pods == 1
    # 4 Pods x 1 CPU and a copy of 1 CPU do not fit 4 CPUs even empty
    four = {"rate": {**search["rate"], "maxPods": 4}}
    refused = _admit(copy_of(1.0), cpu="4", search=four, workload=workload)
    assert refused.ruling is not None and refused.ruling.failure is not None
    assert "4 trial Pod(s)" in refused.ruling.failure, refused.ruling.failure
    assert "search.rate.maxPods" in refused.ruling.failure
    assert _admit(copy_of(1.0), cpu="5", search=four, workload=workload).ruling is None
