"""The replenisher's pure decision: world in, plan out (no AWS, no table)."""

from __future__ import annotations

import json

from core.kops import Role
from core.ledger import Ledger
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import Note, Operation, Reason, SetCapacity, Terminate, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, failure, group, ids, nodes_for


def test_failure_raises_siblings_evenly_intent_first() -> None:
    a, b, c = group("a", "az-a", 3, ids("a", 1)), group("b", "az-b", 3, ids("b", 3)), group("c", "az-c", 3, ids("c", 3))
    world = World(groups={"a": a, "b": b, "c": c}, nodes=nodes_for(a, b, c), membership_confirmed=True)
    plan = decide(failure("a"), T0, SETTINGS, world)
    kinds = [type(x).__name__ for x in plan.actions]
    assert kinds == ["WriteLedger", "SetCapacity", "SetCapacity", "WriteLedger"]
    intent = plan.actions[0].ledger
    assert intent.compensation.owed == 2 and {d: v.raised_by for d, v in intent.compensation.donors.items()} == {
        "b": 1,
        "c": 1,
    }
    assert all(v.state.value == "intended" for v in intent.compensation.donors.values())
    assert [(x.asg_name, x.desired) for x in plan.actions if isinstance(x, SetCapacity)] == [("b", 4), ("c", 4)]
    assert plan.operation is Operation.REPLENISH


def test_master_failure_is_recorded_never_compensated() -> None:
    m = group("m", "az-a", 1, [], role=Role.CONTROL_PLANE, max_size=1, pool="master")
    m2 = group("m2", "az-b", 1, ids("b", 1), role=Role.CONTROL_PLANE, max_size=1, pool="master")
    plan = decide(failure("m"), T0, SETTINGS, World(groups={"m": m, "m2": m2}, nodes=nodes_for(m2)))
    assert not any(isinstance(x, SetCapacity) for x in plan.actions)
    assert any(isinstance(x, Note) and x.reason is Reason.CONTROL_PLANE for x in plan.actions)
    assert plan.operation is None


def test_lock_held_records_the_failure_only() -> None:
    a, b = group("a", "az-a", 3, []), group("b", "az-b", 3, ids("b", 3))
    world = World(groups={"a": a, "b": b}, lock={"holder": "refresher:r1", "operation": "refresh"})
    plan = decide(failure("a"), T0, SETTINGS, world, lock_free=False)
    assert [type(x) for x in plan.actions] == [WriteLedger, Note]
    assert plan.actions[1].reason is Reason.LOCK_HELD and plan.operation is None


def test_donor_headroom_is_capped_by_the_max_size_factor() -> None:
    a = group("a", "az-a", 5, [])
    b = group("b", "az-b", 3, ids("b", 3), max_size=3)  # cap floor(3 * 2.0) = 6: room for 3
    plan = decide(failure("a"), T0, SETTINGS, World(groups={"a": a, "b": b}, nodes=nodes_for(b)))
    (raise_,) = [x for x in plan.actions if isinstance(x, SetCapacity)]
    assert (raise_.desired, raise_.max_size) == (6, 6)
    assert any(isinstance(x, Note) and x.reason is Reason.PARTIAL_COVER for x in plan.actions)


def test_unregistered_instance_past_provision_time_terminated_without_decrement() -> None:
    b = group("b", "az-b", 2, ids("b", 2))
    stray = b.instances[0].instance_id
    nodes = {k: v for k, v in nodes_for(b).items() if k != stray}
    tick = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")
    plan = decide(tick, T0, SETTINGS, World(groups={"b": b}, nodes=nodes, membership_confirmed=True))
    assert [(x.instance_id, x.decrement) for x in plan.actions if isinstance(x, Terminate)] == [(stray, False)]
    confirmed = {"nodes": nodes, "membership_confirmed": True}
    protected = decide(tick, T0, SETTINGS, World(groups={"b": b}, **confirmed, protected=frozenset({stray})))
    assert not any(isinstance(x, Terminate) for x in protected.actions)
    # the agent's mark stale: the records are only those fresh by their own write, absence proves nothing
    unconfirmed = decide(tick, T0, SETTINGS, World(groups={"b": b}, nodes=nodes))
    assert not any(isinstance(x, Terminate) for x in unconfirmed.actions)
    assert any(isinstance(x, Note) and x.reason is Reason.MEMBERSHIP_UNAVAILABLE for x in unconfirmed.actions)


def test_ledger_round_trips_through_json() -> None:
    a, b = group("a", "az-a", 3, []), group("b", "az-b", 3, ids("b", 3))
    plan = decide(failure("a"), T0, SETTINGS, World(groups={"a": a, "b": b}, nodes=nodes_for(b)))
    written = plan.actions[0].ledger
    assert Ledger.model_validate(json.loads(json.dumps(written.model_dump(mode="json")))) == written


def test_a_group_without_a_ledger_item_has_one_blank_ledger_a_change_never_reaches() -> None:
    world = World(groups={})
    blank = world.ledger("nodes-a")
    assert blank is World(groups={}).ledger("nodes-a") and blank == Ledger(asg_name="nodes-a")
    failed = blank.model_copy(update={"backoff": blank.backoff.model_copy(update={"streak": 1})})
    assert failed.backoff.streak == 1 and world.ledger("nodes-a") == Ledger(asg_name="nodes-a")
    assert world.ledger("nodes-b").asg_name == "nodes-b"
