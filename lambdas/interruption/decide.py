"""The decision: notice + world + clock + settings -> a plan (a list of actions). Pure: no I/O, no clock reads.

Rules, in order:

1. **Late**: a Spot warning is late once ``now`` is past ``event time + SPOT_DEADLINE_SECONDS`` (120 s: the
   instance is gone or going), whatever its ``instance-action``; a rebalance recommendation once ``now`` is past
   ``event time + REBALANCE_DRAIN_TIMEOUT_SECONDS``. Acknowledged, reason ``late``.
2. **Scope**: the instance must be in an ASG tagged ``KubernetesCluster=<cluster>`` (``core.kops.managed_group``).
   Otherwise acknowledged: ``other_cluster`` (tagged for another cluster), ``unmanaged_group`` (no cluster tag),
   ``not_in_asg`` (a live instance in no ASG) or ``unknown_instance`` (EC2 does not know the id). An instance that
   this system already detached (``DETACH#`` record) is judged by the group its record names.
3. **Spot warning**: a command with id ``spot-<event id>``, ``node_name`` from the membership record when it is
   fresh (``MEMBERSHIP_MAX_AGE_SECONDS``), else None (the agent resolves the node from ``spec.providerID``, or
   reports ``skipped`` when the instance never joined). Its kind and deadline follow AWS's documented timing for the
   warning's ``instance-action`` ("Spot Instance interruption notices", Amazon EC2 User Guide: "a warning that is
   issued two minutes before Amazon EC2 stops or terminates your Spot Instance. If you specify hibernation as the
   interruption behavior, you receive an interruption notice, but you do not receive a two-minute warning because
   the hibernation process begins immediately"), see ``notice_seconds``:

   - ``terminate`` and ``stop``: a ``drain``, deadline ``event time + SPOT_DEADLINE_SECONDS`` (default 120 s, the
     documented two minutes). A stopped instance comes back, but its node is gone until then.
   - ``hibernate``: no time is given (deadline = the event time), so a ``cordon``, not a drain: the agent does not
     run a drain whose deadline has passed (evicting with no time left stops no pod cleanly, and the hibernating
     kubelet cannot end them), while a cordon is one write that stays right when late: no pod is scheduled onto the
     node in the seconds before Kubernetes marks it NotReady. Its pods are then evicted by Kubernetes' taint-based
     eviction (``node.kubernetes.io/unreachable``, 300 s toleration by default). The node stays cordoned when the
     instance resumes; lifting that cordon is not done here.
4. **Early replacement** (``EARLY_REPLACEMENT``, default on): for ``instance-action=terminate`` on a worker whose
   lifecycle state is ``InService``, record ``DETACH#`` (``intended``), DetachInstances with
   ShouldDecrementDesiredCapacity=False (the ASG launches the replacement now instead of two minutes later), then
   mark it ``detached``. Never for ``stop``/``hibernate`` (the instance comes back and would then be surplus,
   outside its ASG). Never for control-plane groups: a kOps master ASG has min = max = 1 and its instance is an
   etcd member; detaching it makes the ASG launch a second master for the same etcd member slot while the old
   one still runs, and etcd-manager expects exactly one master per instance group. The master is drained and
   replaced by the ASG after the termination, as kOps intends. An ASG of the cluster with no kOps role tag is
   treated the same way (unknown role: the conservative choice).
5. **Rebalance recommendation**: ``REBALANCE_POLICY`` ``ignore`` (acknowledged, ``rebalance_ignored``), ``cordon``
   (default; a ``cordon`` command) or ``drain`` (a ``drain`` command); id ``rebalance-<event id>``, deadline
   ``now + REBALANCE_DRAIN_TIMEOUT_SECONDS``; no early replacement (no interruption is certain yet).
6. **Duplicates** (the same event again, after the idempotency record expired or after a crash): a ``CMD#`` item
   already ``queued`` is re-sent exactly as recorded (a crash may have happened between the record and the
   send; the agent makes a second message harmless through the ``CMD#`` status); one ``running`` or terminal is
   not. A ``DETACH#`` record still ``intended`` is completed (detach if the instance is still in its ASG, then mark
   it); one ``detached`` is not repeated. An event that needs nothing more is acknowledged as ``duplicate``.
7. **Termination lifecycle action** (``decide_lifecycle``): only actions of our hook (``LIFECYCLE_HOOK_NAME``;
   another tool's hook: ``foreign_hook``), not later than ``event time + LIFECYCLE_DRAIN_TIMEOUT_SECONDS``
   (``late``), in scope as rule 2. The action is recorded (``HOOK#``, ``pending``; the same token again is a
   duplicate). Then **one drain, not two**: if the instance already has a ``drain`` command that is ``queued`` or
   ``running`` (a Spot drain, a refresher's drain), no new one: the agent completes the action when that drain
   ends (``AwaitDrain``); if a drain of it ``succeeded`` within ``LIFECYCLE_RECENT_DRAIN_SECONDS``, the action is
   completed now with CONTINUE (``CompleteHook``). Otherwise a ``drain`` command ``lifecycle-<event id>`` with
   deadline ``event time + LIFECYCLE_DRAIN_TIMEOUT_SECONDS``; the agent keeps the action alive with heartbeats
   while it drains and completes it with CONTINUE when the drain ends (whatever the result: an instance with no
   node is continued at once).
8. **Instance state change** (``decide_state_change``) to ``stopping``, ``shutting-down`` or ``terminated``: the
   node is going, so its ``NODE#`` record is deleted and the instance's ``queued`` commands are cancelled (ended
   ``skipped``, reason in the result). Other states: ``state_ignored``; an instance with no membership record:
   ``not_a_member`` (the rule sees every instance of the account; only members are looked at further).
9. **Verified with EC2** (``verify``): a Spot warning or rebalance recommendation is acted on only for an instance
   DescribeInstances reports as a live Spot Instance; a going state change only when DescribeInstances agrees.
   Otherwise acknowledged, ``unverified`` (a direct invoke can carry any event).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.kops import CLUSTER_TAG, Role, managed_group, tag_map
from core.lifecycle import LifecycleAction
from core.model import Command, CommandKind, CommandStatus
from core.settings import InterruptionSettings, RebalancePolicy
from lambdas.events.event import Event, EventKind, InstanceAction
from lambdas.interruption.plan import (
    EFFECTS,
    Acknowledge,
    Action,
    AwaitDrain,
    CancelCommand,
    CompleteHook,
    DetachInstance,
    ForgetNode,
    IgnoreReason,
    MarkDetached,
    RecordCommand,
    RecordDetach,
    RecordHook,
    SendCommand,
    Skip,
    SkipReason,
)
from lambdas.interruption.verify import refuse_spot_notice, refuse_state_change
from lambdas.interruption.world import World

IN_SERVICE = "InService"
DETACH_INTENDED = "intended"
DETACH_DONE = "detached"


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
        EventKind.REBALANCE_RECOMMENDATION: "rebalance",
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
    event time itself for ``hibernate`` (rule 3 of the module docstring).
    Rebalance recommendation: ``now + REBALANCE_DRAIN_TIMEOUT_SECONDS``.
    """
    if notice.kind is EventKind.SPOT_INTERRUPTION:
        return notice.event_time + timedelta(seconds=notice_seconds(notice.instance_action, settings))
    return now + timedelta(seconds=settings.rebalance_drain_timeout_seconds)


def too_late(notice: Event, now: datetime, settings: InterruptionSettings) -> bool:
    """True once acting on the notice is pointless (see rule 1 of the module docstring)."""
    if notice.kind is EventKind.SPOT_INTERRUPTION:
        horizon = settings.spot_deadline_seconds
    else:
        horizon = settings.rebalance_drain_timeout_seconds
    return now > notice.event_time + timedelta(seconds=horizon)


def _out_of_scope(world: World, settings: InterruptionSettings) -> Acknowledge | None:
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


def _command_steps(command: Command, world: World) -> list[Action]:
    recorded = world.command
    if recorded is None:
        return [RecordCommand(command), SendCommand(command)]
    if recorded.get("status") == CommandStatus.QUEUED.value:
        # Re-send what was recorded, not a rebuilt command (a rebalance deadline counts from the first "now").
        return [SendCommand(Command.model_validate(recorded["command"]), resend=True)]
    return [Skip("command", SkipReason.COMMAND_ALREADY_HANDLED)]


def _early_replacement_steps(notice: Event, world: World, settings: InterruptionSettings, role: Role) -> list[Action]:
    facts = world.instance
    record = world.detach
    if record is not None:
        # An intent already recorded is completed whatever the settings say now (rule 6).
        if record.get("state") == DETACH_INTENDED:
            steps: list[Action] = []
            if facts.in_asg:
                steps.append(DetachInstance(facts.instance_id, str(record["asg_name"])))
            steps.append(MarkDetached(facts.instance_id))
            return steps
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
    asg_name = str(facts.asg["AutoScalingGroupName"]) if facts.asg else ""
    return [
        RecordDetach(facts.instance_id, asg_name, f"spot-interruption:{notice.event_id}"),
        DetachInstance(facts.instance_id, asg_name),
        MarkDetached(facts.instance_id),
    ]


def decide(notice: Event, now: datetime, settings: InterruptionSettings, world: World) -> Plan:
    """Decide what to do about one notice (the rules are in the module docstring).

    Args:
        notice: the parsed event.
        now: the current time (UTC, aware).
        settings: the Lambda's settings.
        world: what AWS and the table say (see ``world.World``).

    Returns:
        The plan: a non-empty tuple of actions, to be applied in order by ``execute.execute``.
    """
    if notice.kind is EventKind.TERMINATE_LIFECYCLE_ACTION:
        return decide_lifecycle(notice, now, settings, world)
    if notice.kind is EventKind.INSTANCE_STATE_CHANGE:
        refused = refuse_state_change(notice, world)  # rule 9
        return Plan((refused,)) if refused is not None else decide_state_change(notice, world)
    if too_late(notice, now, settings):
        late_by = (now - notice.event_time).total_seconds()
        return Plan((Acknowledge(IgnoreReason.LATE, f"event is {late_by:.0f} s old"),))
    ignored = _out_of_scope(world, settings) or refuse_spot_notice(notice, world)  # rules 2 and 9
    if ignored is not None:
        return Plan((ignored,))
    assert world.instance.asg is not None  # _out_of_scope guarantees a managed group
    group = managed_group(world.instance.asg, settings.cluster_name)
    assert group is not None

    if notice.kind is EventKind.REBALANCE_RECOMMENDATION:
        if settings.rebalance_policy is RebalancePolicy.IGNORE:
            return Plan((Acknowledge(IgnoreReason.REBALANCE_IGNORED, "REBALANCE_POLICY=ignore"),))
        kind = CommandKind.DRAIN if settings.rebalance_policy is RebalancePolicy.DRAIN else CommandKind.CORDON
        reason = "rebalance-recommendation"
    else:
        # hibernation begins with the warning: nothing is left to drain in, only the cordon stays right (rule 3)
        hibernate = notice.instance_action is InstanceAction.HIBERNATE
        kind = CommandKind.CORDON if hibernate else CommandKind.DRAIN
        action = notice.instance_action.value if notice.instance_action else "unknown"
        reason = f"spot-interruption:{action}"

    membership = world.membership
    node_name = None
    if membership is not None and membership.fresh(now, settings.membership_max_age_seconds):
        node_name = membership.node_name
    command = Command(
        command_id=command_id_for(notice),
        cluster=settings.cluster_name,
        kind=kind,
        instance_id=notice.instance,
        node_name=node_name,
        reason=reason,
        deadline=deadline_of(notice, now, settings),
    )
    actions = _command_steps(command, world)
    if notice.kind is EventKind.SPOT_INTERRUPTION:
        actions += _early_replacement_steps(notice, world, settings, group.role)
    if not any(isinstance(a, EFFECTS) for a in actions):
        actions.append(Acknowledge(IgnoreReason.DUPLICATE, "command and early replacement already done"))
    return Plan(tuple(actions))


GOING_STATES = ("stopping", "shutting-down", "terminated")
ACTIVE = (CommandStatus.QUEUED.value, CommandStatus.RUNNING.value)


def _command_id(item: Mapping[str, Any]) -> str:
    """The id of a ``CMD#`` item (its ``command.command_id``, else its sort key without ``CMD#``)."""
    return str((item.get("command") or {}).get("command_id") or str(item.get("sk", "")).removeprefix("CMD#"))


def _succeeded_recently(item: Mapping[str, Any], now: datetime, seconds: int) -> bool:
    if item.get("status") != CommandStatus.SUCCEEDED.value or not item.get("finished_at"):
        return False
    finished = datetime.fromisoformat(str(item["finished_at"]))
    return (now - finished).total_seconds() <= seconds


def decide_lifecycle(notice: Event, now: datetime, settings: InterruptionSettings, world: World) -> Plan:
    """Rule 7 of the module docstring: a termination lifecycle action becomes one drain (or none). Pure.

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
    ignored = _out_of_scope(world, settings)
    if ignored is not None:
        return Plan((ignored,))

    steps: list[Action] = []
    if world.hook is not None and world.hook.get("token") == action.token:
        steps.append(Skip("hook", SkipReason.HOOK_ALREADY_RECORDED))
    else:
        steps.append(RecordHook(action))
    own_id = command_id_for(notice)
    drains = [c for c in world.commands if c.get("kind") == CommandKind.DRAIN.value and _command_id(c) != own_id]
    active = next((c for c in drains if c.get("status") in ACTIVE), None)
    recent = next((c for c in drains if _succeeded_recently(c, now, settings.lifecycle_recent_drain_seconds)), None)
    if world.command is None and active is not None:
        steps.append(AwaitDrain(action, _command_id(active)))
    elif world.command is None and recent is not None:
        steps.append(CompleteHook(action, f"drain {_command_id(recent)} succeeded at {recent['finished_at']}"))
    else:
        membership = world.membership
        node_name = None
        if membership is not None and membership.fresh(now, settings.membership_max_age_seconds):
            node_name = membership.node_name
        command = Command(
            command_id=own_id,
            cluster=settings.cluster_name,
            kind=CommandKind.DRAIN,
            instance_id=notice.instance,
            node_name=node_name,
            reason=f"asg-lifecycle:{action.asg_name}",
            deadline=notice.event_time + timedelta(seconds=settings.lifecycle_drain_timeout_seconds),
        )
        steps += _command_steps(command, world)
    if not any(isinstance(a, EFFECTS) for a in steps):
        steps.append(Acknowledge(IgnoreReason.DUPLICATE, "lifecycle action and its drain already handled"))
    return Plan(tuple(steps))


def decide_state_change(notice: Event, world: World) -> Plan:
    """Rule 8 of the module docstring: an instance going away loses its membership and its queued commands. Pure.

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
    for item in world.commands:
        if item.get("status") == CommandStatus.QUEUED.value:
            steps.append(CancelCommand(_command_id(item), f"instance {state}"))
    if not steps:
        return Plan((Acknowledge(IgnoreReason.NOT_A_MEMBER, f"{notice.instance_id} has no membership record"),))
    return Plan(tuple(steps))
