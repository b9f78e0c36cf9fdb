"""Rule 8 of the package docstring: an instance going away loses its membership and its queued commands. Pure."""

from __future__ import annotations

from core.model import CommandStatus
from lambdas.events.event import Event
from lambdas.interruption.decide.common import Plan, command_id
from lambdas.interruption.decide.rebalance import resolve_all
from lambdas.interruption.plan import Acknowledge, Action, CancelCommand, ForgetNode, IgnoreReason
from lambdas.interruption.world import World

GOING_STATES = ("stopping", "shutting-down", "terminated")


def decide_state_change(notice: Event, world: World) -> Plan:
    """Rule 8: membership forgotten, queued commands cancelled, rebalance cordons kept (``ResolveCordon``).

    Args:
        notice: kind ``instance_state_change`` (``notice.instance_state`` set).
        world: ``membership`` and ``commands`` of the instance.
    """
    state = notice.instance_state or ""
    if state not in GOING_STATES:
        return Plan((Acknowledge(IgnoreReason.STATE_IGNORED, f"state {state!r} keeps the node"),))
    steps: list[Action] = []
    if world.membership is not None:
        steps.append(ForgetNode(notice.instance))
    queued = [c for c in world.commands if c.get("status") == CommandStatus.QUEUED.value]
    for item in queued:
        steps.append(CancelCommand(command_id(item), f"instance {state}"))
    cancelled = {command_id(c) for c in queued}
    steps += [r for r in resolve_all(world.commands, f"instance {state}") if r.command_id not in cancelled]
    if not steps:
        return Plan((Acknowledge(IgnoreReason.NOT_A_MEMBER, f"{notice.instance_id} has no membership record"),))
    return Plan(tuple(steps))
