"""Rule 3b (lambdas.replenisher.decide.reality) and the give-back's floor: plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Compensation, Donor, DonorState, GiveBack, GiveBackState, Ledger
from core.model import CommandKind
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import Note, Reason, SendDrain, SetCapacity, Terminate, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids, nodes_for

TICK = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")


def _world(b_desired: int, b_max: int, *, b_min: int = 0) -> tuple[World, list[str]]:
    a = group("a", "z-a", 3, ids("a", 1))  # short of 2, in backoff below
    b_ids = ids("b", b_desired)
    b = replace(group("b", "z-b", b_desired, b_ids, max_size=b_max), min_size=b_min)
    c = group("c", "z-c", 2, ids("c", 2))
    led = Ledger(
        asg_name="a",
        version=3,
        backoff=Ledger(asg_name="a").backoff.model_copy(
            update={"last_failure_at": T0 - timedelta(minutes=1), "window_seconds": 300, "streak": 1}
        ),
        compensation=Compensation(
            owed=2,
            started_at=T0 - timedelta(minutes=5),
            donors={
                "b": Donor(
                    asg_name="b",
                    state=DonorState.RAISED,
                    raised_by=2,
                    desired_before=2,
                    max_before=3,
                    desired_target=4,
                    max_target=4,
                    raised_at=T0 - timedelta(minutes=5),
                    baseline_ids=tuple(ids("b", 2)),
                    instance_ids=tuple(ids("b", 4)[2:]),
                )
            },
        ),
    )
    world = World(groups={"a": a, "b": b, "c": c}, ledgers={"a": led}, nodes=nodes_for(a, b, c))
    return world, b_ids


def test_a_donor_holding_what_it_carries_is_not_a_reset() -> None:
    world, _ = _world(4, 4)
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.SIZE_RESET]
    assert not [a for a in plan.actions if isinstance(a, SetCapacity)]


def test_a_reset_donor_is_noted_lowered_and_the_shortfall_moves_to_another_sibling() -> None:
    world, _ = _world(2, 2)  # kOps put b back to 2/2 under the raise
    plan = decide(TICK, T0, SETTINGS, world)
    notes = [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.SIZE_RESET]
    assert len(notes) == 1 and "b holds 0 of the 2" in notes[0].detail
    sets = [a for a in plan.actions if isinstance(a, SetCapacity)]
    assert [(s.asg_name, s.desired) for s in sets] == [("c", 4)]  # c covers; b is not raised again
    final = [a for a in plan.actions if isinstance(a, WriteLedger)][-1].ledger.compensation
    assert final is not None
    assert final.donors["b"].raised_by == 0 and final.donors["b"].reset_at == T0
    assert final.donors["b"].desired_before == 2 and final.donors["b"].max_before == 2
    assert final.donors["c"].raised_by == 2


def test_a_reset_donor_is_not_raised_again_within_the_hold() -> None:
    world, _ = _world(2, 2)
    c = world.groups["c"]
    world = replace(world, groups={**world.groups, "c": replace(c, desired=4, max_size=2)})  # no headroom in c
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, SetCapacity) and a.asg_name == "b"]
    assert any(isinstance(a, Note) and a.reason is Reason.NO_HEALTHY_SIBLING for a in plan.actions)


def _returning(b_desired: int, b_min: int, state: GiveBackState) -> World:
    world, b_ids = _world(b_desired, 4, b_min=b_min)
    led = world.ledgers["a"]
    assert led.compensation is not None
    iid = b_ids[-1]
    comp = led.compensation.model_copy(
        update={
            "returning": True,
            "give_back": {
                iid: GiveBack(
                    instance_id=iid,
                    donor="b",
                    command_id=f"giveback-{iid}",
                    state=state,
                    deadline=T0 - timedelta(minutes=1),
                    updated_at=T0 - timedelta(minutes=2),
                )
            },
            "donors": {
                "b": led.compensation.donors["b"].model_copy(
                    update={"raised_by": 1, "instance_ids": (iid,), "desired_before": b_desired - 1}
                )
            },
        }
    )
    a = replace(world.groups["a"], instances=world.groups["a"].instances * 3)
    return replace(world, groups={**world.groups, "a": a}, ledgers={"a": led.model_copy(update={"compensation": comp})})


def test_a_terminate_that_would_cross_min_size_keeps_the_instance_and_uncordons_it() -> None:
    world = _returning(3, 3, GiveBackState.TERMINATING)  # a person raised b's MinSize to 3
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    uncordons = [a for a in plan.actions if isinstance(a, SendDrain) and a.command.kind is CommandKind.UNCORDON]
    assert len(uncordons) == 1
    assert any(isinstance(a, Note) and a.reason is Reason.SIZE_RESET for a in plan.actions)


def test_the_same_terminate_above_min_size_goes_ahead() -> None:
    world = _returning(3, 2, GiveBackState.TERMINATING)
    plan = decide(TICK, T0, SETTINGS, world)
    assert [a.asg_name for a in plan.actions if isinstance(a, Terminate)] == ["b"]


def test_a_terminated_instance_still_in_its_donor_is_retried() -> None:
    world = _returning(3, 2, GiveBackState.TERMINATED)  # recorded given back, but Auto Scaling still has it
    plan = decide(TICK, T0, SETTINGS, world)
    assert any(isinstance(a, Note) and a.reason is Reason.UNVERIFIED for a in plan.actions)
    assert [a.asg_name for a in plan.actions if isinstance(a, Terminate)] == ["b"]


def test_a_raised_unit_that_never_launched_is_cancelled_and_the_compensation_cleared() -> None:
    # sim seed 26 of the lock profile: b was raised by 2 for a, launched one (given back already), then its own AZ
    # failed; the second unit never launched, and the give-back waited for an instance that could not come
    world, _ = _world(3, 4)
    b = world.groups["b"]
    b = replace(b, instances=b.instances[:2])  # its baseline only: desired 3, 2 InService
    led = world.ledgers["a"]
    assert led.compensation is not None
    gone = ids("b", 4)[2]
    comp = led.compensation.model_copy(
        update={
            "returning": True,
            "give_back": {
                gone: GiveBack(
                    instance_id=gone,
                    donor="b",
                    command_id=f"giveback-{gone}",
                    state=GiveBackState.TERMINATED,
                    deadline=T0 - timedelta(minutes=1),
                    updated_at=T0 - timedelta(minutes=2),
                )
            },
            "donors": {"b": led.compensation.donors["b"].model_copy(update={"instance_ids": (gone,), "returned": 1})},
        }
    )
    a = replace(world.groups["a"], instances=world.groups["a"].instances * 3)
    world = replace(
        world, groups={**world.groups, "a": a, "b": b}, ledgers={"a": led.model_copy(update={"compensation": comp})}
    )
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    sets = [(s.asg_name, s.desired, s.max_size) for s in plan.actions if isinstance(s, SetCapacity)]
    assert sets == [("b", 2, None), ("b", None, 3)]  # the unlaunched unit cancelled, then MaxSize restored
    final = [a for a in plan.actions if isinstance(a, WriteLedger)][-1].ledger.compensation
    assert final is None
