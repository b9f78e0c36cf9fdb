"""A Spot warning's steps beyond its command: early replacement (rule 4) and a rebalance or refresh drain already
running (rule 5b). Pure."""

from __future__ import annotations

from core.kops import Role
from core.model import Command, CommandKind
from core.runs import StepState
from core.settings import InterruptionSettings
from lambdas.events.event import Event, InstanceAction
from lambdas.interruption.decide.common import command_id, command_steps
from lambdas.interruption.decide.rebalance import active_takeover_drain, resolve_all
from lambdas.interruption.plan import (
    Action,
    DetachInstance,
    MarkDetached,
    RecordDetach,
    Skip,
    SkipReason,
    TightenCommand,
)
from lambdas.interruption.world import World

IN_SERVICE = "InService"
DETACHABLE = (
    IN_SERVICE,
    "Standby",
)  # DetachInstances refuses any other lifecycle state ("not in InService or Standby")
DETACHING = "Detaching"  # DetachInstances took effect: Auto Scaling is removing the instance from its group
DETACH_INTENDED = "intended"
DETACH_DONE = "detached"
# states of a run's step in which the run's own spare replaces the step's instance (surge first): an early detach
# would launch a second replacement; a step giving its surge back (``undoing``...) keeps the instance, so a Spot
# warning then replaces it early as usual
REPLACING = (StepState.SURGING, StepState.DRAINING, StepState.TERMINATING, StepState.SETTLING)


def spot_command_steps(command: Command, world: World) -> list[Action]:
    """Rule 5b: the Spot command's steps when the instance may already be cordoned or drained for a rebalance or a
    refresh.

    - a rebalance or refresh ``drain`` still queued or running (``active_takeover_drain``), and this warning asks
      for a drain: that drain's deadline is brought forward to the Spot deadline (``TightenCommand``; the agent then
      bounds its graces by it, keeps its cordon and marks it ``instance-ending``; the warning's own command is
      recorded and sent only if that drain ended meanwhile): one drain, not two;
    - otherwise this warning's command as usual (``command_steps``): a rebalance cordon is escalated to a drain;
    - either way every rebalance command of the instance still holding its cordon is resolved (``ResolveCordon``):
      the agent never gives that cordon back.
    """
    steps: list[Action]
    takeover = active_takeover_drain(world.commands) if world.command is None else None
    if takeover is not None and command.kind is CommandKind.DRAIN:
        steps = [TightenCommand(command_id(takeover), command.deadline, command)]
    else:
        steps = command_steps(command, world)
    return steps + resolve_all(world.commands, f"escalated by {command.command_id}", skip=command.command_id)


def early_replacement_steps(notice: Event, world: World, settings: InterruptionSettings, role: Role) -> list[Action]:
    """Rule 4 (and its part of rule 6): record, detach without decrement, mark; or complete an intent recorded."""
    facts = world.instance
    record = world.detach
    if record is not None:
        # An intent already recorded is completed whatever the settings say now (rule 6).
        if record.get("state") == DETACH_INTENDED:
            return complete_intent(facts.instance_id, str(record["asg_name"]), facts.lifecycle_state)
        return [Skip("early_replacement", SkipReason.ALREADY_DETACHED)]
    if not settings.early_replacement:
        return [Skip("early_replacement", SkipReason.EARLY_REPLACEMENT_DISABLED)]
    if notice.instance_action is not InstanceAction.TERMINATE:
        return [Skip("early_replacement", SkipReason.INSTANCE_COMES_BACK)]
    if role is Role.CONTROL_PLANE:
        return [Skip("early_replacement", SkipReason.CONTROL_PLANE)]
    if role is not Role.NODE:
        return [Skip("early_replacement", SkipReason.UNKNOWN_ROLE)]
    if facts.lifecycle_state != IN_SERVICE:
        return [Skip("early_replacement", SkipReason.NOT_IN_SERVICE)]
    run = world.active_run
    if run is not None and any(s.instance_id == facts.instance_id and s.state in REPLACING for s in run.steps):
        # a run (a refresh, a rebalance replacement) is replacing it surge first: its spare is the replacement; a
        # detach would launch a second one, which the run would then have to give back
        return [Skip("early_replacement", SkipReason.ALREADY_REPLACING, f"run {run.run_id}")]
    asg_name = str(facts.asg["AutoScalingGroupName"]) if facts.asg else ""
    return [
        RecordDetach(facts.instance_id, asg_name, f"spot-interruption:{notice.event_id}"),
        DetachInstance(facts.instance_id, asg_name),
        MarkDetached(facts.instance_id),
    ]


def complete_intent(instance_id: str, asg_name: str, lifecycle_state: str | None) -> list[Action]:
    """Rule 6: complete a ``DETACH#`` intent a crash left ``intended``, by the instance's lifecycle state now.

    - in no group (``None``) or ``Detaching`` (the first DetachInstances took effect, its answer lost): only marked;
    - ``InService`` or ``Standby``: detached without decrement, then marked;
    - any other state (``Terminating``, ``Terminating:Wait``, ...: Auto Scaling is ending it): nothing is asked, since
      DetachInstances answers ``ValidationError`` "not in InService or Standby" at every delivery; the intent stays
      for the replenisher's sweep (``lambdas.replenisher.decide.detached``: gone once EC2 ends the instance).
    """
    if lifecycle_state is None or lifecycle_state == DETACHING:
        return [MarkDetached(instance_id)]
    if lifecycle_state in DETACHABLE:
        return [DetachInstance(instance_id, asg_name), MarkDetached(instance_id)]
    return [Skip("early_replacement", SkipReason.NOT_IN_SERVICE, f"intent kept: lifecycle state {lifecycle_state}")]
