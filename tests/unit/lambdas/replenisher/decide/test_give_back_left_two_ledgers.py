"""helper-144's review of ``give_back._left_while_terminating`` on a donor raised for two ledgers: a give-back entry
``terminating`` whose instance left the donor without the decrement, judged by the donor's desired capacity while
another ledger's lowering (a raised unit that never launched, cancelled) is read in that capacity but not yet read
back as ``returned``. Each world is stepped tick by tick as ``two_ledgers_world.run`` steps it."""

from __future__ import annotations

from dataclasses import replace

from core.ledger import GiveBackState
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SendDrain, SetCapacity, Terminate, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, nodes_for
from tests.unit.lambdas.replenisher.decide.reality_world import TICK
from tests.unit.lambdas.replenisher.decide.two_ledgers_world import (
    B_IDS,
    b_group,
    comp,
    donor,
    entry,
    run,
    world_of,
)

Y_A = "i-0aaaaaaa"  # launched for a's raise
Y_C = "i-0ccccccc"  # launched for c's raise; Spot-reclaimed while its give-back terminate was pending


def cancel_and_left() -> World:
    """b own size 3 (b0..b2, the baseline of both raises), raised by 1 for a (its unit never launched: b's AZ could
    not launch) and then by 1 for c (its instance ``Y_C``): desired 5. Both are giving back; c's terminate of ``Y_C``
    is recorded (``terminating``) but was never asked (the invocation ended first), and Spot took ``Y_C`` meanwhile:
    no decrement, b still at 5 with 3 instances. b holds one unit for a (to cancel) and one for c (a replacement to
    come): both are to be given back, b to end at 3."""
    base = tuple(B_IDS[:3])
    a_comp = comp(donor(1, base), True)
    c_comp = comp(donor(1, base, (Y_C,), minutes=5), True, {Y_C: entry(Y_C, GiveBackState.TERMINATING)})
    return world_of(b_group(5, B_IDS[:3]), {"a": a_comp, "c": c_comp})


def test_a_lowering_another_ledger_asked_is_not_taken_for_the_decrement_of_an_instance_that_left() -> None:
    """a cancels its unit (b 5 -> 4) earlier in the plan; c's ``Y_C`` left without a decrement, so b's 4 still holds
    c's unit (Auto Scaling launches a replacement for it). Counting a's cancelling unit as still carried by a
    (``others_carry`` before ``asks.carried``) read b's 4 as holding nothing for c: ``Y_C`` counted decremented, c
    cleared, a cleared once its lowering read back, and b left at 4 for good with nothing recording the unit."""
    world = cancel_and_left()
    first = decide(TICK, T0, SETTINGS, world)
    # a's unit cancelled (5 -> 4), then c's, its instance gone without a decrement (4 -> 3)
    lowered = [(a.asg_name, a.desired) for a in first.actions if isinstance(a, SetCapacity) and a.desired]
    assert lowered == [("b", 4), ("b", 3)]
    c_writes = [a.ledger for a in first.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == "c"]
    assert c_writes and c_writes[-1].compensation is not None, "c's unit counted returned: b holds it still"
    assert c_writes[-1].compensation.give_back[Y_C].state is GiveBackState.GONE
    end, plans = run(world, 8)
    assert not [a for p in plans for a in p.actions if isinstance(a, Terminate)]
    assert all(led.compensation is None for led in end.ledgers.values())
    assert end.groups["b"].desired == 3


def test_the_same_with_the_replacement_launched_gives_the_replacement_back() -> None:
    """As above, Auto Scaling's replacement for ``Y_C`` already listed (4 instances at desired 5, a Ready node): one
    unit is given back by the replacement (drained, terminated with decrement), the other cancelled: b ends at 3."""
    world = cancel_and_left()
    b = world.groups["b"]
    replacement = replace(b.instances[0], instance_id="i-0eeeeeee")
    b = replace(b, instances=(*b.instances, replacement))
    world = replace(world, groups={**world.groups, "b": b}, nodes={**world.nodes, **nodes_for(b)})
    end, plans = run(world, 8)
    assert [a.instance_id for p in plans for a in p.actions if isinstance(a, Terminate)] == ["i-0eeeeeee"]
    assert all(led.compensation is None for led in end.ledgers.values())
    assert end.groups["b"].desired == 3


def test_a_decrement_that_happened_is_returned_though_a_later_raise_carries_a_unit() -> None:
    """b own size 3, raised by 1 for a (``Y_A``) and then by 1 for c (``Y_C``, c still short): desired 5. a's
    terminate of ``Y_A`` with decrement was asked and done (b at 4), the invocation ending before it recorded
    ``terminated``. ``Y_A``'s unit is returned: b's 4 holds c's unit, not a's (shared in raise order, a's decrement
    would read as ``gone`` and a take c's unit). Nothing more is terminated or lowered; b stays at 4 for c."""
    base = tuple(B_IDS[:3])
    a_comp = comp(donor(1, base, (Y_A,)), True, {Y_A: entry(Y_A, GiveBackState.TERMINATING)})
    c_comp = comp(donor(1, base, (Y_C,), minutes=5), False)
    b = b_group(4, [*B_IDS[:3], Y_C])
    world = world_of(b, {"a": a_comp, "c": c_comp}, c_short=True)
    world = replace(world, nodes={**world.nodes, **nodes_for(b)})
    end, plans = run(world, 6)
    assert not [a for p in plans for a in p.actions if isinstance(a, (Terminate, SendDrain))]
    assert not [a for p in plans for a in p.actions if isinstance(a, SetCapacity) and a.desired is not None]
    assert end.ledgers["a"].compensation is None
    assert end.groups["b"].desired == 4
    c = end.ledgers["c"].compensation
    assert c is not None and c.donors["b"].raised_by - c.donors["b"].returned == 1
