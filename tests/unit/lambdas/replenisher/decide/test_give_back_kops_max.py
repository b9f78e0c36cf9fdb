"""A MaxSize kOps (or a person) raised above every raise of ours on a donor is the donor's original from then on, for
every ledger (``Builder.original_max``, ``asks.hand_over_raise``): storm seed 192076, ``nodes-us-east-1b`` (4 / MaxSize
5) raised to desired 5 for ``nodes-us-east-1a``; kOps' new spec wrote MaxSize 6; a second raise, to 6 for
``nodes-us-east-1c``, recorded the first ledger's original (5) as its own, and its give-back restored MaxSize 5 under
kOps' 6 ("4 sizes end where they were"). Plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Compensation, Donor, DonorState, Ledger
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SetCapacity, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied, failure, group, ids, nodes_for
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, given_back_left, with_max


def _max_set(plan: object) -> list[tuple[str, int | None]]:
    actions = plan.actions  # type: ignore[attr-defined]  # a Plan
    return [(a.asg_name, a.max_size) for a in actions if isinstance(a, SetCapacity) and a.max_size is not None]


def _given_back(world: World, ledger: Ledger, b_desired: int) -> World:
    """``ledger``'s compensation on b given back whole (its unit returned, b at ``b_desired``): only its MaxSize
    restore is left, and no other ledger carries anything."""
    comp = ledger.compensation
    assert comp is not None
    d = comp.donors["b"]
    done = comp.model_copy(
        update={"returning": True, "give_back": {}, "donors": {"b": d.model_copy(update={"returned": d.raised_by})}}
    )
    b = replace(world.groups["b"], desired=b_desired)
    ledgers = {ledger.asg_name: ledger.model_copy(update={"compensation": done})}
    return replace(world, groups={**world.groups, "b": b}, ledgers=ledgers)


def _raised_once_for_a(b_ids: list[str]) -> Ledger:
    """a's ledger: b (own 2 / MaxSize 3) raised by one to 3 for it half an hour ago (MaxSize 3 fitted: the raise set
    3), the unit's instance ``b_ids[2]``."""
    for_a = Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=2,
        max_before=3,
        desired_target=3,
        max_target=3,
        raised_at=T0 - timedelta(minutes=30),
        baseline_ids=tuple(b_ids[:2]),
        instance_ids=(b_ids[2],),
    )
    return Ledger(
        asg_name="a", compensation=Compensation(owed=1, started_at=T0 - timedelta(minutes=30), donors={"b": for_a})
    )


def test_a_second_raise_under_a_max_size_kops_raised_takes_it_as_the_original() -> None:
    # b (own 2 / MaxSize 3) raised to 3 for a (MaxSize 3 fits: the raise set 3); kOps then wrote MaxSize 5; c fails
    # short of 1 and b is raised to 4 for it (5 fits)
    a = group("a", "az-a", 3, ids("a", 3))
    b_ids = ids("b", 3)
    b = group("b", "az-b", 3, b_ids, max_size=5)
    c = group("c", "az-c", 3, ids("c", 2))
    led_a = _raised_once_for_a(b_ids)
    world = World(groups={"a": a, "b": b, "c": c}, ledgers={"a": led_a}, nodes=nodes_for(a, b, c))
    plan = decide(failure("c"), T0, SETTINGS, world)
    assert [(x.asg_name, x.desired, x.max_size) for x in plan.actions if isinstance(x, SetCapacity)] == [("b", 4, None)]
    led_c = [x.ledger for x in plan.actions if isinstance(x, WriteLedger) and x.ledger.asg_name == "c"][-1]
    assert led_c.compensation is not None
    assert led_c.compensation.donors["b"].max_before == 5  # kOps' MaxSize, not a's original 3
    # a's compensation given back and cleared, then c's: b back at its own 2, MaxSize kOps' 5 kept
    after = _given_back(applied(world, plan), led_c, 2)
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, after)) == []


def test_a_ledger_cleared_first_hands_a_max_size_kops_raised_over_as_the_original() -> None:
    # c raised b first (own 2 / MaxSize 3 -> 4); kOps then wrote MaxSize 5, which a's raise recorded as b's original;
    # a is given back first: c, the last carrying a raise on b, must not restore b's MaxSize below kOps' 5
    world = with_max(given_back_left(3), 5)
    led_a = world.ledgers["a"]
    assert led_a.compensation is not None
    a_donor = led_a.compensation.donors["b"].model_copy(update={"max_before": 5, "max_target": 5})
    led_a = led_a.model_copy(update={"compensation": led_a.compensation.model_copy(update={"donors": {"b": a_donor}})})
    c_donor = Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=2,
        max_before=3,
        desired_target=3,
        max_target=4,
        raised_at=T0 - timedelta(hours=1),
    )
    led_c = Ledger(
        asg_name="c", compensation=Compensation(owed=1, started_at=T0 - timedelta(hours=1), donors={"b": c_donor})
    )
    world = replace(world, ledgers={"a": led_a, "c": led_c})
    plan = decide(TICK, T0, SETTINGS, world)
    assert _max_set(plan) == []  # c still carries a raise: no restore yet
    written = {a.ledger.asg_name: a.ledger for a in plan.actions if isinstance(a, WriteLedger)}
    handed = written["c"].compensation
    assert handed is not None
    assert (handed.donors["b"].max_target, handed.donors["b"].max_before) == (5, 5)
    after = applied(world, plan)
    after = _given_back(after, after.ledgers["c"], 2)
    assert _max_set(decide(TICK, T0 + timedelta(hours=1), SETTINGS, after)) == []


def test_a_second_raise_of_the_same_ledger_under_a_max_size_kops_raised_takes_it_as_the_original() -> None:
    """Storm seed 220134: ``nodes-us-east-1a`` (10 / MaxSize 11) raised to 11 for ``nodes-us-east-1b`` (11 fits: the
    raise set 11); kOps' new spec wrote MaxSize 12; 1b short again, 1a raised to 12 for it by the same ledger (12
    fits). The record kept its first original (11), and the give-back restored MaxSize 11 under kOps' 12 ("4 sizes
    end where they were"): a MaxSize above every MaxSize a raise set is kOps' (``Builder.original_max``), for a
    record already there too."""
    a = group("a", "az-a", 3, ids("a", 1))  # short of 2, one carried by b's first raise
    b_ids = ids("b", 3)
    b = group("b", "az-b", 3, b_ids, max_size=5)
    led_a = _raised_once_for_a(b_ids)
    world = World(groups={"a": a, "b": b}, ledgers={"a": led_a}, nodes=nodes_for(a, b))
    plan = decide(failure("a"), T0, SETTINGS, world)
    assert [(x.asg_name, x.desired, x.max_size) for x in plan.actions if isinstance(x, SetCapacity)] == [("b", 4, None)]
    led = [x.ledger for x in plan.actions if isinstance(x, WriteLedger) and x.ledger.asg_name == "a"][-1]
    assert led.compensation is not None
    assert led.compensation.donors["b"].max_before == 5  # kOps' MaxSize, not the first raise's original 3
    after = _given_back(applied(world, plan), led, 2)
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, after)) == []
