"""helper-143's review of ``give_back.held_by_none`` (resize seed 360727's fix): two ledgers on one donor, a unit
with no instance of its own next to another ledger's, a Spot reclaim of the instance chosen, a MinSize raised under
it, the later ticks to the clearing. Each world is stepped tick by tick: the ledgers as written, the resizes done,
the terminates applied (with their decrement), every drain sent read back ``succeeded``. Plain values in, plans
out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import GiveBackState
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SendDrain, Terminate, WriteLedger
from lambdas.replenisher.world import Instance, World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied
from tests.unit.lambdas.replenisher.decide.reality_world import TICK
from tests.unit.lambdas.replenisher.decide.two_ledgers_world import (
    B_IDS,
    R_ID,
    Y_A,
    b_group,
    comp,
    donor,
    entry,
    run,
    step,
    world_of,
)


def test_two_returning_ledgers_each_give_back_one_distinct_instance_and_the_donor_ends_at_its_own_size() -> None:
    """b (own size 3) at 5, its 5 instances the baseline of both raises (each kept one the donor was losing): a and c
    each give back one, never the same, and together no more than the 2 b holds above its own size."""
    base = tuple(B_IDS)
    world = world_of(
        b_group(5, B_IDS),
        {"a": comp(donor(1, base), True), "c": comp(donor(1, base, minutes=5), True)},
    )
    first = decide(TICK, T0, SETTINGS, world)
    drained = [a.command.instance_id for a in first.actions if isinstance(a, SendDrain)]
    assert len(drained) == 2 and len(set(drained)) == 2
    end, plans = run(world, 6)
    assert end.groups["b"].desired == 3 and len(end.groups["b"].active) == 3
    assert all(led.compensation is None for led in end.ledgers.values())
    terminated = [a.instance_id for p in plans for a in p.actions if isinstance(a, Terminate)]
    assert sorted(terminated) == sorted(drained)


def test_two_returning_ledgers_on_a_donor_holding_one_unit_take_only_one() -> None:
    """The same, b at 4 (someone lowered it by one): one instance given back in all, b never below its own size."""
    base = tuple(B_IDS[:4])
    world = world_of(
        b_group(4, B_IDS[:4]),
        {"a": comp(donor(1, base), True), "c": comp(donor(1, base, minutes=5), True)},
    )
    end, plans = run(world, 8)
    terminated = [a.instance_id for p in plans for a in p.actions if isinstance(a, Terminate)]
    assert len(terminated) <= 1
    assert end.groups["b"].desired == 3
    assert all(led.compensation is None for led in end.ledgers.values())


# -- a unit whose instance left while another ledger still carries one on the donor --------------------------------


def two_carried_one_held(c_returning: bool) -> World:
    """b own size 3 (kOps clamped it from 4), raised by 1 for c before Auto Scaling terminated the clamp's instance
    (the raise kept it: c holds no instance of its own), then by 1 for a (its instance ``Y_A``; b0..b3 its baseline).
    a is giving back; Auto Scaling took ``Y_A`` while it drained, for a lowering of b's desired capacity 5 -> 4 by
    someone else. b holds one unit above its own size; a and c each believe it theirs."""
    b = b_group(4, B_IDS[:4])
    a_comp = comp(
        donor(1, tuple(B_IDS[:4]), (Y_A,)),
        True,
        {Y_A: entry(Y_A, GiveBackState.DRAINING)},
    )
    c_comp = comp(donor(1, tuple(B_IDS[:4]), (), minutes=-5), c_returning)
    return world_of(b, {"a": a_comp, "c": c_comp}, c_short=not c_returning)


def test_a_donor_holding_one_unit_for_two_returning_ledgers_ends_at_its_own_size() -> None:
    """Both giving back, neither with an instance of its own: the unit b holds is given back (or written off) within a
    few ticks, the compensations cleared, b at its own size. Before: each waited for the other's unit (``others``
    in held_by_none's count), for good (invariant 8)."""
    end, _ = run(two_carried_one_held(c_returning=True), 10)
    assert {n: led.compensation is None for n, led in end.ledgers.items()} == {"a": True, "c": True}
    assert end.groups["b"].desired == 3


def test_a_returning_ledger_is_not_held_by_another_ledgers_compensation_on_the_same_donor() -> None:
    """c still short (its compensation open for as long as its AZ's outage): a's give-back ends anyway, within a few
    ticks, and b keeps the unit c carries."""
    end, _ = run(two_carried_one_held(c_returning=False), 10)
    assert end.ledgers["a"].compensation is None
    assert end.groups["b"].desired == 4
    c = end.ledgers["c"].compensation
    assert c is not None and c.donors["b"].raised_by - c.donors["b"].returned == 1


# -- the instance chosen: reclaimed while it drains, MinSize raised under it -----------------------------------------


def held_by_none_world() -> World:
    """a (whole) giving back the unit b (own size 3, desired 4) holds for it with no instance of its own."""
    return world_of(b_group(4, B_IDS[:4]), {"a": comp(donor(1, tuple(B_IDS[:4])), True)})


def test_the_instance_chosen_reclaimed_while_it_drains_its_replacement_is_given_back() -> None:
    world = held_by_none_world()
    plan = decide(TICK, T0, SETTINGS, world)
    chosen = [a.command.instance_id for a in plan.actions if isinstance(a, SendDrain)]
    assert chosen == [B_IDS[0]]
    world = applied(world, plan)
    # Spot reclaims it; Auto Scaling launches a replacement (desired unchanged)
    b = world.groups["b"]
    instances = (*(i for i in b.instances if i.instance_id != B_IDS[0]), Instance(R_ID, "us-east-1b", "Pending"))
    world = replace(world, groups={**world.groups, "b": replace(b, instances=instances)})
    plan = decide(TICK, T0 + timedelta(minutes=1), SETTINGS, world)
    assert [a.command.instance_id for a in plan.actions if isinstance(a, SendDrain)] == [R_ID]
    end, _ = run(step(world, plan), 4)
    assert end.ledgers["a"].compensation is None
    assert end.groups["b"].desired == 3


def test_the_replacement_not_launched_yet_is_cancelled_not_taken_from_the_baseline() -> None:
    """The same reclaim, Auto Scaling's replacement not listed yet (desired 4, 3 active): the unit is cancelled by
    lowering desired to 3; no other instance of b is drained."""
    world = held_by_none_world()
    world = applied(world, decide(TICK, T0, SETTINGS, world))
    b = world.groups["b"]
    world = replace(world, groups={**world.groups, "b": replace(b, instances=b.instances[1:])})
    plan = decide(TICK, T0 + timedelta(minutes=1), SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, SendDrain)]
    end, _ = run(step(world, plan), 4)
    assert end.ledgers["a"].compensation is None
    assert end.groups["b"].desired == 3


def test_min_size_raised_under_the_instance_chosen_keeps_it_and_clears() -> None:
    """kOps raises b's MinSize to 4 while the instance chosen drains: it is kept (uncordoned), nothing terminated,
    the compensation cleared."""
    world = held_by_none_world()
    world = step(world, decide(TICK, T0, SETTINGS, world))
    world = replace(world, groups={**world.groups, "b": replace(world.groups["b"], min_size=4)})
    end, plans = run(world, 4)
    assert not [a for p in plans for a in p.actions if isinstance(a, Terminate)]
    assert end.ledgers["a"].compensation is None
    assert end.groups["b"].desired == 4


def test_the_later_ticks_terminate_once_count_returned_once_and_clear() -> None:
    world = held_by_none_world()
    end, plans = run(world, 5)
    terminated = [a for p in plans for a in p.actions if isinstance(a, Terminate)]
    assert [(t.instance_id, t.decrement) for t in terminated] == [(B_IDS[0], True)]
    at_terminate = next(p for p in plans if any(isinstance(a, Terminate) for a in p.actions))
    writes = [a.ledger for a in at_terminate.actions if isinstance(a, WriteLedger)]
    # the terminate recorded (``terminating``) before it is asked; the plan then clears (nothing left to restore)
    assert writes[0].compensation is not None
    assert writes[0].compensation.give_back[B_IDS[0]].state is GiveBackState.TERMINATING
    assert writes[-1].compensation is None
    assert end.ledgers["a"].compensation is None
    assert end.groups["b"].desired == 3


def test_the_earlier_raise_keeps_the_unit_a_donor_lowered_under_two_ledgers_holds() -> None:
    """As above, c raised b after a (and still short): a gives back the unit b holds (an instance of b's, drained),
    b goes to its own size, and c's record is then lowered to what b holds for it (``reconcile_donors``), as a donor
    lowered under two raises is shared earliest first."""
    world = two_carried_one_held(c_returning=False)
    c_led = world.ledgers["c"]
    assert c_led.compensation is not None
    later = c_led.compensation.donors["b"].model_copy(update={"raised_at": T0 - timedelta(minutes=30)})
    c_comp = c_led.compensation.model_copy(update={"donors": {"b": later}})
    world = replace(world, ledgers={**world.ledgers, "c": c_led.model_copy(update={"compensation": c_comp})})
    end, plans = run(world, 10)
    assert len([a for p in plans for a in p.actions if isinstance(a, Terminate)]) == 1
    assert end.ledgers["a"].compensation is None
    assert end.groups["b"].desired == 3
    c = end.ledgers["c"].compensation
    assert c is not None and c.donors["b"].raised_by == c.donors["b"].returned


def test_a_lowering_asked_earlier_in_the_plan_is_not_counted_against_the_later_ledger() -> None:
    """b own size 3 at 5 with 4 instances (all the baseline of both raises): a (raised first) cancels its unit that
    never launched, lowering b to 4 in this plan; c (raised later) still gives back the unit b holds for it, and is
    not read as resized by someone else (the lowering is a's, not yet read back as returned). Both clear, b at 3."""
    base = tuple(B_IDS[:4])
    world = world_of(
        b_group(5, B_IDS[:4]),
        {"a": comp(donor(1, base), True), "c": comp(donor(1, base, minutes=5), True)},
    )
    end, plans = run(world, 8)
    assert [a.instance_id for p in plans for a in p.actions if isinstance(a, Terminate)] == [B_IDS[0]]
    assert not any(
        "resized by someone else" in n
        for p in plans
        for a in p.actions
        if isinstance(a, WriteLedger) and a.ledger.compensation
        for n in a.ledger.compensation.notes
    )
    assert all(led.compensation is None for led in end.ledgers.values())
    assert end.groups["b"].desired == 3


def test_no_instance_is_taken_for_a_unit_held_by_none_while_an_active_run_cannot_be_read() -> None:
    """An active ``RUN#`` item that did not validate: what it protects (``World.protected``), surges or is busy in is
    unknown, so no instance of b is picked for the unit (the cleanup waits alike); it is once the run reads again."""
    world = replace(held_by_none_world(), runs_unreadable=True)
    assert not [a for a in decide(TICK, T0, SETTINGS, world).actions if isinstance(a, SendDrain)]
    drained = decide(TICK, T0, SETTINGS, replace(world, runs_unreadable=False)).actions
    assert [a.command.instance_id for a in drained if isinstance(a, SendDrain)] == [B_IDS[0]]
