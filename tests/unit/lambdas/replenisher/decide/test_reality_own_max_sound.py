"""Rule 3b's MaxSize kOps (or a person) wrote above every raise of ours (``reality._own_max``) where it meets a reset of
the donor's desired capacity in the same invocation, a raise recorded and not yet made, and kOps lowering the MaxSize
again: cases checked sound, kept against regressions. Plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import DonorState
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import Note, Reason, SetCapacity, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, reset_world


def _max_set(plan: object) -> list[tuple[str, int | None]]:
    actions = plan.actions  # type: ignore[attr-defined]  # a Plan
    return [(a.asg_name, a.max_size) for a in actions if isinstance(a, SetCapacity) and a.max_size is not None]


def _given_back(world: World, b_desired: int) -> World:
    """a's compensation on b given back whole (b at ``b_desired``): only its MaxSize restore is left."""
    led = world.ledgers["a"]
    assert led.compensation is not None
    d = led.compensation.donors["b"]
    comp = led.compensation.model_copy(
        update={"returning": True, "give_back": {}, "donors": {"b": d.model_copy(update={"returned": d.raised_by})}}
    )
    b = replace(world.groups["b"], desired=b_desired, instances=world.groups["b"].instances[:b_desired])
    return replace(world, groups={**world.groups, "b": b}, ledgers={"a": led.model_copy(update={"compensation": comp})})


def test_a_max_size_above_our_raise_and_a_desired_reset_in_one_invocation_compose() -> None:
    # b (own 2 / MaxSize 3) raised by 2 to 4 / MaxSize 4 for a; kOps wrote MaxSize 6 and desired 3: b holds 1 of 2
    world, _ = reset_world(3, 6)
    plan = decide(TICK, T0, SETTINGS, world)
    writes = [a for a in plan.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == "a"]
    assert [w.expected_version for w in writes] == list(range(3, 3 + len(writes)))  # each on the one before
    after = applied(world, plan)
    d = after.ledgers["a"].compensation.donors["b"]  # type: ignore[union-attr]
    assert (d.raised_by, d.desired_before, d.desired_target) == (1, 2, 3)
    assert (d.max_before, d.max_target, d.reset_at) == (6, 6, T0)
    assert [(s.asg_name, s.desired, s.max_size) for s in plan.actions if isinstance(s, SetCapacity)] == [("c", 3, None)]
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, _given_back(after, 2))) == []


def test_a_raise_recorded_and_not_made_takes_a_max_size_kops_wrote_above_it() -> None:
    # a's intent on b (2 -> 4, MaxSize 3 -> 4) recorded, the invocation ended before UpdateAutoScalingGroup; kOps wrote
    # MaxSize 6 meanwhile: the raise completes without touching MaxSize, and the give-back leaves kOps' 6
    world, _ = reset_world(2, 6)
    led = world.ledgers["a"]
    assert led.compensation is not None
    intent = led.compensation.donors["b"].model_copy(update={"state": DonorState.INTENDED, "instance_ids": ()})
    comp = led.compensation.model_copy(update={"donors": {"b": intent}})
    world = replace(world, ledgers={"a": led.model_copy(update={"compensation": comp})})
    plan = decide(TICK, T0, SETTINGS, world)
    assert [(s.asg_name, s.desired, s.max_size) for s in plan.actions if isinstance(s, SetCapacity)] == [("b", 4, None)]
    after = applied(world, plan)
    d = after.ledgers["a"].compensation.donors["b"]  # type: ignore[union-attr]
    assert (d.state, d.max_before, d.max_target) == (DonorState.RAISED, 6, 6)
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, _given_back(after, 2))) == []


def test_our_own_max_size_with_a_raise_made_and_not_marked_is_not_taken_for_kops() -> None:
    # the raise made (b at 4 / MaxSize 4), the invocation ended before the record said ``raised``: 4 is ours
    world, _ = reset_world(4, 4)
    led = world.ledgers["a"]
    assert led.compensation is not None
    intent = led.compensation.donors["b"].model_copy(update={"state": DonorState.INTENDED})
    world = replace(
        world,
        ledgers={
            "a": led.model_copy(update={"compensation": led.compensation.model_copy(update={"donors": {"b": intent}})})
        },
    )
    after = applied(world, decide(TICK, T0, SETTINGS, world))
    d = after.ledgers["a"].compensation.donors["b"]  # type: ignore[union-attr]
    assert (d.max_before, d.max_target) == (3, 4)
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, _given_back(after, 2))) == [("b", 3)]


def test_kops_lowering_the_max_size_it_raised_is_kept_by_the_give_back() -> None:
    # kOps wrote b's MaxSize 6 over our 4 (rule 3b: its own), then 5: the give-back leaves 5, noting no reset
    world, _ = reset_world(4, 6)
    after = applied(world, decide(TICK, T0, SETTINGS, world))
    after = replace(after, groups={**after.groups, "b": replace(after.groups["b"], max_size=5)})
    plan = decide(TICK, T0 + timedelta(minutes=1), SETTINGS, after)
    assert not [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.SIZE_RESET]
    assert not [a for a in plan.actions if isinstance(a, SetCapacity)]
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, _given_back(applied(after, plan), 2))) == []


def test_an_unmade_raise_over_kops_max_size_lowered_again_asks_only_the_max_size_it_needs() -> None:
    # a's intent on b (2 -> 4, MaxSize 3 -> 4) recorded; kOps wrote MaxSize 6 and rule 3b wrote it into the intent
    # (6 / 6), the invocation ending before the raise each time; kOps then wrote MaxSize 3 back: the raise needs 4
    world, _ = reset_world(2, 3)
    led = world.ledgers["a"]
    assert led.compensation is not None
    intent = led.compensation.donors["b"].model_copy(
        update={"state": DonorState.INTENDED, "instance_ids": (), "max_before": 6, "max_target": 6}
    )
    comp = led.compensation.model_copy(update={"donors": {"b": intent}})
    world = replace(world, ledgers={"a": led.model_copy(update={"compensation": comp})})
    plan = decide(TICK, T0, SETTINGS, world)
    assert [(s.asg_name, s.desired, s.max_size) for s in plan.actions if isinstance(s, SetCapacity)] == [("b", 4, 4)]


def test_kops_lowering_the_max_size_below_the_original_is_restored_after_a_later_raise() -> None:
    # resize seed 365231: b (own 2 / MaxSize 5) raised to 4 for a, no MaxSize raise (5 fits). kOps lowered MaxSize to
    # 4 (desired 4 still held): the record takes 4 as b's original. A later raise to 5 / MaxSize 5 then hides kOps' 4
    # from the MaxSize read now; the give-back restores 4, not the 5 the record had
    world, _ = reset_world(4, 5)
    led = world.ledgers["a"]
    assert led.compensation is not None
    d = led.compensation.donors["b"].model_copy(update={"max_before": 5, "max_target": 5})
    comp = led.compensation.model_copy(update={"donors": {"b": d}})
    world = replace(world, ledgers={"a": led.model_copy(update={"compensation": comp})})
    world = replace(world, groups={**world.groups, "b": replace(world.groups["b"], max_size=4)})
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Note) and a.reason is Reason.SIZE_RESET]
    after = applied(world, plan)
    led = after.ledgers["a"]
    assert led.compensation is not None
    d = led.compensation.donors["b"]
    assert (d.max_before, d.max_target) == (4, 4)
    # the later raise: b at 5 / MaxSize 5, the record 3 units up
    raised = d.model_copy(update={"raised_by": 3, "desired_target": 5, "max_target": 5})
    comp = led.compensation.model_copy(update={"donors": {"b": raised}})
    after = replace(
        after,
        groups={**after.groups, "b": replace(after.groups["b"], desired=5, max_size=5)},
        ledgers={"a": led.model_copy(update={"compensation": comp})},
    )
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, _given_back(after, 2))) == [("b", 4)]
