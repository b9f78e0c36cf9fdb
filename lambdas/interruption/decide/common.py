"""What the interruption rules share: the plan, command ids and deadlines, scope, and reading ``CMD#`` items. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from core.clock import aware_time
from core.kops import CLUSTER_TAG, managed_group, tag_map
from core.model import QUIET_CORDON_PREFIX, Command, CommandStatus
from core.settings import InterruptionSettings
from lambdas.events.event import Event, EventKind, InstanceAction
from lambdas.interruption.plan import (
    EFFECTS,
    Acknowledge,
    Action,
    IgnoreReason,
    RecordCommand,
    SendCommand,
    Skip,
    SkipReason,
)
from lambdas.interruption.world import World

ACTIVE = (CommandStatus.QUEUED.value, CommandStatus.RUNNING.value)


@dataclass(frozen=True)
class Plan:
    """The actions to apply, in order.

    Attributes:
        actions: the steps; empty never (an event with nothing to do carries one ``Acknowledge``).
    """

    actions: tuple[Action, ...]

    @property
    def acknowledged(self) -> Acknowledge | None:
        """The ``Acknowledge`` action when the plan changes nothing, else None."""
        if any(isinstance(a, EFFECTS) for a in self.actions):
            return None
        return next((a for a in self.actions if isinstance(a, Acknowledge)), None)

    def describe(self) -> list[str]:
        return [a.describe() for a in self.actions]


def command_id_for(notice: Event) -> str:
    """The command id a notice yields, deterministic so a duplicate event finds its ``CMD#`` item.

    >>> from datetime import datetime, timezone
    >>> command_id_for(Event(kind=EventKind.SPOT_INTERRUPTION, event_id="abc",
    ...     event_time=datetime(2024, 1, 1, tzinfo=timezone.utc), instance_id="i-0123456789abcdef0",
    ...     instance_action=InstanceAction.TERMINATE, source="aws.ec2", detail_type="x"))
    'spot-abc'
    """
    prefix = {
        EventKind.SPOT_INTERRUPTION: "spot",
        EventKind.REBALANCE_RECOMMENDATION: QUIET_CORDON_PREFIX.removesuffix("-"),  # its quiet period needs it
        EventKind.TERMINATE_LIFECYCLE_ACTION: "lifecycle",
    }.get(notice.kind, notice.kind.value)
    return f"{prefix}-{notice.event_id}"


def notice_seconds(action: InstanceAction | None, settings: InterruptionSettings) -> int:
    """Seconds between a Spot warning's time and EC2 acting on the instance, per ``instance-action``.

    Source: "Spot Instance interruption notices", Amazon EC2 User Guide: the warning is "issued two minutes before
    Amazon EC2 stops or terminates your Spot Instance"; for hibernation "you do not receive a two-minute warning
    because the hibernation process begins immediately".

    Returns:
        ``SPOT_DEADLINE_SECONDS`` (default 120) for ``terminate`` and ``stop`` (and an action the event did not
        name); 0 for ``hibernate``.
    """
    if action is InstanceAction.HIBERNATE:
        return 0
    return settings.spot_deadline_seconds


def deadline_of(notice: Event, now: datetime, settings: InterruptionSettings) -> datetime:
    """When the work for this notice must be over (UTC).

    Spot warning: ``event time + notice_seconds(instance-action)``: two minutes for ``terminate`` and ``stop``, the
    event time itself for ``hibernate`` (rule 3 of the package docstring). An event time ahead of ``now`` (EC2's clock
    ahead of ours, accepted up to ``lambdas.events.event.MAX_CLOCK_SKEW_SECONDS``) counts as ``now``: the warning was
    issued before it reached us, so the instance goes no later than two minutes from ``now``, and a later deadline
    would let the agent's graces outlast the instance (and, past ``DRAIN_URGENT_SECONDS``, queue the drain for a slot).
    Rebalance recommendation: ``now + REBALANCE_DRAIN_TIMEOUT_SECONDS``.
    """
    if notice.kind is EventKind.SPOT_INTERRUPTION:
        issued = min(notice.event_time, now)
        return issued + timedelta(seconds=notice_seconds(notice.instance_action, settings))
    return now + timedelta(seconds=settings.rebalance_drain_timeout_seconds)


def too_late(notice: Event, now: datetime, settings: InterruptionSettings) -> bool:
    """True once acting on the notice is pointless (see rule 1 of the package docstring)."""
    if notice.kind is EventKind.SPOT_INTERRUPTION:
        horizon = settings.spot_deadline_seconds
    else:
        horizon = settings.rebalance_drain_timeout_seconds
    return now > notice.event_time + timedelta(seconds=horizon)


def out_of_scope(world: World, settings: InterruptionSettings) -> Acknowledge | None:
    """The acknowledgement of an instance outside the cluster (rule 2), None when its group is managed."""
    facts = world.instance
    if facts.asg is None:
        if not facts.known:
            return Acknowledge(IgnoreReason.UNKNOWN_INSTANCE, f"EC2 does not know {facts.instance_id}")
        return Acknowledge(IgnoreReason.NOT_IN_ASG, f"{facts.instance_id} is in no Auto Scaling group")
    if managed_group(facts.asg, settings.cluster_name) is not None:
        return None
    name = facts.asg.get("AutoScalingGroupName", "?")
    owner = tag_map(facts.asg.get("Tags", [])).get(CLUSTER_TAG)
    if owner:
        return Acknowledge(IgnoreReason.OTHER_CLUSTER, f"{facts.instance_id} is in ASG {name} of cluster {owner!r}")
    return Acknowledge(
        IgnoreReason.UNMANAGED_GROUP,
        f"{facts.instance_id} is in ASG {name}, not tagged {CLUSTER_TAG}={settings.cluster_name}",
    )


def command_steps(command: Command, world: World) -> list[Action]:
    """Record and send ``command``; or re-send it as recorded while still ``queued``; or skip it (rule 6): when its
    ``CMD#`` item is running or terminal (``command_already_handled``), or queued with no command that validates
    (``command_unreadable``: nothing to re-send, counted by the executor as an unreadable item)."""
    recorded = world.command
    if recorded is None:
        return [RecordCommand(command), SendCommand(command)]
    if recorded.get("status") == CommandStatus.QUEUED.value:
        # Re-send what was recorded, not a rebuilt command (a rebalance deadline counts from the first "now").
        try:
            return [SendCommand(Command.model_validate(recorded.get("command")), resend=True)]
        except ValidationError as err:
            # the agent partition is written by more than this Lambda: an item no command can be read from backs
            # nothing the agent would run, and failing every delivery over it would only lose the rest of the plan
            why = f"{err.error_count()} error(s), first: {err.errors()[0]['msg']}"
            return [Skip("command", SkipReason.COMMAND_UNREADABLE, f"CMD# item records no readable command ({why})")]
    return [Skip("command", SkipReason.COMMAND_ALREADY_HANDLED)]


def node_name_of(world: World, now: datetime, settings: InterruptionSettings) -> str | None:
    """The node name of the membership record when it is fresh (``MEMBERSHIP_MAX_AGE_SECONDS``), else None."""
    membership = world.membership
    if membership is not None and membership.fresh(now, settings.membership_max_age_seconds):
        return membership.node_name
    return None


def command_id(item: Mapping[str, Any]) -> str:
    """The id of a ``CMD#`` item (its ``command.command_id``, else its sort key without ``CMD#``)."""
    return str((item.get("command") or {}).get("command_id") or str(item.get("sk", "")).removeprefix("CMD#"))


def succeeded_recently(item: Mapping[str, Any], now: datetime, seconds: int) -> bool:
    """True when the ``CMD#`` item ``succeeded`` no more than ``seconds`` before ``now`` (False when its
    ``finished_at`` is absent, unreadable or has no time zone)."""
    if item.get("status") != CommandStatus.SUCCEEDED.value:
        return False
    finished = aware_time(item.get("finished_at"))
    return finished is not None and (now - finished).total_seconds() <= seconds


def unreadable_command(item: Mapping[str, Any]) -> str | None:
    """Why the rules cannot read a ``CMD#`` item of the instance (``World.commands``), None when they can: its
    ``command`` a map (and its ``options``, when present), its ``status`` a string, its ``finished_at``, when set, an
    ISO 8601 time with a zone. The agent partition is written by more than this Lambda: ``gather`` leaves such an
    item out (logged and counted) instead of letting it fail every warning for the instance."""
    command = item.get("command")
    if not isinstance(command, Mapping):
        return "no command map"
    if command.get("options") is not None and not isinstance(command.get("options"), Mapping):
        return "command.options is not a map"
    if not isinstance(item.get("status"), str):
        return "status is not a string"
    if item.get("finished_at") and aware_time(item.get("finished_at")) is None:
        return f"finished_at is no ISO 8601 time with a zone: {item.get('finished_at')!r}"
    return None
