"""The queue's one run at a time per service (cxlab.experiments.queue): experiments that name
the same Deployment or Service take turns in the queue's order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from helpers.specs import document

from cxlab.experiments.nodes import NodeView, Request
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.queue import Candidate, candidate_of, verdict
from cxlab.experiments.record import Live, build_status
from cxlab.experiments.resource import parse_experiment
from cxlab.experiments.spec.examples import served, targeted
from cxlab.experiments.status import QueuePlace

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
ROOMY = [NodeView("n1", Decimal(16), Decimal(2**36))]
ONE_CPU = Request(Decimal(1), Decimal(2**29), {}, (), {})


def candidate(
    name: str, minutes_ago: float, *services: str, admitted: bool = False, priority: int = 0
) -> Candidate:
    created = NOW - timedelta(minutes=minutes_ago)
    return Candidate(
        "lab", name, created, priority, ONE_CPU, 1, admitted, services=frozenset(services)
    )


def body(name: str, minutes_ago: float, namespace: str = "lab", **spec: Any) -> dict[str, Any]:
    made = document(**spec)
    created = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    made["metadata"] = {"name": name, "namespace": namespace, "creationTimestamp": created}
    return made


def services(name: str, namespace: str = "lab", **spec: Any) -> frozenset[str]:
    found = candidate_of(body(name, 1, namespace, **spec), NOW)
    assert found is not None
    return found.services


def test_a_subject_is_its_deployment_its_service_and_its_copies() -> None:
    two = served(variants={"replicas": [1, 2]})
    assert services("capacity", **two) == {
        "Deployment lab/api",
        "Service lab/api",  # the Service in front of it: workload.target.service
        "Service lab/cx-capacity-v1",  # each variant's copy
        "Service lab/cx-capacity-v2",
    }


def test_a_target_is_its_service_in_its_own_namespace_or_the_one_it_names() -> None:
    assert services("load", workload=targeted()) == {"Service lab/api"}
    assert services("load", "team", workload=targeted()) == {"Service team/api"}
    elsewhere = targeted(service={"name": "search", "namespace": "shop", "port": 80})
    assert services("load", workload=elsewhere) == {"Service shop/search"}


def test_a_url_names_a_service_only_by_its_cluster_dns_name() -> None:
    for url in ("http://api.shop.svc:8080/x", "https://api.shop.svc.cluster.local/"):
        assert services("load", workload=targeted(url=url, service=None)) == {"Service shop/api"}
    for url in ("https://api.example.com/", "http://api.shop/", "http://10.0.0.7:80/"):
        assert services("load", workload=targeted(url=url, service=None)) == set()


def test_the_delay_target_is_no_service_of_anyones() -> None:
    assert services("sleepy") == set()  # sleep workload
    assert services("echo", workload={"type": "http", "tasks": 10, "rtt": "10ms"}) == set()


def test_two_runs_of_one_deployment_take_turns_in_creation_order() -> None:
    first, second = (candidate(n, m, "Deployment lab/api") for n, m in (("a", 2), ("b", 1)))
    assert verdict(first, [first, second], ROOMY, NOW).admit
    # the first is admitted in its own pass: the second waits for it, though there is room
    waits = verdict(second, [first, second], ROOMY, NOW)
    assert not waits.admit and waits.behind == "lab/a" and waits.service == "Deployment lab/api"
    assert waits.position == 2 and "one run at a time per service" in waits.message
    running = replace(first, admitted=True)
    assert verdict(second, [running, second], ROOMY, NOW).behind == "lab/a"
    assert verdict(second, [second], ROOMY, NOW).admit  # the first has finished


def test_a_target_and_a_subject_behind_the_same_service_take_turns() -> None:
    subject = services("capacity", **served())
    target = services("load", workload=targeted())
    assert subject & target == {"Service lab/api"}
    running = candidate("capacity", 5, *subject, admitted=True)
    load = candidate("load", 1, *target)
    assert verdict(load, [running, load], ROOMY, NOW).service == "Service lab/api"


def test_other_services_and_namespaces_do_not_wait() -> None:
    running = candidate("a", 5, "Service lab/api", admitted=True)
    for other in ("Service lab/search", "Service team/api", "Deployment lab/other"):
        assert verdict(
            candidate("b", 1, other), [running, candidate("b", 1, other)], ROOMY, NOW
        ).admit
    assert verdict(candidate("c", 1), [running, candidate("c", 1)], ROOMY, NOW).admit


def test_one_waiting_its_turn_holds_no_room_but_keeps_its_place() -> None:
    two_cpus = [NodeView("n1", Decimal(2), Decimal(2**36))]
    running = candidate("running", 9, "Service lab/api", admitted=True)  # one of two CPUs
    turn = candidate("turn", 5, "Service lab/api")  # waits for the running one
    other = candidate("other", 3, "Service lab/search")
    late = candidate("late", 1, "Service lab/api")
    queue = [running, turn, other, late]
    # the other service's experiment is admitted past it: it waits for no room
    assert verdict(other, queue, two_cpus, NOW).admit
    # a later one on the same service waits behind it, not beside it, once the first is gone
    assert verdict(late, queue, two_cpus, NOW).behind == "lab/running"
    assert verdict(late, [turn, other, late], two_cpus, NOW).behind == "lab/turn"
    assert verdict(turn, [turn, other, late], two_cpus, NOW).admit
    # its place holds on each of its services, one it does not wait for too
    both = replace(turn, services=frozenset({"Service lab/api", "Deployment lab/api"}))
    subject = candidate("subject", 1, "Deployment lab/api")
    waits = verdict(subject, [running, both, subject], ROOMY, NOW)
    assert waits.behind == "lab/turn" and waits.service == "Deployment lab/api"


def test_the_turn_follows_the_queues_order_priority_first() -> None:
    old = candidate("old", 4, "Service lab/api")
    urgent = candidate("urgent", 1, "Service lab/api", priority=1)
    assert verdict(urgent, [old, urgent], ROOMY, NOW).admit
    assert verdict(old, [old, urgent], ROOMY, NOW).behind == "lab/urgent"


def test_a_wait_for_a_service_is_its_own_reason() -> None:
    spec = parse_experiment(document()).spec
    place = QueuePlace(position=2, length=2, behind="lab/a", service="Deployment lab/api",
                       since=NOW, message="waiting for lab/a")  # fmt: skip
    status = build_status(spec=spec, trials=plan_trials(spec), entries=[], started_spec="{}",
                          generation=1, live=Live(queue=place), old=None, now=NOW)  # fmt: skip
    written = status.document()
    assert written["queue"]["service"] == "Deployment lab/api"
    queued = {c["type"]: c for c in written["conditions"]}["Queued"]
    assert (queued["status"], queued["reason"]) == ("True", "WaitingForService")


def test_a_finished_run_keeps_its_service_until_status_says_its_last_copy_is_gone() -> None:
    """The last copy is deleted after the last trial: the experiment has finished while its
    copy still runs. Until the operator writes that it is gone, the service is still taken."""
    made = body("before", 2, **served())
    made["status"] = {"phase": "Succeeded", "serviceVariants": [
        {"index": 1, "name": "r1", "createdAt": "2026-11-23T11:58:00Z",
         "deletingSince": "2026-11-23T11:59:58Z", "phase": "Deleting"}]}  # fmt: skip
    held = candidate_of(made, NOW)
    assert held is not None and held.admitted and held.slots == 0
    assert "Deployment lab/api" in held.services
    later = candidate_of(body("after", 1, **served()), NOW)
    assert later is not None
    waits = verdict(later, [held, later], ROOMY, NOW)
    assert not waits.admit and waits.service is not None and waits.behind == "lab/before"
    # the pass that sees no copy left writes deletedSeconds (service_run.seen_gone)
    made["status"]["serviceVariants"][0] |= {"deletedSeconds": 2.1, "phase": "Deleted"}
    assert candidate_of(made, NOW) is None
    assert verdict(later, [later], ROOMY, NOW).admit
    # a variant whose copy was never made (refused) leaves nothing behind
    made["status"]["serviceVariants"] = [{"index": 1, "name": "r1", "phase": "Failed"}]
    assert candidate_of(made, NOW) is None
