"""A donor's MaxSize restore after its give-back (``decide.give_back``, phase B) restores only a MaxSize a raise of
ours could have set: one kOps (or a person) wrote above every raise on the donor is theirs, not fought (storm seed
150041: kOps' new spec, MaxSize 12, written over a compensation's 11, was restored to 10). A ledger whose restore
waits for another ledger still carrying a raise on the donor hands its raise over to it, so the last one knows the
highest MaxSize the raises set. Plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace

from core.ledger import Donor, DonorState
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SetCapacity, WriteLedger
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, given_back_left, with_max


def _max_set(plan_actions: list[object]) -> list[tuple[str, int | None]]:
    return [(a.asg_name, a.max_size) for a in plan_actions if isinstance(a, SetCapacity) and a.max_size is not None]


def test_a_max_size_the_raise_set_is_restored() -> None:
    # b: own 2 / MaxSize 3, raised to 3 / 4 for a; its unit given back (desired 2): MaxSize 4 back to 3
    plan = decide(TICK, T0, SETTINGS, given_back_left(2))
    assert _max_set(plan.actions) == [("b", 3)]


def test_a_max_size_above_every_raise_is_left_as_kops_set_it() -> None:
    plan = decide(TICK, T0, SETTINGS, with_max(given_back_left(2), 5))
    assert _max_set(plan.actions) == []
    final = [a for a in plan.actions if isinstance(a, WriteLedger)][-1]
    assert final.ledger.compensation is None
    # rule 3b finds it first: every record takes kOps' 5 as b's own (``reality._own_max``), nothing to restore
    assert "MaxSize 5 set by kOps or a person" in final.why


def test_a_restore_left_to_another_ledger_hands_its_raise_over() -> None:
    # c raised b first (MaxSize 4); a's raise took it to 5 and is given back first (b: own 2, + 1 for c, + 1 for a
    # given back = 3): c's restore must know 5
    world = with_max(given_back_left(3), 5)
    led_a = world.ledgers["a"]
    assert led_a.compensation is not None
    a_donor = led_a.compensation.donors["b"].model_copy(update={"max_target": 5})
    led_a = led_a.model_copy(update={"compensation": led_a.compensation.model_copy(update={"donors": {"b": a_donor}})})
    c_donor = Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=2,
        max_before=3,
        desired_target=3,
        max_target=4,
        raised_at=T0,
    )
    led_c = led_a.model_copy(
        update={
            "asg_name": "c",
            "compensation": led_a.compensation.model_copy(
                update={"returning": False, "give_back": {}, "donors": {"b": c_donor}}
            ),
        }
    )
    world = replace(world, ledgers={"a": led_a, "c": led_c})
    plan = decide(TICK, T0, SETTINGS, world)
    assert _max_set(plan.actions) == []  # c still carries a raise: no restore yet
    written = {a.ledger.asg_name: a.ledger for a in plan.actions if isinstance(a, WriteLedger)}
    handed = written["c"].compensation
    assert handed is not None and handed.donors["b"].max_target == 5
