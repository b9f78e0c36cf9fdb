"""Worlds of rule 3b's tests (``lambdas.replenisher.decide.reality``): group a short and compensated by b, b's sizes
as given (``reset_world``), and the same with b's compensating instance being given back (``returning``). Plain
values."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Compensation, Donor, DonorState, GiveBack, GiveBackState, Ledger
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import T0, group, ids, nodes_for

TICK = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")


def reset_world(b_desired: int, b_max: int, *, b_min: int = 0) -> tuple[World, list[str]]:
    a = group("a", "z-a", 3, ids("a", 1))  # short of 2, in backoff below
    b_ids = ids("b", b_desired)
    b = replace(group("b", "z-b", b_desired, b_ids, max_size=b_max), min_size=b_min)
    c = group("c", "z-c", 2, ids("c", 2))
    led = Ledger(
        asg_name="a",
        version=3,
        backoff=Ledger(asg_name="a").backoff.model_copy(
            update={"last_failure_at": T0 - timedelta(minutes=1), "window_seconds": 300, "streak": 1}
        ),
        compensation=Compensation(
            owed=2,
            started_at=T0 - timedelta(minutes=5),
            donors={
                "b": Donor(
                    asg_name="b",
                    state=DonorState.RAISED,
                    raised_by=2,
                    desired_before=2,
                    max_before=3,
                    desired_target=4,
                    max_target=4,
                    raised_at=T0 - timedelta(minutes=5),
                    baseline_ids=tuple(ids("b", 2)),
                    instance_ids=tuple(ids("b", 4)[2:]),
                )
            },
        ),
    )
    world = World(groups={"a": a, "b": b, "c": c}, ledgers={"a": led}, nodes=nodes_for(a, b, c))
    return world, b_ids


def returning(b_desired: int, b_min: int, state: GiveBackState) -> World:
    world, b_ids = reset_world(b_desired, 4, b_min=b_min)
    led = world.ledgers["a"]
    assert led.compensation is not None
    iid = b_ids[-1]
    comp = led.compensation.model_copy(
        update={
            "returning": True,
            "give_back": {
                iid: GiveBack(
                    instance_id=iid,
                    donor="b",
                    command_id=f"giveback-{iid}",
                    state=state,
                    deadline=T0 - timedelta(minutes=1),
                    updated_at=T0 - timedelta(minutes=2),
                )
            },
            "donors": {
                "b": led.compensation.donors["b"].model_copy(
                    update={"raised_by": 1, "instance_ids": (iid,), "desired_before": b_desired - 1}
                )
            },
        }
    )
    a = replace(world.groups["a"], instances=world.groups["a"].instances * 3)
    return replace(world, groups={**world.groups, "a": a}, ledgers={"a": led.model_copy(update={"compensation": comp})})


def unlaunched() -> World:
    """b raised by 2 for a (own size 2, desired 3 now, MaxSize 4 raised from 3): one unit launched and given back
    already (``terminated``, gone), the other never launched (b's own AZ failed under the raise), a whole and giving
    back (sim seed 26 of the lock profile). Its give-back lowers b's desired capacity to 2 (a ``cancel``)."""
    world, _ = reset_world(3, 4)
    b = replace(world.groups["b"], instances=world.groups["b"].instances[:2])  # its baseline only: 2 InService
    led = world.ledgers["a"]
    assert led.compensation is not None
    gone = ids("b", 4)[2]
    comp = led.compensation.model_copy(
        update={
            "returning": True,
            "give_back": {
                gone: GiveBack(
                    instance_id=gone,
                    donor="b",
                    command_id=f"giveback-{gone}",
                    state=GiveBackState.TERMINATED,
                    deadline=T0 - timedelta(minutes=1),
                    updated_at=T0 - timedelta(minutes=2),
                )
            },
            "donors": {"b": led.compensation.donors["b"].model_copy(update={"instance_ids": (gone,), "returned": 1})},
        }
    )
    a = replace(world.groups["a"], instances=world.groups["a"].instances * 3)
    return replace(
        world, groups={**world.groups, "a": a, "b": b}, ledgers={"a": led.model_copy(update={"compensation": comp})}
    )


def given_back_left(desired: int) -> World:
    """b's own size 2 / MaxSize 3, raised by 1 for a (MaxSize 4), its compensating instance ``terminating`` and gone
    from b; b now at ``desired`` (the decrement happened when it is one below what b carries)."""
    world = returning(3, 0, GiveBackState.TERMINATING)
    b = world.groups["b"]
    kept = tuple(i for i in b.instances if i.instance_id != ids("b", 3)[2])
    return replace(world, groups={**world.groups, "b": replace(b, instances=kept, desired=desired)})


def with_max(world: World, max_size: int) -> World:
    return replace(world, groups={**world.groups, "b": replace(world.groups["b"], max_size=max_size)})
