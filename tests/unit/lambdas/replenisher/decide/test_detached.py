"""Rule 10 (lambdas.replenisher.decide.detached): detached instances never left running. Plain values in, plan out."""

from __future__ import annotations

from datetime import timedelta

from core.detach import DetachState
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import MarkDetach, Note, Operation, Reason, TerminateDetached
from lambdas.replenisher.world import Detached, World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids, nodes_for

TICK = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")
CLUSTER = SETTINGS.cluster_name


def _world(*records: Detached) -> World:
    b = group("b", "z-b", 2, ids("b", 2))
    return World(groups={"b": b}, nodes=nodes_for(b), detached={r.instance_id: r for r in records})


def _record(iid: str, minutes_ago: float, **kw: object) -> Detached:
    base: dict[str, object] = {
        "instance_id": iid,
        "asg_name": "b",
        "state": "detached",
        "recorded_at": T0 - timedelta(minutes=minutes_ago),
        "asked": True,
        "ec2_state": "running",
        "cluster_tag": CLUSTER,
    }
    base.update(kw)
    return Detached(**base)  # type: ignore[arg-type]  # test values of the right types


def test_running_past_its_deadline_is_marked_terminated_and_marked_again() -> None:
    plan = decide(TICK, T0, SETTINGS, _world(_record("i-d1", 16)))
    effects = [a for a in plan.actions if isinstance(a, (MarkDetach, TerminateDetached))]
    assert [type(a).__name__ for a in effects] == ["MarkDetach", "TerminateDetached", "MarkDetach"]
    assert [a.state for a in effects if isinstance(a, MarkDetach)] == [DetachState.TERMINATING, DetachState.TERMINATED]
    assert plan.operation is Operation.SURPLUS_CLEANUP


def test_within_its_deadline_nothing_happens() -> None:
    plan = decide(TICK, T0, SETTINGS, _world(_record("i-d1", 14, asked=False, ec2_state=None, cluster_tag=None)))
    assert not [a for a in plan.actions if isinstance(a, (MarkDetach, TerminateDetached))]


def test_reclaimed_is_recorded_gone() -> None:
    plan = decide(
        TICK, T0, SETTINGS, _world(_record("i-d1", 16, ec2_state="terminated"), _record("i-d2", 16, ec2_state=None))
    )
    assert [(a.instance_id, a.state) for a in plan.actions if isinstance(a, MarkDetach)] == [
        ("i-d1", DetachState.GONE),
        ("i-d2", DetachState.GONE),
    ]
    assert not [a for a in plan.actions if isinstance(a, TerminateDetached)]


def test_settled_records_and_other_clusters_instances_are_left_alone() -> None:
    plan = decide(
        TICK,
        T0,
        SETTINGS,
        _world(
            _record("i-d1", 60, state="terminated"),
            _record("i-d2", 60, state="gone"),
            _record("i-d3", 60, cluster_tag="other.k8s.local"),
        ),
    )
    assert not [a for a in plan.actions if isinstance(a, (MarkDetach, TerminateDetached))]
    assert any(isinstance(a, Note) and a.reason is Reason.PROTECTED and "i-d3" in a.detail for a in plan.actions)


def test_a_crash_after_terminating_is_redone() -> None:
    plan = decide(TICK, T0, SETTINGS, _world(_record("i-d1", 20, state="terminating")))
    assert [a.instance_id for a in plan.actions if isinstance(a, TerminateDetached)] == ["i-d1"]


def test_at_most_cleanup_limit_per_invocation() -> None:
    records = [_record(f"i-d{k}", 20) for k in range(4)]
    plan = decide(TICK, T0, SETTINGS, _world(*records))
    assert len([a for a in plan.actions if isinstance(a, TerminateDetached)]) == SETTINGS.cleanup_limit
    assert any(isinstance(a, Note) and a.reason is Reason.CLEANUP_LIMIT for a in plan.actions)


def test_an_intended_record_whose_detach_happened_is_swept_too() -> None:
    """DetachInstances went through but the ``detached`` mark did not (refused, the function ended) and the warning's
    redelivery came too late to complete it: the instance runs outside every group; past its deadline it is
    terminated like a ``detached`` one."""
    plan = decide(TICK, T0, SETTINGS, _world(_record("i-d1", 16, state="intended")))
    assert [a.instance_id for a in plan.actions if isinstance(a, TerminateDetached)] == ["i-d1"]


def test_an_intended_record_whose_detach_never_happened_leaves_the_instance_in_its_group() -> None:
    in_group = ids("b", 2)[0]
    plan = decide(TICK, T0, SETTINGS, _world(_record(in_group, 16, state="intended")))
    assert not [a for a in plan.actions if isinstance(a, TerminateDetached)]
    assert any(isinstance(a, Note) and a.reason is Reason.PROTECTED and in_group in a.detail for a in plan.actions)
