"""The actions a plan is made of. Plans are built by ``decide`` (pure) and applied in order by ``execute``.

Each action is a frozen value with a ``describe()`` line for logs and responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from core.lifecycle import LifecycleAction
from core.model import Command
from core.runs import GroupSurge, Run, RunStep


class IgnoreReason(str, Enum):
    """Why a whole event was acknowledged without a command (the ``reason`` dimension of ``EventsIgnored``)."""

    LATE = "late"  # the event's deadline has passed; the instance is gone or going
    UNKNOWN_INSTANCE = "unknown_instance"  # EC2 does not know the instance id
    NOT_IN_ASG = "not_in_asg"  # a live instance in no Auto Scaling group
    OTHER_CLUSTER = "other_cluster"  # its ASG carries KubernetesCluster=<another cluster>
    UNMANAGED_GROUP = "unmanaged_group"  # its ASG carries no KubernetesCluster tag
    DUPLICATE = "duplicate"  # everything this event asks for was already done
    REBALANCE_IGNORED = "rebalance_ignored"  # REBALANCE_POLICY=ignore
    FOREIGN_HOOK = "foreign_hook"  # a lifecycle action of another tool's hook (not LIFECYCLE_HOOK_NAME)
    STATE_IGNORED = "state_ignored"  # an instance state that does not take the node away (pending, running...)
    NOT_A_MEMBER = "not_a_member"  # a state change of an instance with no membership record
    ALREADY_DRAINING = "already_draining"  # a rebalance recommendation while a drain of the instance is queued/running
    ALREADY_INTERRUPTED = "already_interrupted"  # a rebalance recommendation after a Spot warning to terminate it
    # (or, until its deadline, one that took a drain over)
    REBALANCE_IN_EFFECT = "rebalance_in_effect"  # an earlier rebalance command of the instance is active or holds
    # its cordon (not given back yet)
    UNVERIFIED = "unverified"  # what the event claims, EC2 or Auto Scaling denies (lambdas.interruption.verify)
    REBALANCE_CAPPED = "rebalance_capped"  # REBALANCE_MAX_CORDONED_PERCENT of the nodes already cordoned for rebalance


class SkipReason(str, Enum):
    """Why one step (the command or the early replacement) was left out of an otherwise acted-on event."""

    COMMAND_ALREADY_HANDLED = "command_already_handled"  # its CMD# item is running or terminal
    COMMAND_UNREADABLE = "command_unreadable"  # its CMD# item is queued but records no command that validates
    EARLY_REPLACEMENT_DISABLED = "early_replacement_disabled"
    INSTANCE_COMES_BACK = "instance_comes_back"  # instance-action stop or hibernate
    CONTROL_PLANE = "control_plane"  # masters are drained but never detached early
    UNKNOWN_ROLE = "unknown_role"  # an ASG of the cluster without a kOps role tag: treated like a master
    NOT_IN_SERVICE = "not_in_service"  # the ASG is already replacing or holding the instance
    ALREADY_DETACHED = "already_detached"  # the DETACH# record says detached
    DRAIN_IN_PROGRESS = "drain_in_progress"  # a drain of the instance is queued or running: it completes the hook
    HOOK_ALREADY_RECORDED = "hook_already_recorded"  # the same lifecycle action again (a duplicate event)
    # REBALANCE_POLICY=replace: why no replacement was started (the rebalance cordon stays, as under "cordon")
    RUN_ACTIVE = "run_active"  # a refresh run (or another replacement run that cannot take it) is active
    REPLACE_LIMIT = "replace_limit"  # REBALANCE_REPLACE_LIMIT instances are being replaced already
    ALREADY_REPLACING = "already_replacing"  # the active run already replaces the instance (no second replacement)


@dataclass(frozen=True)
class RecordCommand:
    """Write the ``CMD#<command_id>`` item as ``queued`` (Store.record_command), before sending it."""

    command: Command

    def describe(self) -> str:
        return f"record {self.command.kind.value} command {self.command.command_id} for {self.command.instance_id}"


@dataclass(frozen=True)
class SendCommand:
    """Send the command on the SQS queue (body ``Command.model_dump_json()``)."""

    command: Command
    resend: bool = False  # the CMD# item was already queued: a crash may have lost the first message

    def describe(self) -> str:
        verb = "re-send" if self.resend else "send"
        return (
            f"{verb} {self.command.kind.value} command {self.command.command_id} for "
            f"{self.command.instance_id} (node {self.command.node_name or 'unknown'}, "
            f"deadline {self.command.deadline.isoformat()})"
        )


@dataclass(frozen=True)
class RecordDetach:
    """Write the ``DETACH#<instance_id>`` item as ``intended`` (Store.record_detach), before detaching."""

    instance_id: str
    asg_name: str
    reason: str

    def describe(self) -> str:
        return f"record intent to detach {self.instance_id} from {self.asg_name}"


@dataclass(frozen=True)
class DetachInstance:
    """DetachInstances with ShouldDecrementDesiredCapacity=False: the ASG launches the replacement at once."""

    instance_id: str
    asg_name: str

    def describe(self) -> str:
        return f"detach {self.instance_id} from {self.asg_name} without decrement"


@dataclass(frozen=True)
class MarkDetached:
    """Set the ``DETACH#<instance_id>`` item's state to ``detached``."""

    instance_id: str

    def describe(self) -> str:
        return f"mark {self.instance_id} detached"


@dataclass(frozen=True)
class RecordHook:
    """Write ``HOOK#<instance>`` as ``pending`` (``adapters.dynamo.hooks.record_hook``): whoever ends the instance's
    drain completes the action."""

    action: LifecycleAction

    def describe(self) -> str:
        return f"record lifecycle action {self.action.hook_name} of {self.action.instance_id} in {self.action.asg_name}"


@dataclass(frozen=True)
class CompleteHook:
    """CompleteLifecycleAction(CONTINUE) now, if the ``HOOK#`` claim is won (a drain already succeeded)."""

    action: LifecycleAction
    why: str

    def describe(self) -> str:
        return f"complete lifecycle action of {self.action.instance_id} with CONTINUE ({self.why})"


@dataclass(frozen=True)
class AwaitDrain:
    """Leave the action to the agent ending drain ``command_id``; the executor reads that ``CMD#`` again after
    ``RecordHook`` and completes the action itself if the drain ended meanwhile (the agent may have looked for the
    ``HOOK#`` item before it was written)."""

    action: LifecycleAction
    command_id: str

    def describe(self) -> str:
        return f"leave the lifecycle action of {self.action.instance_id} to drain {self.command_id}"


@dataclass(frozen=True)
class ForgetNode:
    """Delete the instance's ``NODE#`` membership record (its node is going)."""

    instance_id: str

    def describe(self) -> str:
        return f"forget membership of {self.instance_id}"


@dataclass(frozen=True)
class CancelCommand:
    """End a ``queued`` command as ``skipped`` (``adapters.dynamo.commands.cancel_queued_command``)."""

    command_id: str
    why: str

    def describe(self) -> str:
        return f"cancel queued command {self.command_id} ({self.why})"


@dataclass(frozen=True)
class TightenCommand:
    """Bring a queued or running drain's deadline forward to ``deadline``
    (``adapters.dynamo.commands.tighten_deadline``: a conditional update of its ``CMD#`` item's
    ``deadline_tightened_to``, which the agent reads back at start and on its heartbeat): one drain, not two. When the
    drain ended meanwhile, ``fallback`` is recorded and sent instead."""

    command_id: str
    deadline: datetime
    fallback: Command

    def describe(self) -> str:
        return (
            f"tighten drain {self.command_id} of {self.fallback.instance_id} to {self.deadline.isoformat()} "
            f"(for {self.fallback.command_id})"
        )


@dataclass(frozen=True)
class ResolveCordon:
    """Mark a command whose cordon would be given back after a quiet period (``options.uncordon_after_seconds``) as
    resolved, so the agent never gives it back (``adapters.dynamo.commands.resolve_cordon``; first resolution
    wins)."""

    command_id: str
    resolution: str

    def describe(self) -> str:
        return f"keep the cordon of {self.command_id}: {self.resolution}"


@dataclass(frozen=True)
class StartReplacement:
    """Start ``run``, a one-instance refresh run that replaces the at-risk instance surge first
    (``REBALANCE_POLICY=replace``): under the cluster lock (taken as the run's holder), only while no run is active,
    write its ``RUN#`` item (fenced by the lease), then give the lock back. The refresher advances it from there.
    ``capped_cordon``: the id of the fallback cordon that follows in the plan when rule 5d's cap is reached; refused
    (and no run replacing the instance), that cordon is neither recorded nor sent (``execute``)."""

    run: Run
    capped_cordon: str | None = None

    def describe(self) -> str:
        step = self.run.steps[0]
        return f"start replacement run {self.run.run_id} for {step.instance_id} of {step.group}"


@dataclass(frozen=True)
class JoinReplacement:
    """Add ``step`` (pending) to the active replacement run ``run_id`` (``REBALANCE_REPLACE_LIMIT`` > 1), under the
    cluster lock, while the run (read again there) is still ``running`` with fewer than ``limit`` unfinished steps;
    ``group`` is the step's group when the run does not hold it yet; ``capped_cordon`` as ``StartReplacement``'s."""

    run_id: str
    step: RunStep
    group: GroupSurge | None
    limit: int
    capped_cordon: str | None = None

    def describe(self) -> str:
        return f"add {self.step.instance_id} of {self.step.group} to replacement run {self.run_id}"


@dataclass(frozen=True)
class Skip:
    """One step deliberately not taken (logged, no effect)."""

    step: str  # "command", "early_replacement" or "replacement"
    reason: SkipReason
    detail: str = ""

    def describe(self) -> str:
        said = f"skip {self.step}: {self.reason.value}"
        return f"{said} ({self.detail})" if self.detail else said


@dataclass(frozen=True)
class Acknowledge:
    """The event needs nothing (more): log it and count it in ``EventsIgnored`` with the reason."""

    reason: IgnoreReason
    detail: str = ""

    def describe(self) -> str:
        return (
            f"acknowledge ({self.reason.value}): {self.detail}" if self.detail else f"acknowledge ({self.reason.value})"
        )


Action = (
    RecordCommand
    | SendCommand
    | RecordDetach
    | DetachInstance
    | MarkDetached
    | RecordHook
    | CompleteHook
    | AwaitDrain
    | ForgetNode
    | CancelCommand
    | TightenCommand
    | ResolveCordon
    | StartReplacement
    | JoinReplacement
    | Skip
    | Acknowledge
)

# Actions that change something (the rest only log and count).
EFFECTS = (
    RecordCommand,
    SendCommand,
    RecordDetach,
    DetachInstance,
    MarkDetached,
    RecordHook,
    CompleteHook,
    AwaitDrain,
    ForgetNode,
    CancelCommand,
    TightenCommand,
    ResolveCordon,
    StartReplacement,
    JoinReplacement,
)
