"""spec.service's variants one at a time (pure): which copy is made, deleted, waited for, and
when a variant's trials fail because their copy never got Ready."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from helpers.pods import CONFIG, NOW, pod
from helpers.pods import spec as make_spec

from cxlab.experiments.decide import Observed, decide
from cxlab.experiments.plan import plan_trials
from cxlab.experiments.pod_view import PodView
from cxlab.experiments.queue import copy_left
from cxlab.experiments.service_run import Copies, CopyView, copies_left, plan_copies, seen_gone
from cxlab.experiments.spec import ExperimentSpec
from cxlab.experiments.status import ServiceVariantStatus

SPEC = make_spec(
    service={"deployment": "api", "readyTimeout": "30s",
             "variants": {"named": [{"name": "a"}, {"name": "b"}]}},
    workload={"type": "http", "tasks": 10, "target": {"service": {"name": "api", "port": 80}}},
    models=[{"model": "asyncio", "workers": [4]}],
)  # fmt: skip
TRIALS = plan_trials(SPEC)


def copy_pod(variant: int, ready: bool = True, **fields: object) -> PodView:
    made = replace(pod(""), component="service-copy", trial=None, ready=ready, variant=variant)
    return replace(made, name=f"cx-x-v{variant}-abc", **fields)  # type: ignore[arg-type]


def plan(
    copies: Copies,
    ended: set[str] | None = None,
    old: list[ServiceVariantStatus] | None = None,
    spec: ExperimentSpec = SPEC,
):  # type: ignore[no-untyped-def]
    return plan_copies(spec, "x", TRIALS, ended or set(), copies, old or [], NOW)


def started(index: int, seconds_ago: float = 5) -> ServiceVariantStatus:
    return ServiceVariantStatus(
        index=index, name="ab"[index - 1], copy_name=f"cx-x-v{index}", phase="Starting",
        created_at=NOW - timedelta(seconds=seconds_ago),
    )  # fmt: skip


def test_the_first_variants_copy_is_made_and_no_trial_starts_before_it_is_ready() -> None:
    made = plan(Copies({}, set(), []))
    assert made.create is not None and made.create.index == 1 and not made.ready
    assert made.statuses[0].created_at == NOW and made.statuses[0].copy_name == "cx-x-v1"
    observed = Observed(SPEC, TRIALS, {}, {}, [], NOW, service=made.gate)
    assert decide(observed, CONFIG).create == []


def test_a_ready_copy_starts_only_its_variants_trials_once_it_has_settled() -> None:
    copies = Copies({1: CopyView(1, 1)}, {1}, [copy_pod(1)], endpoints={1: 1})
    # Ready now, 5 s after it was made: its trials wait service.settle (5 s) for its start-up
    ready = plan(copies, old=[started(1)])
    assert not ready.ready and ready.create is None and ready.statuses[0].ready_seconds == 5.0
    assert ready.statuses[0].phase == "Ready" and ready.recheck_seconds == 5.05
    observed = Observed(SPEC, TRIALS, {}, {}, [], NOW, service=ready.gate)
    assert decide(observed, CONFIG).create == []
    # 5 s later, as status recorded it (a restarted operator knows as much)
    settled = plan_copies(SPEC, "x", TRIALS, set(), copies, ready.statuses,
                          NOW + timedelta(seconds=5))  # fmt: skip
    assert settled.ready
    observed = Observed(SPEC, TRIALS, {}, {}, [], NOW, service=settled.gate)
    assert [t.service_variant for t, _, _ in decide(observed, CONFIG).create] == [1]
    # settle 0s: at once
    spec = SPEC.model_copy(update={"service": SPEC.service.model_copy(update={"settle": "0s"})})
    assert plan(copies, old=[started(1)], spec=spec).ready


def test_pods_ready_before_the_service_lists_them_wait_a_moment() -> None:
    waiting = plan(Copies({1: CopyView(1, 1)}, {1}, [copy_pod(1)]), old=[started(1)])
    assert not waiting.ready and waiting.recheck_seconds is not None
    assert waiting.recheck_seconds < 1


def test_the_next_variants_copy_waits_until_the_last_one_is_gone() -> None:
    first = {t.name for t in TRIALS if t.service_variant == 1}
    copies = Copies({1: CopyView(1, 1)}, {1}, [copy_pod(1)], endpoints={1: 1})
    ended = plan(
        copies,
        ended=first,
        old=[started(1).model_copy(update={"phase": "Ready", "ready_seconds": 2})],
    )
    assert ended.delete == [1] and ended.delete_services == [1] and ended.create is None
    assert ended.statuses[0].deleting_since == NOW and ended.statuses[0].phase == "Deleting"
    # its Deployment is gone, a Pod still terminates: still not
    leaving = plan(Copies({}, set(), [copy_pod(1, deleting=True)]), first, ended.statuses)
    assert leaving.create is None and leaving.recheck_seconds is not None
    # its Deployment not deleted yet (a pass before the delete took), no Pod: still not
    kept = plan(Copies({1: CopyView(1, 1)}, set(), []), first, ended.statuses)
    assert kept.create is None
    # its Deployment being deleted (foreground), its last Pod gone: nothing of it runs
    going = plan(Copies({1: CopyView(1, 1, deleting=True)}, set(), []), first, ended.statuses)
    assert going.create is not None and going.create.index == 2
    assert going.statuses[0].deleted_seconds is None  # gone only once the object is
    later = ended.statuses[0].model_copy(update={"deleting_since": NOW - timedelta(seconds=2)})
    gone = plan(Copies({}, set(), []), first, [later])
    assert gone.create is not None and gone.create.index == 2
    assert gone.statuses[0].deleted_seconds == 2.0 and gone.statuses[0].phase == "Deleted"


def test_a_copy_not_ready_in_time_fails_its_variant_with_the_pods_reason() -> None:
    stuck = copy_pod(1, ready=False, phase="Pending", waiting_reason="ImagePullBackOff",
                     waiting_message='Back-off pulling image "nope"')  # fmt: skip
    copies = Copies({1: CopyView(1, 1)}, {1}, [stuck])
    early = plan(copies, old=[started(1, seconds_ago=10)])
    assert not early.failed and early.recheck_seconds is not None
    assert 19 < early.recheck_seconds < 21
    late = plan(copies, old=[started(1, seconds_ago=31)])
    assert "ImagePullBackOff" in late.failed[1] and late.statuses[0].reason == "ImagePullBackOff"
    assert late.current == 2 and late.delete == [1] and late.create is None
    observed = Observed(SPEC, TRIALS, {}, {}, [], NOW, service=late.gate)
    failed = decide(observed, CONFIG).finished
    assert [e.name for e in failed] == [t.name for t in TRIALS if t.service_variant == 1]
    assert all("ImagePullBackOff" in (e.message or "") for e in failed)


def test_reasons_are_the_pods_own() -> None:
    from cxlab.experiments.service_run import not_ready

    assert not_ready([copy_pod(1, ready=False, unschedulable="0/1 nodes")])[0] == "Unschedulable"
    oom = copy_pod(1, ready=False, waiting_reason="CrashLoopBackOff",
                   last_termination_reason="OOMKilled")  # fmt: skip
    assert not_ready([oom])[0] == "OOMKilled"
    crash = replace(oom, last_termination_reason="Error")
    assert not_ready([crash])[0] == "CrashLoopBackOff"
    assert not_ready([])[0] == "NoPods"


def test_a_copy_that_cannot_be_made_fails_its_variant_at_once() -> None:
    refused = plan(Copies({}, set(), [], refused={1: "Deployment api not found"}))
    assert refused.failed == {1: "Deployment api not found"} and refused.create is not None
    assert refused.create.index == 2


def test_once_every_trial_has_ended_every_copy_goes() -> None:
    done = plan(Copies({2: CopyView(2, 1)}, {2}, []), ended={t.name for t in TRIALS})
    assert done.current is None and done.delete == [2] and done.create is None


def test_a_finished_experiments_copies_are_timed_gone_once_none_is_left() -> None:
    made = NOW - timedelta(seconds=30)
    statuses = [
        ServiceVariantStatus(index=1, name="a", created_at=made, phase="Deleted",
                             deleting_since=made, deleted_seconds=1.5),
        ServiceVariantStatus(index=2, name="b", created_at=made, phase="Deleting",
                             deleting_since=NOW - timedelta(seconds=2.25)),
        ServiceVariantStatus(index=3, name="c", created_at=made, phase="Failed",
                             deleting_since=NOW - timedelta(seconds=1)),
        ServiceVariantStatus(index=4, name="d", phase="Failed"),  # never made (refused)
    ]  # fmt: skip
    assert copies_left(statuses)
    gone = seen_gone(statuses, NOW)
    assert [(s.phase, s.deleted_seconds) for s in gone] == [
        ("Deleted", 1.5),
        ("Deleted", 2.25),
        ("Failed", 1.0),
        ("Failed", None),
    ]
    assert not copies_left(gone)
    # the queue reads the same from the status as stored
    for version in (statuses, gone):
        stored = {"serviceVariants": [s.document() for s in version]}
        assert copy_left(stored) == copies_left(version)
