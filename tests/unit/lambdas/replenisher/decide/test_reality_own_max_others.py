"""Rule 3b's MaxSize kOps (or a person) wrote above every raise of ours on a donor (``reality._own_max``, resize seed
358113) against the records of that donor the rule does not hold for: a returning ledger's, one already
``restored`` in a ledger not yet cleared. Each record's ``max_before`` is a term of ``Builder.original_max``, and once
the held records' ``max_target`` reaches kOps' MaxSize it is no longer "above every raise": a stale ``max_before``
left in another record would be the original a later raise records and a give-back restores. Plain values in, plan
out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Backoff, Compensation, Donor, DonorState, GiveBack, Ledger
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SetCapacity, WriteLedger
from lambdas.replenisher.world import Group, World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied, failure, group, ids, nodes_for
from tests.unit.lambdas.replenisher.decide.reality_world import TICK

B_IDS = ids("b", 4)


def _donor(**kw: object) -> Donor:
    base: dict[str, object] = {"asg_name": "b", "state": DonorState.RAISED, "raised_by": 1, "desired_before": 2}
    return Donor.model_validate({**base, **kw})


def _draining(iid: str, donor: str) -> dict[str, GiveBack]:
    return {
        iid: GiveBack(
            instance_id=iid,
            donor=donor,
            command_id=f"giveback-{iid}",
            deadline=T0 + timedelta(minutes=10),
            updated_at=T0 - timedelta(minutes=1),
        )
    }


def _max_set(plan: object) -> list[tuple[str, int | None]]:
    actions = plan.actions  # type: ignore[attr-defined]  # a Plan
    return [(a.asg_name, a.max_size) for a in actions if isinstance(a, SetCapacity) and a.max_size is not None]


def _last(plan: object, name: str) -> Ledger:
    actions = plan.actions  # type: ignore[attr-defined]  # a Plan
    return [a.ledger for a in actions if isinstance(a, WriteLedger) and a.ledger.asg_name == name][-1]


def test_a_raise_after_kops_max_size_records_it_while_a_returning_ledger_still_holds_the_old_original() -> None:
    # b: own 2 / MaxSize 3. c raised it to 3 (MaxSize 3 fits), a to 4 (MaxSize 4); kOps then wrote MaxSize 6. a is
    # giving back (its unit draining), c still holds; e fails short of 1 and b is raised to 5 for it (6 fits)
    a = group("a", "z-a", 3, ids("a", 3))
    b = group("b", "z-b", 4, B_IDS, max_size=6)
    c = group("c", "z-c", 3, ids("c", 3))
    e = group("e", "z-e", 3, ids("e", 2))
    for_a = _donor(
        desired_before=2,
        max_before=3,
        desired_target=4,
        max_target=4,
        raised_at=T0 - timedelta(minutes=20),
        baseline_ids=tuple(B_IDS[:3]),
        instance_ids=(B_IDS[3],),
    )
    for_c = _donor(
        max_before=3,
        desired_target=3,
        max_target=3,
        raised_at=T0 - timedelta(minutes=30),
        baseline_ids=tuple(B_IDS[:2]),
        instance_ids=(B_IDS[2],),
    )
    led_a = Ledger(
        asg_name="a",
        compensation=Compensation(
            owed=1,
            started_at=T0 - timedelta(minutes=20),
            returning=True,
            donors={"b": for_a},
            give_back=_draining(B_IDS[3], "b"),
        ),
    )
    led_c = Ledger(
        asg_name="c", compensation=Compensation(owed=1, started_at=T0 - timedelta(minutes=30), donors={"b": for_c})
    )
    led_e = Ledger(
        asg_name="e", backoff=Backoff(last_failure_at=T0 - timedelta(minutes=1), window_seconds=300, streak=1)
    )
    world = World(
        groups={"a": a, "b": b, "c": c, "e": e},
        ledgers={"a": led_a, "c": led_c, "e": led_e},
        nodes=nodes_for(a, b, c, e),
    )
    plan = decide(failure("e"), T0, SETTINGS, world)
    assert [(x.asg_name, x.desired) for x in plan.actions if isinstance(x, SetCapacity)] == [("b", 5)]
    raised = _last(plan, "e").compensation
    assert raised is not None
    assert raised.donors["b"].max_before == 6  # kOps' MaxSize, never a's stale original 3
    # a and c given back and cleared (each handing its raise over: e's MaxSize 6 is above both), then e's unit: b
    # back at its own 2, kOps' MaxSize 6 kept
    after = applied(world, plan)
    led_e = after.ledgers["e"]
    assert led_e.compensation is not None
    d = led_e.compensation.donors["b"]
    done = led_e.compensation.model_copy(
        update={"returning": True, "donors": {"b": d.model_copy(update={"returned": d.raised_by})}}
    )
    after = replace(
        after,
        groups={**after.groups, "b": replace(after.groups["b"], desired=2, instances=after.groups["b"].instances[:2])},
        ledgers={"e": led_e.model_copy(update={"compensation": done})},
    )
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, after)) == []


def _a_restored_on_b_draining_f() -> tuple[Group, Ledger]:
    """f (own 2, raised to 3 for a), and a's ledger giving back: its raise of b (own 2 / MaxSize 3, raised to 3 /
    MaxSize 4) given back and restored, its instance on f draining."""
    f_ids = ids("f", 3)
    f = group("f", "z-f", 3, f_ids)
    for_a = _donor(
        state=DonorState.RESTORED,
        max_before=3,
        desired_target=3,
        max_target=4,
        returned=1,
        raised_at=T0 - timedelta(minutes=40),
        baseline_ids=tuple(B_IDS[:2]),
    )
    a_on_f = Donor(
        asg_name="f",
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=2,
        max_before=6,
        desired_target=3,
        max_target=6,
        raised_at=T0 - timedelta(minutes=40),
        baseline_ids=tuple(f_ids[:2]),
        instance_ids=(f_ids[2],),
    )
    led_a = Ledger(
        asg_name="a",
        compensation=Compensation(
            owed=2,
            started_at=T0 - timedelta(minutes=40),
            returning=True,
            donors={"b": for_a, "f": a_on_f},
            give_back=_draining(f_ids[2], "f"),
        ),
    )
    return f, led_a


def test_a_give_back_after_kops_max_size_beside_a_restored_record_keeps_it() -> None:
    # b: own 2 / MaxSize 3. a raised it to 3 (MaxSize 4) and c to 4 (4 fits); a's unit on b was given back and its
    # record restored (c still carried a raise: a handed it over), a waits on its other donor f. kOps then wrote b's
    # MaxSize 6 (rule 3b: c's record takes it as b's own). c's unit is given back (b at 2): MaxSize 6 is kOps'
    a = group("a", "z-a", 3, ids("a", 3))
    b = group("b", "z-b", 3, B_IDS[:3], max_size=6)
    c = group("c", "z-c", 3, ids("c", 3))
    f, led_a = _a_restored_on_b_draining_f()
    for_c = _donor(
        max_before=3,
        desired_target=4,
        max_target=4,
        raised_at=T0 - timedelta(minutes=30),
        baseline_ids=tuple(B_IDS[:3]),
        instance_ids=(B_IDS[2],),
    )
    led_c = Ledger(
        asg_name="c", compensation=Compensation(owed=1, started_at=T0 - timedelta(minutes=30), donors={"b": for_c})
    )
    world = World(
        groups={"a": a, "b": b, "c": c, "f": f},
        ledgers={"a": led_a, "c": led_c},
        nodes=nodes_for(a, b, c, f),
    )
    plan = decide(TICK, T0, SETTINGS, world)
    held = _last(plan, "c").compensation
    assert held is not None and (held.donors["b"].max_before, held.donors["b"].max_target) == (6, 6)
    after = applied(world, plan)
    led_c = after.ledgers["c"]
    assert led_c.compensation is not None
    d = led_c.compensation.donors["b"]
    done = led_c.compensation.model_copy(
        update={"returning": True, "give_back": {}, "donors": {"b": d.model_copy(update={"returned": 1})}}
    )
    after = replace(
        after,
        groups={**after.groups, "b": replace(after.groups["b"], desired=2, instances=after.groups["b"].instances[:2])},
        ledgers={**after.ledgers, "c": led_c.model_copy(update={"compensation": done})},
    )
    assert _max_set(decide(TICK, T0 + timedelta(hours=1), SETTINGS, after)) == []


def test_a_raise_over_kops_max_size_beside_only_a_restored_record_is_restored_to_kops() -> None:
    # b: own 2 / MaxSize 3, raised to 3 / MaxSize 4 for a and given back (a's record restored, a waits on its other
    # donor f); kOps then wrote MaxSize 6. e fails short of 1: b raised to 3 for it (6 fits), the raise's MaxSize 6
    # ending "above every raise". Its give-back (b at 2) while a is not yet cleared must keep kOps' 6
    a = group("a", "z-a", 3, ids("a", 3))
    b = group("b", "z-b", 2, B_IDS[:2], max_size=6)
    e = group("e", "z-e", 3, ids("e", 2))
    f, led_a = _a_restored_on_b_draining_f()
    led_e = Ledger(
        asg_name="e", backoff=Backoff(last_failure_at=T0 - timedelta(minutes=1), window_seconds=300, streak=1)
    )
    world = World(
        groups={"a": a, "b": b, "e": e, "f": f}, ledgers={"a": led_a, "e": led_e}, nodes=nodes_for(a, b, e, f)
    )
    plan = decide(failure("e"), T0, SETTINGS, world)
    assert [(x.asg_name, x.desired) for x in plan.actions if isinstance(x, SetCapacity)] == [("b", 3)]
    after = applied(world, plan)
    led_e = after.ledgers["e"]
    assert led_e.compensation is not None
    d = led_e.compensation.donors["b"]
    assert d.max_before == 6
    done = led_e.compensation.model_copy(
        update={"returning": True, "donors": {"b": d.model_copy(update={"returned": d.raised_by})}}
    )
    after = replace(after, ledgers={**after.ledgers, "e": led_e.model_copy(update={"compensation": done})})
    assert _max_set(decide(TICK, T0 + timedelta(hours=3), SETTINGS, after)) == []
