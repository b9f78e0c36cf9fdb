"""The replenisher's give-back asks are read back and have a deadline (``decide.asks``,
``REPLENISH_GIVE_BACK_TIMEOUT_SECONDS``). Before, a lowering of a raise that never launched was counted returned in
the write after the call, and a lowering, a MaxSize restore or a terminate Auto Scaling refused for good was asked
again at every tick, for good: the compensation never closed and the donor stayed raised. Plain values in, plan out;
each next invocation reads the world as the plan left it (``builders.applied``), the refused resizes undone."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import GiveBackState, Ledger
from core.model import CommandKind
from lambdas.replenisher.decide import decide
from lambdas.replenisher.decide.builder import Plan
from lambdas.replenisher.plan import Note, Reason, SendDrain, SetCapacity, Terminate, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied, ids
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, returning, unlaunched

PAST = timedelta(seconds=SETTINGS.give_back_timeout_seconds + 1)


def _ledger(plan: Plan) -> Ledger:
    return [a for a in plan.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == "a"][-1].ledger


def _sets(plan: Plan) -> list[tuple[str, int | None, int | None]]:
    return [(a.asg_name, a.desired, a.max_size) for a in plan.actions if isinstance(a, SetCapacity)]


def _left_raised(plan: Plan) -> list[Note]:
    return [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.LEFT_RAISED]


def test_a_cancelled_unit_is_returned_only_once_read_back() -> None:
    world = unlaunched()
    plan = decide(TICK, T0, SETTINGS, world)
    assert _sets(plan) == [("b", 2, None)]
    comp = _ledger(plan).compensation
    assert comp is not None
    donor = comp.donors["b"]
    assert (donor.returned, donor.cancel_to, donor.cancelling, donor.asked_since) == (1, 2, 1, T0)
    # the ask is recorded before it is made
    first_write = next(i for i, a in enumerate(plan.actions) if isinstance(a, WriteLedger))
    assert first_write < next(i for i, a in enumerate(plan.actions) if isinstance(a, SetCapacity))
    plan = decide(TICK, T0 + timedelta(minutes=1), SETTINGS, applied(world, plan))
    comp = _ledger(plan).compensation
    assert comp is not None and comp.donors["b"].returned == 2 and comp.donors["b"].cancel_to is None


def test_a_refused_cancel_is_not_counted_and_asked_again_within_its_deadline() -> None:
    world = unlaunched()
    plan = decide(TICK, T0, SETTINGS, world)
    plan = decide(TICK, T0 + timedelta(minutes=5), SETTINGS, applied(world, plan, refused={"b"}))
    assert _sets(plan) == [("b", 2, None)]
    comp = _ledger(plan).compensation
    assert comp is not None
    assert (comp.donors["b"].returned, comp.donors["b"].asked_since) == (1, T0)  # the deadline counts from the first


def test_a_cancel_refused_past_the_deadline_closes_the_compensation_with_the_unit_left_raised() -> None:
    world = unlaunched()
    plan = decide(TICK, T0, SETTINGS, world)
    world = applied(world, plan, refused={"b"})
    plan = decide(TICK, T0 + PAST, SETTINGS, world)
    assert _sets(plan) == []  # nothing more asked
    ledger = _ledger(plan)
    assert ledger.compensation is None
    (left,) = ledger.left_raised
    assert (left.donor, left.units, left.desired, left.max_size, left.max_before) == ("b", 1, 3, 4, 3)
    (note,) = _left_raised(plan)
    assert note.units == 2 and "b" in note.detail  # the unit and the MaxSize: CapacityLeftRaised


def test_a_maxsize_restore_refused_past_the_deadline_is_left_raised() -> None:
    world = unlaunched()
    for tick in range(2):  # the cancel, then the restore asked
        plan = decide(TICK, T0 + timedelta(minutes=tick), SETTINGS, world)
        world = applied(world, plan, refused={"b"} if tick else ())
    assert _sets(plan) == [("b", None, 3)]
    comp = _ledger(plan).compensation
    assert comp is not None and comp.donors["b"].max_asked == 3
    plan = decide(TICK, T0 + timedelta(minutes=1) + PAST, SETTINGS, world)
    assert _sets(plan) == []
    ledger = _ledger(plan)
    assert ledger.compensation is None
    (left,) = ledger.left_raised
    assert (left.units, left.max_size) == (0, 4)


def _terminating() -> World:
    """b's compensating instance drained and ``terminating``, still in b (the terminate refused)."""
    return returning(3, 0, GiveBackState.TERMINATING)


def test_a_terminate_refused_past_the_deadline_keeps_the_instance_uncordoned_and_left_raised() -> None:
    world = _terminating()
    plan = decide(TICK, T0, SETTINGS, world)
    asked = next(i for i, a in enumerate(plan.actions) if isinstance(a, Terminate))
    world = applied(world, Plan(plan.actions[:asked]))  # refused: the plan stopped there
    comp = world.ledgers["a"].compensation
    assert comp is not None and comp.donors["b"].asked_since == T0
    plan = decide(TICK, T0 + timedelta(minutes=5), SETTINGS, world)
    assert [a.instance_id for a in plan.actions if isinstance(a, Terminate)] == [ids("b", 3)[2]]  # asked again
    plan = decide(TICK, T0 + PAST, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    uncordons = [a.command for a in plan.actions if isinstance(a, SendDrain)]
    assert [(c.kind, c.instance_id) for c in uncordons] == [(CommandKind.UNCORDON, ids("b", 3)[2])]
    ledger = _ledger(plan)
    assert ledger.compensation is None
    assert [(left.donor, left.units, left.max_size) for left in ledger.left_raised] == [("b", 1, 4)]


def test_a_give_back_making_progress_starts_its_deadline_over() -> None:
    world = unlaunched()
    plan = decide(TICK, T0, SETTINGS, world)
    world = applied(world, plan)  # the cancel read back at the next invocation, long after it was asked
    plan = decide(TICK, T0 + PAST, SETTINGS, world)
    assert not _left_raised(plan)
    assert _sets(plan) == [("b", None, 3)]
    comp = _ledger(plan).compensation
    assert comp is not None and comp.donors["b"].asked_since == T0 + PAST


def test_a_give_back_closed_out_hands_its_maxsize_raise_to_a_ledger_still_carrying_the_donor() -> None:
    """b also carries a raise for c (MaxSize 3, below a's 4): a's close-out leaves MaxSize to c, whose restore must
    know the highest MaxSize a raise set (else it reads b's 4 as kOps' and never restores it)."""
    world = _terminating()
    plan = decide(TICK, T0, SETTINGS, world)
    world = applied(
        world, Plan(plan.actions[: next(i for i, a in enumerate(plan.actions) if isinstance(a, Terminate))])
    )
    a = world.ledgers["a"]
    assert a.compensation is not None
    carried = a.compensation.donors["b"].model_copy(
        update={"raised_by": 1, "returned": 0, "max_target": 3, "asked_since": None, "instance_ids": ()}
    )
    c = a.model_copy(
        update={
            "asg_name": "c",
            "compensation": a.compensation.model_copy(
                update={"returning": False, "give_back": {}, "donors": {"b": carried}}
            ),
        }
    )
    plan = decide(TICK, T0 + PAST, SETTINGS, replace(world, ledgers={**world.ledgers, "c": c}))
    assert _left_raised(plan)
    c_written = [x.ledger for x in plan.actions if isinstance(x, WriteLedger) and x.ledger.asg_name == "c"]
    assert c_written and c_written[-1].compensation is not None
    assert c_written[-1].compensation.donors["b"].max_target == 4
