"""Rule 7 of the package docstring: a termination lifecycle action becomes one drain (or none). Pure."""

from __future__ import annotations

from datetime import datetime, timedelta

from core.lifecycle import LifecycleAction
from core.model import Command, CommandKind
from core.settings import InterruptionSettings
from lambdas.events.event import Event
from lambdas.interruption.decide.common import (
    ACTIVE,
    Plan,
    command_id,
    command_id_for,
    command_steps,
    node_name_of,
    out_of_scope,
    succeeded_recently,
)
from lambdas.interruption.decide.rebalance import resolve_all
from lambdas.interruption.plan import (
    EFFECTS,
    Acknowledge,
    Action,
    AwaitDrain,
    CompleteHook,
    IgnoreReason,
    RecordHook,
    Skip,
    SkipReason,
)
from lambdas.interruption.verify import refuse_lifecycle_action
from lambdas.interruption.world import World


def decide_lifecycle(notice: Event, now: datetime, settings: InterruptionSettings, world: World) -> Plan:
    """Rule 7: record the action, then await a running drain, complete at once after a recent one, or drain.

    Args:
        notice: kind ``terminate_lifecycle_action`` (``notice.lifecycle`` set).
        world: ``instance`` (scope), ``membership`` (node name), ``command`` (this notice's own ``CMD#``),
            ``hook`` (the instance's ``HOOK#``), ``commands`` (the instance's ``CMD#`` items).
    """
    action: LifecycleAction | None = notice.lifecycle
    if action is None:
        raise ValueError("a terminate lifecycle notice carries its action")
    if action.hook_name != settings.lifecycle_hook_name:
        return Plan(
            (
                Acknowledge(
                    IgnoreReason.FOREIGN_HOOK, f"hook {action.hook_name!r} is not {settings.lifecycle_hook_name!r}"
                ),
            )
        )
    if now > notice.event_time + timedelta(seconds=settings.lifecycle_drain_timeout_seconds):
        late_by = (now - notice.event_time).total_seconds()
        return Plan((Acknowledge(IgnoreReason.LATE, f"event is {late_by:.0f} s old"),))
    ignored = out_of_scope(world, settings) or refuse_lifecycle_action(notice, world)  # rules 2 and 9
    if ignored is not None:
        return Plan((ignored,))

    steps: list[Action] = []
    if world.hook is not None and world.hook.get("token") == action.token:
        steps.append(Skip("hook", SkipReason.HOOK_ALREADY_RECORDED))
    else:
        steps.append(RecordHook(action))
    own_id = command_id_for(notice)
    drains = [c for c in world.commands if c.get("kind") == CommandKind.DRAIN.value and command_id(c) != own_id]
    active = next((c for c in drains if c.get("status") in ACTIVE), None)
    recent = next((c for c in drains if succeeded_recently(c, now, settings.lifecycle_recent_drain_seconds)), None)
    if world.command is None and active is not None:
        steps.append(AwaitDrain(action, command_id(active)))
    elif world.command is None and recent is not None:
        steps.append(CompleteHook(action, f"drain {command_id(recent)} succeeded at {recent['finished_at']}"))
    else:
        command = Command(
            command_id=own_id,
            cluster=settings.cluster_name,
            kind=CommandKind.DRAIN,
            instance_id=notice.instance,
            node_name=node_name_of(world, now, settings),
            reason=f"asg-lifecycle:{action.asg_name}",
            deadline=notice.event_time + timedelta(seconds=settings.lifecycle_drain_timeout_seconds),
        )
        steps += command_steps(command, world)
    # the instance is being terminated: a rebalance cordon of it is never given back
    steps += resolve_all(world.commands, f"escalated by lifecycle action {own_id}")
    if not any(isinstance(a, EFFECTS) for a in steps):
        steps.append(Acknowledge(IgnoreReason.DUPLICATE, "lifecycle action and its drain already handled"))
    return Plan(tuple(steps))
