"""Compensation beside an active refresh run: the run's surge is no shortfall and a group the run is changing is no
donor (docs/DESIGN.md, "A refresh and compensation share the cluster lock")."""

from __future__ import annotations

from dataclasses import replace

from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SetCapacity
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
