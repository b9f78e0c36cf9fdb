"""Rule 3b (lambdas.replenisher.decide.reality) and the give-back's floor: plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import GiveBackState
from core.model import CommandKind
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import Note, Reason, SendDrain, SetCapacity, Terminate, WriteLedger
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, unlaunched
from tests.unit.lambdas.replenisher.decide.reality_world import reset_world as _world
from tests.unit.lambdas.replenisher.decide.reality_world import returning as _returning


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
    world = unlaunched()
    sets = []
    for tick in range(3):  # each ask read back by the next invocation before the next is made
        plan = decide(TICK, T0 + timedelta(minutes=tick), SETTINGS, world)
        assert not [a for a in plan.actions if isinstance(a, Terminate)]
        sets += [(s.asg_name, s.desired, s.max_size) for s in plan.actions if isinstance(s, SetCapacity)]
        world = applied(world, plan)
    assert sets == [("b", 2, None), ("b", None, 3)]  # the unlaunched unit cancelled, then MaxSize restored
    final = [a for a in plan.actions if isinstance(a, WriteLedger)][-1].ledger.compensation
    assert final is None


def test_a_min_size_raised_under_the_raise_makes_those_units_the_donors_own() -> None:
    # storm seed 300032: kOps wrote b's MinSize up to its raised size, desired capacity kept; the raise looked held,
    # but b would now run those instances without us: they cover none of a's shortfall
    world, _ = _world(4, 4, b_min=3)
    plan = decide(TICK, T0, SETTINGS, world)
    notes = [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.SIZE_RESET]
    assert len(notes) == 1 and "b holds 1 of the 2" in notes[0].detail
    sets = [a for a in plan.actions if isinstance(a, SetCapacity)]
    assert [(s.asg_name, s.desired) for s in sets] == [("c", 3)]  # c covers the unit b's floor took
    final = [a for a in plan.actions if isinstance(a, WriteLedger)][-1].ledger.compensation
    assert final is not None
    assert final.donors["b"].raised_by == 1 and final.donors["b"].desired_before == 3
    assert final.donors["b"].reset_at == T0
    assert final.donors["c"].raised_by == 1


def test_a_min_size_at_the_size_before_the_raise_is_no_reset() -> None:
    world, _ = _world(4, 4, b_min=2)
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.SIZE_RESET]
    assert not [a for a in plan.actions if isinstance(a, SetCapacity)]


def test_a_max_size_above_every_raise_of_ours_becomes_the_donors_own() -> None:
    # resize seed 358113: kOps wrote b's MaxSize 6 over our raise to 4; a later raise of ours would hide it from
    # ``original_max`` and the give-back would restore towards 3, below kOps' MaxSize
    world, _ = _world(4, 6)
    plan = decide(TICK, T0, SETTINGS, world)
    written = [a.ledger.compensation for a in plan.actions if isinstance(a, WriteLedger)]
    assert written and written[-1] is not None
    assert written[-1].donors["b"].max_before == 6 and written[-1].donors["b"].max_target == 6
    assert written[-1].donors["b"].raised_by == 2  # what it carries is unchanged
    assert not [a for a in plan.actions if isinstance(a, SetCapacity)]


def test_a_max_size_within_our_raise_stays_ours_to_restore() -> None:
    world, _ = _world(4, 4)
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, WriteLedger)]
