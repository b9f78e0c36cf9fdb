"""A raised unit with no instance of its own (resize seed 360727): the raise came while Auto Scaling was scaling the
donor in for a kOps clamp, so it kept an instance of the donor's baseline instead of launching one. Nothing launched,
nothing to launch: the give-back gives back an instance of the donor, drained first, rather than wait for a launch
that never comes. And an instance one ledger's give-back terminates is never claimed by another in the same plan.
Plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace

from core.ledger import Compensation, Donor, DonorState, GiveBack, GiveBackState, Ledger
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SendDrain, Terminate, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids, nodes_for
from tests.unit.lambdas.replenisher.decide.reality_world import TICK

B_IDS = ids("b", 4)


def donor(raised_by: int, instance_ids: tuple[str, ...] = (), baseline: int = 4, desired_target: int = 4) -> Donor:
    return Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=raised_by,
        desired_before=3,
        max_before=6,
        desired_target=desired_target,
        max_target=6,
        raised_at=T0,
        baseline_ids=tuple(B_IDS[:baseline]),
        instance_ids=instance_ids,
    )


def held_by_none(baseline: int = 4, **b_changes: object) -> World:
    """a (3 nodes, whole) giving back the unit b (own size 3, desired 4) holds for it; b's 4 instances are all of its
    baseline (recorded at the raise: the raise kept the 4th, which the clamp would have terminated), or its first
    ``baseline``."""
    a = group("a", "us-east-1a", 3, ids("a", 3))
    b = replace(group("b", "us-east-1b", 4, B_IDS), **b_changes)  # type: ignore[arg-type]
    donors = {"b": donor(1, baseline=baseline)}
    comp = Compensation(pool="nodes", started_at=T0, donors=donors, owed=1, healthy_since=T0, returning=True)
    return World(
        groups={"a": a, "b": b},
        ledgers={"a": Ledger(asg_name="a", compensation=comp)},
        nodes=nodes_for(a, b),
        membership_confirmed=True,
    )


def drained(world: World) -> list[str]:
    return [a.command.instance_id for a in decide(TICK, T0, SETTINGS, world).actions if isinstance(a, SendDrain)]


def test_a_unit_held_by_no_instance_of_its_own_gives_back_one_of_the_donor() -> None:
    plan = decide(TICK, T0, SETTINGS, held_by_none())
    assert [a.command.instance_id for a in plan.actions if isinstance(a, SendDrain)] == [B_IDS[0]]
    assert not [a for a in plan.actions if isinstance(a, Terminate)]  # drained first
    comp = [a for a in plan.actions if isinstance(a, WriteLedger)][-1].ledger.compensation
    assert comp is not None and comp.give_back[B_IDS[0]].state is GiveBackState.DRAINING
    assert any("launched no instance" in n for n in comp.notes)


def test_never_an_instance_a_run_protects_nor_while_a_run_surges_the_donor() -> None:
    assert drained(replace(held_by_none(), protected=frozenset({B_IDS[0]}))) == [B_IDS[1]]
    assert drained(held_by_none(run_surge=1)) == []
    assert drained(held_by_none(run_busy=True)) == []


def test_a_replacement_outside_the_baseline_is_never_one_a_run_protects() -> None:
    """b's 4th instance is new since the raise (a replacement of the compensating instance that left), but a run
    names it: the give-back takes none a run protects, whichever way it picks (``give_back._pick``)."""
    assert drained(held_by_none(baseline=3)) == [B_IDS[3]]
    assert drained(replace(held_by_none(baseline=3), protected=frozenset({B_IDS[3]}))) == [B_IDS[0]]


def test_not_when_the_donor_holds_no_unit_above_its_own_size() -> None:
    """b at its own size (3, the unit lowered by someone else): nothing held, nothing given back."""
    world = held_by_none(desired=3, instances=group("b", "us-east-1b", 3, B_IDS[:3]).instances)
    assert drained(world) == []


def test_an_instance_terminated_by_one_give_back_is_not_claimed_by_another_ledger_in_the_same_plan() -> None:
    """b (own size 3) raised by 1 for a and 1 for c, desired 5: a's unit is b's 5th instance, whose give-back is
    ``terminating`` now (a cleared in this plan); c's unit kept a baseline instance (4 recorded at its raise)."""
    five = ids("b", 5)
    a = group("a", "us-east-1a", 3, ids("a", 3))
    b = group("b", "us-east-1b", 5, five, max_size=6)
    c = group("c", "us-east-1c", 3, ids("c", 3))
    gb = GiveBack(
        instance_id=five[4],
        donor="b",
        command_id=f"giveback-{five[4]}",
        state=GiveBackState.TERMINATING,
        deadline=T0,
        updated_at=T0,
    )
    a_comp = Compensation(
        pool="nodes",
        started_at=T0,
        donors={"b": donor(1, (five[4],), baseline=3, desired_target=4)},
        owed=1,
        healthy_since=T0,
        returning=True,
        give_back={five[4]: gb},
    )
    c_comp = Compensation(pool="nodes", started_at=T0, donors={"b": donor(1, (), desired_target=5)}, owed=1)
    world = World(
        groups={"a": a, "b": b, "c": c},
        ledgers={"a": Ledger(asg_name="a", compensation=a_comp), "c": Ledger(asg_name="c", compensation=c_comp)},
        nodes=nodes_for(a, b, c),
        membership_confirmed=True,
    )
    plan = decide(TICK, T0, SETTINGS, world)
    assert [a.instance_id for a in plan.actions if isinstance(a, Terminate)] == [five[4]]
    c_writes = [a.ledger for a in plan.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == "c"]
    claimed = {i for led in c_writes if led.compensation for i in led.compensation.donors["b"].instance_ids}
    assert five[4] not in claimed
