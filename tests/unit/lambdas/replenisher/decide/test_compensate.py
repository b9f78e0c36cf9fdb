"""Compensation beside an active refresh run: the run's surge is no shortfall and a group the run is changing is no
donor (docs/DESIGN.md, "A refresh and compensation share the cluster lock")."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Compensation, Donor, DonorState, Ledger
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import Note, Reason, SetCapacity, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, failure, group, ids, nodes_for


def raised(plan: object) -> list[tuple[str, int | None]]:
    return [(x.asg_name, x.desired) for x in plan.actions if isinstance(x, SetCapacity)]  # type: ignore[attr-defined]  # a Plan


def test_a_refresh_surge_that_cannot_launch_is_not_compensated() -> None:
    # the run raised a to 4 for its spare; the AZ cannot launch: 3 of 3 own instances run, nothing is missing
    a = replace(group("a", "az-a", 4, ids("a", 3)), run_surge=1, run_busy=True)
    b = group("b", "az-b", 3, ids("b", 3))
    plan = decide(failure("a"), T0, SETTINGS, World(groups={"a": a, "b": b}, nodes=nodes_for(a, b)))
    assert raised(plan) == []
    without_run = decide(failure("a"), T0, SETTINGS, World(groups={"a": replace(a, run_surge=0), "b": b}))
    assert raised(without_run) == [("b", 4)]  # the same world without the run's record: its surge would be covered


def test_a_lost_instance_beside_a_refresh_surge_is_compensated_on_a_group_the_run_leaves_alone() -> None:
    a = replace(group("a", "az-a", 4, ids("a", 2)), run_surge=1, run_busy=True)  # one of its own 3 lost
    b = replace(group("b", "az-b", 3, ids("b", 3)), run_busy=True)  # the run is replacing b's nodes
    c = group("c", "az-c", 3, ids("c", 3))
    plan = decide(failure("a"), T0, SETTINGS, World(groups={"a": a, "b": b, "c": c}, nodes=nodes_for(a, b, c)))
    assert raised(plan) == [("c", 4)]  # one unit, never on b


def _donor_for_two() -> tuple[World, Ledger]:
    """b (own 2/2) raised to 3/3 for a's compensation; c now fails short of 1 and is covered by b too."""
    a = group("a", "az-a", 3, ids("a", 3))
    b_ids = ids("b", 3)
    b = group("b", "az-b", 3, b_ids, max_size=3)
    c = group("c", "az-c", 3, ids("c", 2))
    raised_for_a = Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=2,
        max_before=2,
        desired_target=3,
        max_target=3,
        raised_at=T0 - timedelta(minutes=30),
        baseline_ids=tuple(b_ids[:2]),
        instance_ids=(b_ids[2],),
    )
    led_a = Ledger(
        asg_name="a",
        compensation=Compensation(owed=1, started_at=T0 - timedelta(minutes=30), donors={"b": raised_for_a}),
    )
    world = World(groups={"a": a, "b": b, "c": c}, ledgers={"a": led_a}, nodes=nodes_for(a, b, c))
    plan = decide(failure("c"), T0, SETTINGS, world)
    assert raised(plan) == [("b", 4)]
    led_c = [x.ledger for x in plan.actions if isinstance(x, WriteLedger) and x.ledger.asg_name == "c"][-1]
    return world, led_c


def test_a_donor_raised_for_a_second_group_records_its_own_sizes_not_the_first_raise() -> None:
    _, led_c = _donor_for_two()
    assert led_c.compensation is not None
    d = led_c.compensation.donors["b"]
    assert (d.desired_before, d.max_before, d.desired_target) == (2, 2, 4)


def test_the_first_compensation_given_back_is_no_reset_of_the_donor_for_the_second() -> None:
    # a's compensation given back and cleared: b is at 3 (its own 2 + c's 1), MaxSize still 4 (c's raise holds it)
    world, led_c = _donor_for_two()
    b = replace(world.groups["b"], desired=3, max_size=4)
    c = replace(world.groups["c"], instances=world.groups["c"].instances * 2)  # c launched again: not short
    world = replace(world, groups={**world.groups, "b": b, "c": c}, ledgers={"c": led_c})
    plan = decide(failure("a", T0 + timedelta(hours=2)), T0 + timedelta(hours=2), SETTINGS, world)
    assert not [x for x in plan.actions if isinstance(x, Note) and x.reason is Reason.SIZE_RESET], plan.actions
