"""A give-back's terminate recorded (``terminating``) while its instance left the donor some other way: judged by
the donor's desired capacity (``decide.give_back._left_while_terminating``), never counted returned on the record's
word. Plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Donor, DonorState, GiveBackState
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import Note, Reason, SendDrain, SetCapacity, Terminate, WriteLedger
from lambdas.replenisher.world import Instance, World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied, ids
from tests.unit.lambdas.replenisher.decide.reality_world import TICK
from tests.unit.lambdas.replenisher.decide.reality_world import returning as _returning

REPLACEMENT = "i-0000e0e1"


def _left(desired: int, *, replacement: bool = False) -> World:
    """b's own size 2, raised by 1 for a, its compensating instance ``terminating`` and gone from b; b now at
    ``desired`` (3: nothing decremented; 2: the decrement happened)."""
    world = _returning(3, 0, GiveBackState.TERMINATING)
    b = world.groups["b"]
    kept = tuple(i for i in b.instances if i.instance_id != ids("b", 3)[2])
    if replacement:
        kept += (Instance(REPLACEMENT, "z-b", "InService"),)
    return replace(world, groups={**world.groups, "b": replace(b, instances=kept, desired=desired)})


def _final(plan_actions: list[object]) -> WriteLedger:
    return [a for a in plan_actions if isinstance(a, WriteLedger)][-1]


def test_a_decrement_that_happened_is_returned_and_the_compensation_cleared() -> None:
    world = _left(2)
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, SetCapacity) and a.desired is not None]
    assert not [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.UNVERIFIED]
    # the MaxSize restore is asked, and the compensation cleared once the next invocation reads it back
    assert [(a.asg_name, a.max_size) for a in plan.actions if isinstance(a, SetCapacity)] == [("b", 3)]
    plan = decide(TICK, T0 + timedelta(minutes=1), SETTINGS, applied(world, plan))
    assert _final(plan.actions).ledger.compensation is None


def test_no_decrement_and_nothing_launched_yet_lowers_the_donor_to_its_own_size() -> None:
    plan = decide(TICK, T0, SETTINGS, _left(3))
    assert [(a.asg_name, a.desired) for a in plan.actions if isinstance(a, SetCapacity) and a.desired] == [("b", 2)]
    notes = [a.detail for a in plan.actions if isinstance(a, Note) and a.reason is Reason.UNVERIFIED]
    assert len(notes) == 1 and "shows no decrement" in notes[0]
    comp = next(a for a in plan.actions if isinstance(a, WriteLedger)).ledger.compensation
    assert comp is not None and comp.give_back[ids("b", 3)[2]].state is GiveBackState.GONE


def test_no_decrement_and_a_replacement_launched_gives_the_replacement_back() -> None:
    plan = decide(TICK, T0, SETTINGS, _left(3, replacement=True))
    drains = [a.command.instance_id for a in plan.actions if isinstance(a, SendDrain)]
    assert drains == [REPLACEMENT]
    comp = _final(plan.actions).ledger.compensation
    assert comp is not None and comp.give_back[REPLACEMENT].state is GiveBackState.DRAINING
    assert not [a for a in plan.actions if isinstance(a, Terminate)]


def test_a_donor_raised_for_two_ledgers_counts_only_this_ledger_s_units() -> None:
    # b also carries 1 for another failed group c: own 2, + 1 for a, + 1 for c = 4; a's unit decremented -> 3
    world = _left(3)
    other = world.ledgers["a"].model_copy(update={"asg_name": "c"})
    comp = other.compensation
    assert comp is not None
    donor = Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=2,
        max_before=3,
        desired_target=4,
        max_target=4,
        raised_at=T0,
    )
    other = other.model_copy(
        update={"compensation": comp.model_copy(update={"returning": False, "give_back": {}, "donors": {"b": donor}})}
    )
    world = replace(world, ledgers={**world.ledgers, "c": other})
    plan = decide(TICK, T0, SETTINGS, world)
    a_ledgers = [a.ledger for a in plan.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == "a"]
    assert a_ledgers and a_ledgers[-1].compensation is None  # a's unit returned, c's left in b
    assert not [a for a in plan.actions if isinstance(a, SetCapacity) and a.asg_name == "b" and a.desired == 2]
