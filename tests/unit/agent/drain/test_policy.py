"""pod_disposition / plan_drain: what the drain does with each kind of pod (kubectl drain's filters), from pods
written as the apiserver returns them (JSON, camelCase) and converted by PodView.from_api."""

from __future__ import annotations

from typing import Any

import pytest

from agent.drain.policy import (
    DEFAULT_TERMINATION_GRACE_SECONDS,
    Grace,
    GraceSource,
    PodAction,
    daemonset_owners,
    deletes_past_pdb,
    grace_for,
    grace_limit,
    grace_past_pdb,
    plan_drain,
    pod_disposition,
    seconds_until_pdb_delete,
    wanted_grace,
)
from agent.kube.views import PodView
from core.model import DrainOptions
from core.settings import PdbDeadlinePolicy


def pod(
    name: str = "p",
    *,
    owner: str | None = "ReplicaSet",
    controller: bool = True,
    phase: str = "Running",
    emptydir: bool = False,
    mirror: bool = False,
    deleting: bool = False,
) -> PodView:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner, "name": f"{owner.lower()}-1", "uid": "o", "controller": controller}
        ]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc123"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    volumes: list[dict[str, Any]] = [{"name": "token", "projected": {"sources": []}}]
    if emptydir:
        volumes.append({"name": "scratch", "emptyDir": {}})
    return PodView.from_api(
        {
            "metadata": meta,
            "spec": {"nodeName": "n1", "volumes": volumes, "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": phase},
        }
    )


DEFAULT = DrainOptions()  # kubectl drain --ignore-daemonsets --delete-emptydir-data --force
STRICT = DrainOptions(ignore_daemonsets=False, delete_emptydir_data=False, force=False)

CASES = [
    # (id, pod, options, action, reason fragment)
    ("replicaset pod", pod(), DEFAULT, PodAction.EVICT, "managed by ReplicaSet"),
    ("statefulset pod", pod(owner="StatefulSet"), STRICT, PodAction.EVICT, "managed by StatefulSet"),
    ("daemonset pod", pod(owner="DaemonSet"), DEFAULT, PodAction.SKIP, "daemonset"),
    ("daemonset pod, not ignored", pod(owner="DaemonSet"), STRICT, PodAction.REFUSE, "daemonset"),
    ("mirror pod", pod(owner="Node", mirror=True), DEFAULT, PodAction.SKIP, "mirror"),
    ("mirror pod, strict", pod(owner=None, mirror=True), STRICT, PodAction.SKIP, "mirror"),
    ("succeeded pod", pod(owner="Job", phase="Succeeded"), DEFAULT, PodAction.DELETE, "finished"),
    ("failed bare pod, strict", pod(owner=None, phase="Failed"), STRICT, PodAction.DELETE, "finished"),
    ("finished daemonset pod", pod(owner="DaemonSet", phase="Failed"), DEFAULT, PodAction.SKIP, "daemonset"),
    ("terminating pod", pod(deleting=True), DEFAULT, PodAction.WAIT, "terminating"),
    ("terminating bare pod, strict", pod(owner=None, deleting=True), STRICT, PodAction.WAIT, "terminating"),
    ("emptydir pod", pod(emptydir=True), DEFAULT, PodAction.EVICT, "emptydir: local data lost"),
    ("emptydir pod, strict", pod(emptydir=True), STRICT, PodAction.REFUSE, "emptydir"),
    ("bare pod", pod(owner=None), DEFAULT, PodAction.EVICT, "unmanaged: will not be recreated"),
    ("bare pod, strict", pod(owner=None), STRICT, PodAction.REFUSE, "unmanaged"),
    ("owner that is not a controller", pod(controller=False), DEFAULT, PodAction.EVICT, "unmanaged"),
    ("owner that is not a controller, strict", pod(controller=False), STRICT, PodAction.REFUSE, "unmanaged"),
    ("pending pod", pod(phase="Pending"), DEFAULT, PodAction.EVICT, "managed by"),
]


@pytest.mark.parametrize(("case", "subject", "options", "action", "reason"), CASES, ids=[c[0] for c in CASES])
def test_pod_disposition(case: str, subject: PodView, options: DrainOptions, action: PodAction, reason: str) -> None:
    disposition = pod_disposition(subject, options)
    assert disposition.action == action, case
    assert reason in disposition.reason


def test_bare_pod_with_emptydir_reports_both_losses() -> None:
    disposition = pod_disposition(pod(owner=None, emptydir=True), DEFAULT)
    assert disposition.action == PodAction.EVICT
    assert "emptydir: local data lost" in disposition.reason
    assert "unmanaged: will not be recreated" in disposition.reason


def test_bare_pod_with_emptydir_refused_when_only_one_flag_allows_it() -> None:
    only_force = DrainOptions(delete_emptydir_data=False, force=True)
    assert pod_disposition(pod(owner=None, emptydir=True), only_force).action == PodAction.REFUSE
    only_emptydir = DrainOptions(delete_emptydir_data=True, force=False)
    assert pod_disposition(pod(owner=None, emptydir=True), only_emptydir).action == PodAction.REFUSE


def test_pod_of_a_deleted_daemonset_is_an_orphan() -> None:
    orphan = pod(owner="DaemonSet")
    missing = frozenset({("ns", "daemonset-1")})
    assert pod_disposition(orphan, DEFAULT, missing).action == PodAction.EVICT
    assert pod_disposition(orphan, DrainOptions(force=False), missing).action == PodAction.REFUSE
    # another namespace's DaemonSet of the same name is not this pod's
    assert pod_disposition(orphan, DEFAULT, frozenset({("other", "daemonset-1")})).action == PodAction.SKIP


def test_plan_keeps_order_and_lists_refusals() -> None:
    pods = [pod("a"), pod("b", owner="DaemonSet"), pod("c", owner=None), pod("d", phase="Succeeded")]
    plan = plan_drain(pods, DrainOptions(force=False))
    assert [p.name for p, _ in plan.decisions] == ["a", "b", "c", "d"]
    assert [p.name for p, _ in plan.refused] == ["c"]
    assert [p.name for p, _ in plan.with_action(PodAction.EVICT, PodAction.DELETE)] == ["a", "d"]


def test_daemonset_owners_ignores_terminating_and_other_controllers() -> None:
    pods = [pod("a", owner="DaemonSet"), pod("b", owner="DaemonSet", deleting=True), pod("c")]
    assert daemonset_owners(pods) == {("ns", "daemonset-1")}


def test_pod_view_reads_the_api_fields() -> None:
    view = PodView.from_api(
        {
            "metadata": {
                "name": "web-1",
                "namespace": "shop",
                "uid": "u1",
                "labels": {"app": "web"},
                "deletionTimestamp": "2026-03-01T10:00:00Z",
                "ownerReferences": [
                    {"kind": "ReplicaSet", "name": "web-abc", "controller": True},
                    {"kind": "Thing", "name": "x"},
                ],
            },
            "spec": {
                "nodeName": "ip-10-0-0-1.ec2.internal",
                "terminationGracePeriodSeconds": 2,
                "volumes": [{"name": "cache", "emptyDir": {"medium": "Memory"}}, {"name": "cfg", "configMap": {}}],
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert view.key == "shop/web-1"
    assert view.node_name == "ip-10-0-0-1.ec2.internal"
    assert view.ready is True
    assert view.emptydir_volumes == ("cache",)
    assert view.controller is not None and view.controller.name == "web-abc"
    assert view.deletion_timestamp is not None and view.deletion_timestamp.year == 2026
    assert view.termination_grace_period_seconds == 2
    assert view.labels == {"app": "web"}


def test_pod_view_of_a_minimal_pod() -> None:
    view = PodView.from_api({"metadata": {"name": "x", "namespace": "d"}})
    assert view.controller is None and view.emptydir_volumes == () and view.phase == "" and not view.ready
    assert pod_disposition(view, DEFAULT).action == PodAction.EVICT


# ------------------------------------------------------------------ shutdown time inside the deadline (issue 9.2)


def graced(grace: int | None) -> PodView:
    body: dict[str, Any] = {
        "metadata": {"name": "g", "namespace": "ns", "uid": "uid-g"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }
    if grace is not None:
        body["spec"]["terminationGracePeriodSeconds"] = grace
    return PodView.from_api(body)


@pytest.mark.parametrize(
    ("grace", "override", "expected"),
    [
        (180, None, (180, GraceSource.POD)),
        (None, None, (DEFAULT_TERMINATION_GRACE_SECONDS, GraceSource.POD)),  # the API's default, 30
        (0, None, (0, GraceSource.POD)),
        (180, 20, (20, GraceSource.OPTION)),  # kubectl's --grace-period wins over the pod's own
    ],
)
def test_wanted_grace_is_the_override_else_the_pods_own(
    grace: int | None, override: int | None, expected: tuple[int, GraceSource]
) -> None:
    assert wanted_grace(graced(grace), DrainOptions(grace_period_seconds=override)) == expected


@pytest.mark.parametrize(
    ("wanted", "remaining", "margin", "expected"),
    [
        # a 180 s grace with 119 s left and a 10 s margin: capped to 109 s, sent in deleteOptions
        (180, 119.0, 10.0, Grace(109, 109, GraceSource.DEADLINE)),
        (180, 119.9, 10.0, Grace(109, 109, GraceSource.DEADLINE)),  # whole seconds, rounded down (ends in time)
        # fits: the pod's own grace, nothing sent (the apiserver uses the pod's spec)
        (30, 119.0, 10.0, Grace(30, None, GraceSource.POD)),
        (109, 119.0, 10.0, Grace(109, None, GraceSource.POD)),  # exactly fits
        (110, 119.0, 10.0, Grace(109, 109, GraceSource.DEADLINE)),  # one second too long
        # the margin counts: the same pod with no margin gets the full time left
        (180, 119.0, 0.0, Grace(119, 119, GraceSource.DEADLINE)),
        (115, 119.0, 5.0, Grace(114, 114, GraceSource.DEADLINE)),
        # inside the margin: at least 1 s (SIGTERM, not an immediate deletion) while a second is left
        (180, 8.0, 10.0, Grace(1, 1, GraceSource.DEADLINE)),
        # no time left: 0, never negative
        (180, 0.4, 10.0, Grace(0, 0, GraceSource.DEADLINE)),
        (180, -3.0, 10.0, Grace(0, 0, GraceSource.DEADLINE)),
        # never raised: a grace-0 pod stays 0, a 2 s pod stays 2 even inside the margin
        (0, 0.4, 10.0, Grace(0, None, GraceSource.POD)),
        (0, 119.0, 10.0, Grace(0, None, GraceSource.POD)),
        (1, 8.0, 10.0, Grace(1, None, GraceSource.POD)),
    ],
)
def test_grace_is_capped_to_the_time_left_minus_the_margin(
    wanted: int, remaining: float, margin: float, expected: Grace
) -> None:
    got = grace_for(wanted, GraceSource.POD, remaining, margin)
    assert got == expected
    assert 0 <= got.seconds <= wanted


def test_an_override_that_fits_is_sent_as_is_and_one_too_long_is_capped() -> None:
    assert grace_for(20, GraceSource.OPTION, 119.0, 10.0) == Grace(20, 20, GraceSource.OPTION)
    assert grace_for(200, GraceSource.OPTION, 119.0, 10.0) == Grace(109, 109, GraceSource.DEADLINE)


@pytest.mark.parametrize(
    ("remaining", "margin", "limit"),
    [(120.0, 10.0, 110), (10.5, 10.0, 1), (11.0, 10.0, 1), (12.0, 10.0, 2), (1.0, 10.0, 1), (0.99, 10.0, 0)],
)
def test_grace_limit(remaining: float, margin: float, limit: int) -> None:
    assert grace_limit(remaining, margin) == limit


@pytest.mark.parametrize(
    ("policy", "reason", "deletes"),
    [
        (PdbDeadlinePolicy.DELETE, "spot-interruption:terminate", True),
        (PdbDeadlinePolicy.DELETE, "asg-lifecycle:nodes-a", True),
        (PdbDeadlinePolicy.HONOR, "spot-interruption:terminate", False),
        (PdbDeadlinePolicy.HONOR, "asg-lifecycle:nodes-a", False),
        # the node does not die at these deadlines: budgets are always honoured
        (PdbDeadlinePolicy.DELETE, "rebalance-recommendation", False),
        (PdbDeadlinePolicy.DELETE, "refresh r-1 step 2", False),
        (PdbDeadlinePolicy.DELETE, "", False),
    ],
)
def test_only_deadline_bound_drains_delete_past_a_pdb(policy: PdbDeadlinePolicy, reason: str, deletes: bool) -> None:
    assert deletes_past_pdb(policy, reason) is deletes


def test_a_pdb_protected_pod_is_deleted_when_its_grace_stops_fitting() -> None:
    # grace 30, 10 s margin: due 41 s before the deadline (a second early), with its full 30 s even a moment late
    assert seconds_until_pdb_delete(30, 100.0, 10.0) == 59.0
    assert seconds_until_pdb_delete(30, 41.0, 10.0) == 0.0
    assert grace_past_pdb(30, 40.9, 10.0) == Grace(30, 30, GraceSource.PDB_DEADLINE)
    # grace 180 never fits a 120 s notice: due at once, with what remains
    assert seconds_until_pdb_delete(180, 119.0, 10.0) < 0
    assert grace_past_pdb(180, 119.0, 10.0) == Grace(109, 109, GraceSource.PDB_DEADLINE)
    # a grace-0 pod is held by its budget until the margin, then deleted with 0 (its own; never raised)
    assert seconds_until_pdb_delete(0, 15.0, 10.0) == 4.0
    assert grace_past_pdb(0, 10.0, 10.0) == Grace(0, 0, GraceSource.PDB_DEADLINE)
    # late: what is left, never below 0
    assert grace_past_pdb(30, 0.5, 10.0) == Grace(0, 0, GraceSource.PDB_DEADLINE)
