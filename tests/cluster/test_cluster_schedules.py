"""ExperimentSchedules on the real local cluster: runs on an @every schedule, exactly one run
per slot across a kill -9 of the operator, history limits, suspend, Forbid, a regression
after the template's RTT got slower (and its acknowledgement), and the capacity plan against a
hand calculation from the run's own Results.

None of it depends on timing: every wait is for a state, and every count is checked against
the slots the schedule's own status says have passed."""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import time
from datetime import datetime
from typing import Any

import pytest
import yaml
from helpers.cluster import BUILT_KUBECTL, Lab, Operator
from kubernetes.client.exceptions import ApiException

from cxlab.analysis.queueing import Service, queue
from cxlab.crd import GROUP, SCHEDULE_PLURAL, VERSION
from cxlab.times import parse_time

EVERY = 10  # seconds between slots: the shortest @every allows


def template(
    rtt: str = "50ms", tasks: int = 1, repetitions: int = 1, **more: Any
) -> dict[str, Any]:
    """Without calibration: these runs measure the schedule's timing, each in its slot, and two
    more Pods a run would only slow them (test_observability's schedule calibrates)."""
    return {
        "spec": {
            "workload": {"type": "sleep", "tasks": tasks, "rtt": rtt},
            "models": [{"model": "asyncio"}],
            "repetitions": repetitions,
            "calibration": False,
            **more,
        }
    }


def status(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = body.get("status") or {}
    return found


def moment(text: str) -> datetime:
    return parse_time(text)


def condition(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status(body).get("conditions") or [] if c["type"] == kind), {})


def history(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(status(body).get("history") or [])


@pytest.mark.long
def test_every_slot_gets_one_run_across_a_kill_9_history_limits_and_suspend(
    lab: Lab, operator: Operator
) -> None:
    spec = {"schedule": f"@every {EVERY}s", "successfulRunsHistoryLimit": 2,
            "experimentTemplate": template()}  # fmt: skip
    created = moment(lab.apply_schedule("tick", spec)["metadata"]["creationTimestamp"])
    lab.wait_schedule("tick", lambda s: len(history(s)) >= 1, timeout=60)
    # Kill the operator just before the next slot, and start it again after it.
    upcoming = moment(status(lab.get_schedule("tick"))["nextScheduleTime"])
    time.sleep(max(0.0, (upcoming - datetime.now(upcoming.tzinfo)).total_seconds() - 0.5))
    operator.kill()
    time.sleep(2)
    operator.start()
    done = lab.wait_schedule("tick", lambda s: len(history(s)) >= 3, timeout=120)
    lab.patch_schedule_spec("tick", {"suspend": True})
    suspended = lab.wait_schedule("tick", lambda s: not status(s).get("active"), timeout=60)

    # Every slot from creation to the last acted on was started, skipped or missed, once.
    state = status(suspended)
    slots = round((moment(state["lastScheduleTime"]) - created).total_seconds()) // EVERY
    accounted = state.get("startedRuns", 0) + state.get("skippedRuns", 0)
    assert accounted + state.get("missedRuns", 0) == slots, state
    names = [e["run"] for e in history(suspended)]
    assert len(names) == len(set(names)) == state["startedRuns"]
    for entry in history(suspended):  # named after its slot, which is a slot of the schedule
        slot = moment(entry["scheduledTime"])
        assert entry["run"] == f"tick-{int(slot.timestamp())}"
        assert round((slot - created).total_seconds()) % EVERY == 0
        assert entry["phase"] == "Succeeded" and entry["points"][0]["n"] == 1

    # The history keeps every run; the cluster only the newest two, the oldest deleted.
    kept = lab.wait_schedule("tick", lambda s: len(lab.runs("tick")) == 2, timeout=30)
    runs = [r["metadata"]["name"] for r in lab.runs("tick")]
    assert runs == sorted(e["run"] for e in history(kept))[-2:]
    assert history(done)[0]["run"] not in runs

    # Suspended: the next slot passes and nothing starts.
    after = moment(status(kept)["nextScheduleTime"])
    time.sleep(max(0.0, (after - datetime.now(after.tzinfo)).total_seconds()) + 3)
    later = lab.get_schedule("tick")
    assert status(later)["startedRuns"] == state["startedRuns"]
    assert len(lab.runs("tick")) == 2


def test_forbid_skips_a_slot_while_a_run_goes_on_and_counts_it(lab: Lab) -> None:
    spec = {"schedule": f"@every {EVERY}s", "experimentTemplate": template(rtt="15s")}
    lab.apply_schedule("slow", spec)
    skipped = lab.wait_schedule("slow", lambda s: status(s).get("skippedRuns", 0) >= 1, 90)
    assert len(status(skipped)["active"]) == 1 and len(lab.runs("slow")) == 1
    reasons = {e.reason for e in lab.events("slow", "RunSkipped", kind="ExperimentSchedule")}
    assert "RunSkipped" in reasons


def _plan_by_hand(run: dict[str, Any], target: dict[str, Any]) -> tuple[int, Service]:
    """Pods from the run's Results, as docs/capacity-plan.md's worked example, and the
    service times the workers are sized with: the repetition with the median mean."""
    # the sweep's: not a verification's, a probe's or a calibration's (NNN-v1-, -s1-, -calcpu-)
    sweep = [t for t in status(run)["trials"] if not re.match(r"\d+-(v\d|s\d|cal)", t["name"])]
    results = [t["result"] for t in sweep]
    rate = statistics.median(r["throughputPerSecond"] for r in results)
    cpu = statistics.median(
        (r["cpuUserSeconds"] + r["cpuSystemSeconds"]) / r["tasks"] for r in results
    )
    per_pod = min(rate, target["cpuUtilization"] * 1 / cpu) if cpu else rate
    pods = math.ceil(target["ratePerSecond"] / per_pod)
    means = sorted(
        (h["sum"] / (h["zeroCount"] + sum(h["counts"])), h)
        for h in (r["latencyHistogram"] for r in results)
    )
    return pods, Service.of_histogram(means[len(means) // 2][1])


@pytest.mark.long
def test_a_slower_rtt_regresses_is_acknowledged_and_the_plan_is_verified_as_calculated(
    lab: Lab,
) -> None:
    target = {"ratePerSecond": 200, "latency": {"percentile": "p99", "max": "1s"},
              "cpuUtilization": 0.7}  # fmt: skip
    # The runs verify their plan (a schedule's default): one Pod at 200 tasks/s for 1 s (a
    # run must end within its 20 s slot, or the next is skipped).
    capacity = {"target": target, "verify": {"duration": "1s"}}
    fast = template(rtt="50ms", tasks=20, repetitions=2, capacity=capacity)
    # A change of half counts, not the default tenth: the runs share this machine with the
    # other tests and builds, whose load changes between runs (a cold run beside two busy
    # cores raised Regressed on three unchanged runs); the slower RTT below is eight times.
    spec = {"schedule": "@every 20s", "experimentTemplate": fast,
            "regression": {"minRelativeChange": 0.5}}  # fmt: skip
    lab.apply_schedule("drift", spec)
    # Three runs: the prediction t-test has 2 degrees of freedom against their medians.
    baseline = lab.wait_schedule("drift", lambda s: len(history(s)) >= 3, timeout=180)
    assert condition(baseline, "Regressed").get("status") == "False", status(baseline)
    # The capacity plan of the newest run, against a hand calculation from its Results.
    plan = status(baseline)["capacityPlan"]
    run = lab.get(plan["run"])
    pods, service = _plan_by_hand(run, target)
    [asyncio] = plan["models"]
    # Verified as planned, or (a busy machine) after one Pod more per refuted attempt.
    assert plan["basis"] == "verified", plan["message"]
    pods += len(plan["verification"]) - 1
    assert asyncio["pods"] == pods == plan["verification"][-1]["pods"], plan
    # The fewest workers for which at most 20 % of tasks wait and p99 <= 1s, wait counted.
    rate, workers = target["ratePerSecond"] / pods, asyncio["workersPerPod"]
    held, fewer = queue(rate, service, workers, 0.99), queue(rate, service, workers - 1, 0.99)
    assert held and held.wait_probability <= 0.2 and held.latency <= 1, plan
    assert not fewer or fewer.wait_probability > 0.2 or fewer.latency > 1, plan
    assert asyncio["expectedOccupancy"] == round(rate * service.mean / workers, 3), plan
    assert (
        plan["display"]
        == f"{pods} Pod{'s' if pods > 1 else ''} \N{MULTIPLICATION SIGN} 1 CPU, asyncio (verified)"
    )
    assert status(run)["capacityPlan"]["pods"] == pods
    # kubectl shows it; its Deployment fragment is one the apiserver takes.
    shown = subprocess.run([str(BUILT_KUBECTL), "get", "cxs", "drift", "-n", lab.namespace],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert f"{plan['display']}" in shown and "(verified)" in shown, shown
    fragment = yaml.safe_load(plan["manifest"])
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "planned"},
        "spec": {
            **fragment["spec"], "selector": {"matchLabels": {"app": "planned"}},
            "template": {
                "metadata": {"labels": {"app": "planned"}},
                "spec": {"containers": [
                    {**fragment["spec"]["template"]["spec"]["containers"][0], "image": "app"}
                ]},
            },
        },
    }  # fmt: skip
    subprocess.run(
        [str(BUILT_KUBECTL), "apply", "--dry-run=server", "-n", lab.namespace, "-f", "-"],
        input=json.dumps(deployment),
        capture_output=True,
        text=True,
        check=True,
    )
    # Each history entry keeps the plan and how its verification went.
    brief = history(baseline)[-1]["plan"]
    assert brief["basis"] == "verified" and brief["verifiedLatencySeconds"] <= 1, brief

    slower = template(rtt="400ms", tasks=20, repetitions=2, capacity={"target": target})
    lab.patch_schedule_spec("drift", {"experimentTemplate": slower})
    # A run that started before the patch still measures 50 ms: wait for one that measured 400.
    regressed = lab.wait_schedule("drift", lambda s: _newest_rtt(lab, s) == "400ms", timeout=90)
    found = condition(regressed, "Regressed")
    assert found["status"] == "True", status(regressed)
    assert "asyncio w=per-task" in found["message"]  # the point, the same key in both RTTs
    metrics = {r["metric"] for r in status(regressed)["regression"]["found"]}
    assert "wallSeconds" in metrics, status(regressed)["regression"]
    assert any(m in found["message"] for m in metrics) and re.search(
        r"p [=<] 0\.", found["message"]
    )
    lab.events("drift", "Regressed", kind="ExperimentSchedule")

    newest = history(regressed)[-1]["run"]
    lab.patch_schedule_spec("drift", {"regression": {"acknowledgedRun": newest}, "suspend": True})
    cleared = lab.wait_schedule(
        "drift", lambda s: condition(s, "Regressed").get("reason") == "Acknowledged", timeout=30
    )
    assert condition(cleared, "Regressed")["status"] == "False"


def _newest_rtt(lab: Lab, schedule: dict[str, Any]) -> str | None:
    """The RTT the schedule's newest finished run measured (None before the first)."""
    found = history(schedule)
    if not found:
        return None
    rtt: str = lab.stored(found[-1]["run"])["spec"]["workload"]["rtt"]
    return rtt


def _refusal(lab: Lab, spec: dict[str, Any]) -> str:
    """The apiserver's message for a schedule it refuses at create (a dry run: nothing kept)."""
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ExperimentSchedule",
            "metadata": {"name": "bad"}, "spec": spec}  # fmt: skip
    with pytest.raises(ApiException) as refused:
        lab.custom.create_namespaced_custom_object(
            GROUP, VERSION, lab.namespace, SCHEDULE_PLURAL, body, dry_run="All"
        )
    assert refused.value.status == 422, refused.value.body
    return str(json.loads(refused.value.body)["message"])


TARGET = "spec.experimentTemplate.spec.capacity.target"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": "every 5 minutes"}, "spec.schedule"),
        ({"schedule": "* * * *"}, "spec.schedule"),
        ({"experimentTemplate": template(capacity={"target": {"ratePerSecond": 0,
          "latency": {"max": "250ms"}}})}, f"{TARGET}.ratePerSecond"),
        ({"experimentTemplate": template(capacity={"target": {"ratePerSecond": 10,
          "latency": {"max": "-250ms"}}})}, f"{TARGET}.latency.max"),
        ({"experimentTemplate": {"spec": {"workload": {"type": "cpu", "tasks": 1},
          "models": [{"model": "asyncio"}]}}}, "spec.experimentTemplate.spec.workload"),
        ({"concurrencyPolicy": "Allow"}, "spec.concurrencyPolicy"),
    ],
)  # fmt: skip
def test_bad_schedules_are_refused_at_apply_naming_the_field(
    lab: Lab, change: dict[str, Any], field: str
) -> None:
    spec = {"schedule": "@hourly", "experimentTemplate": template()} | change
    assert field in _refusal(lab, spec)


def test_an_unknown_time_zone_is_a_condition_naming_the_field(lab: Lab) -> None:
    # The apiserver cannot look up the time-zone database: the operator says it, no run starts.
    lab.apply_schedule("zone", {"schedule": "@every 10s", "timeZone": "Mars/Olympus_Mons",
                                "experimentTemplate": template()})  # fmt: skip
    refused = lab.wait_schedule("zone", lambda s: condition(s, "Ready").get("status") == "False")
    ready = condition(refused, "Ready")
    assert ready["reason"] == "InvalidSpec" and "spec.timeZone" in ready["message"], ready
    assert "Mars/Olympus_Mons" in ready["message"] and not lab.runs("zone")


def test_a_run_the_apiserver_refuses_is_a_missed_slot_that_says_why(lab: Lab) -> None:
    # A quota of no experiments in the namespace: every run's create is refused (403).
    quota = {"metadata": {"name": "no-runs"},
             "spec": {"hard": {f"count/concurrencyexperiments.{GROUP}": "0"}}}  # fmt: skip
    lab.core.create_namespaced_resource_quota(lab.namespace, quota)
    lab.apply_schedule("quota", {"schedule": f"@every {EVERY}s", "experimentTemplate": template()})
    refused = lab.wait_schedule(
        "quota", lambda s: condition(s, "RunRefused").get("status") == "True", timeout=60
    )
    message = condition(refused, "RunRefused")["message"]
    # "exceeded quota: no-runs", or "status unknown for quota: no-runs" before the quota
    # controller has counted: refused (403) either way, and the message says by what
    assert "is forbidden" in message and "quota: no-runs" in message, message
    state = status(refused)
    assert state.get("startedRuns", 0) == 0 and state["missedRuns"] >= 1 and not lab.runs("quota")
    lab.events("quota", "RunRefused", kind="ExperimentSchedule")
