"""Two ledgers raising one donor b, stepped tick by tick (``run``): the ledgers as written, the resizes done, the
terminates applied (with their decrement), every drain sent read back ``succeeded``. The worlds of helper-143's and
helper-144's reviews of the give-back (``test_give_back_held_by_none_review``, ``test_give_back_left_two_ledgers``).
Plain values."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Compensation, Donor, DonorState, GiveBack, GiveBackState, Ledger
from lambdas.replenisher.decide import decide
from lambdas.replenisher.decide.builder import Plan
from lambdas.replenisher.plan import SendDrain, Terminate
from lambdas.replenisher.world import Group, World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, applied, group, ids, nodes_for
from tests.unit.lambdas.replenisher.decide.reality_world import TICK

B_IDS = ids("b", 5)
Y_A, R_ID = "i-0aaaaaaa", "i-0ddddddd"  # launched for a's raise; a replacement


def donor(raised_by: int, baseline: tuple[str, ...], instance_ids: tuple[str, ...] = (), minutes: int = 0) -> Donor:
    """b's record: own size 3, MaxSize 6 (never raised above it: no MaxSize restore to wait for)."""
    return Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=raised_by,
        desired_before=3,
        max_before=6,
        desired_target=3 + raised_by,
        max_target=6,
        raised_at=T0 - timedelta(hours=2) + timedelta(minutes=minutes),
        baseline_ids=baseline,
        instance_ids=instance_ids,
    )


def entry(iid: str, state: GiveBackState) -> GiveBack:
    return GiveBack(
        instance_id=iid,
        donor="b",
        command_id=f"giveback-{iid}",
        state=state,
        deadline=T0 + timedelta(minutes=10),
        updated_at=T0,
    )


def comp(d: Donor, returning: bool, give_back: dict[str, GiveBack] | None = None) -> Compensation:
    return Compensation(
        pool="nodes",
        started_at=T0 - timedelta(hours=2),
        donors={"b": d},
        owed=d.raised_by,
        healthy_since=T0 - timedelta(hours=1) if returning else None,
        returning=returning,
        give_back=give_back or {},
    )


def world_of(b: Group, ledgers: dict[str, Compensation], c_short: bool = False) -> World:
    a = group("a", "us-east-1a", 3, ids("a", 3))
    c = group("c", "us-east-1c", 3, ids("c", 2 if c_short else 3))
    return World(
        groups={"a": a, "b": b, "c": c},
        ledgers={name: Ledger(asg_name=name, compensation=cp) for name, cp in ledgers.items()},
        nodes=nodes_for(a, b, c),
        membership_confirmed=True,
    )


def step(world: World, plan: Plan) -> World:
    """``world`` as the next tick reads it: ``builders.applied``, the terminates done (Auto Scaling decrementing
    when asked), every drain sent recorded ``succeeded``."""
    world = applied(world, plan)
    groups = dict(world.groups)
    commands = dict(world.commands)
    for action in plan.actions:
        if isinstance(action, Terminate):
            g = groups[action.asg_name]
            groups[action.asg_name] = replace(
                g,
                instances=tuple(i for i in g.instances if i.instance_id != action.instance_id),
                desired=g.desired - (1 if action.decrement else 0),
            )
        elif isinstance(action, SendDrain):
            cid = action.command.command_id
            commands[cid] = {"command_id": cid, "status": "succeeded", "instance_id": action.command.instance_id}
    return replace(world, groups=groups, commands=commands)


def run(world: World, ticks: int) -> tuple[World, list[Plan]]:
    plans = []
    for n in range(ticks):
        plan = decide(TICK, T0 + timedelta(minutes=n), SETTINGS, world)
        plans.append(plan)
        world = step(world, plan)
    return world, plans


def b_group(desired: int, instance_ids: list[str]) -> Group:
    return group("b", "us-east-1b", desired, instance_ids)


# -- two returning ledgers on one donor, each with a unit held by no instance of its own ---------------------------
