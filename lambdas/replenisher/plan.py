"""The actions a replenisher plan is made of. Built by ``decide`` (pure), applied in order by ``execute``.

Each action is a frozen value with a ``describe()`` line for logs and responses. Ledger writes are explicit actions
carrying the whole new ledger, placed before the AWS call they announce and after it, so the order of the list is
the crash-safety argument (see ``decide``'s module docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from core.detach import DetachState
from core.ledger import Ledger
from core.model import Command


class Operation(str, Enum):
    """The lock's ``operation`` for what a plan does (capacity operations are exclusive per cluster)."""

    REPLENISH = "replenish"
    SCALE_BACK = "scale-back"
    SURPLUS_CLEANUP = "surplus-cleanup"


class Reason(str, Enum):
    """Why something was not done (``EventsIgnored``/``Skipped`` metric dimension)."""

    NOT_MANAGED = "not_managed"  # the event's ASG is not tagged for this cluster (another cluster, or none)
    NOT_OURS = "not_ours"  # an agent event for another cluster or for a command the replenisher did not send
    CONTROL_PLANE = "control_plane"  # masters are never compensated across AZs
    UNKNOWN_ROLE = "unknown_role"  # a cluster ASG without a kOps role tag: treated like a master
    NO_HEALTHY_SIBLING = "no_healthy_sibling"  # no sibling in the pool is out of backoff with headroom
    PARTIAL_COVER = "partial_cover"  # the siblings' headroom covers only part of the shortfall
    LOCK_HELD = "lock_held"  # another capacity operation holds the lock: acted on at the next tick
    MEMBERSHIP_UNAVAILABLE = "membership_unavailable"  # no fresh NODE# record at all: no cleanup by membership
    CLEANUP_LIMIT = "cleanup_limit"  # CLEANUP_LIMIT reached for this invocation
    PROTECTED = "protected"  # capacity of a refresh run or an early replacement
    SIZE_RESET = "size_reset"  # a donor holds less than its ledger says (kOps or a person reset its sizes)
    UNVERIFIED = "unverified"  # an effect recorded as done is not visible in Auto Scaling: redone
    NO_COMPENSATION = "no_compensation"  # a launch succeeded while no ledger carries a compensation: the tick's
    LEFT_RAISED = "left_raised"  # a give-back's asks not read back by their deadline: the donor left raised
    NOTHING_TO_DO = "nothing_to_do"


@dataclass(frozen=True)
class WriteLedger:
    """Put the whole ``COMP#`` item, conditioned on the version read (``expected_version`` None: must be new)."""

    ledger: Ledger
    expected_version: int | None
    why: str

    def describe(self) -> str:
        return f"write ledger {self.ledger.asg_name}: {self.why}"


@dataclass(frozen=True)
class SetCapacity:
    """UpdateAutoScalingGroup with absolute values: DesiredCapacity and/or MaxSize (None: unchanged)."""

    asg_name: str
    desired: int | None = None
    max_size: int | None = None
    why: str = ""

    def describe(self) -> str:
        parts = []
        if self.desired is not None:
            parts.append(f"desired {self.desired}")
        if self.max_size is not None:
            parts.append(f"MaxSize {self.max_size}")
        return f"set {self.asg_name} {' and '.join(parts)}" + (f" ({self.why})" if self.why else "")


@dataclass(frozen=True)
class SendDrain:
    """Record the drain command as ``CMD#`` (``queued``) unless recorded, then send it on SQS."""

    command: Command

    def describe(self) -> str:
        return (
            f"drain {self.command.instance_id} (command {self.command.command_id}, "
            f"deadline {self.command.deadline.isoformat()})"
        )


@dataclass(frozen=True)
class Terminate:
    """TerminateInstanceInAutoScalingGroup for one instance id."""

    instance_id: str
    asg_name: str
    decrement: bool
    why: str

    def describe(self) -> str:
        how = "with" if self.decrement else "without"
        return f"terminate {self.instance_id} in {self.asg_name} {how} decrement ({self.why})"


@dataclass(frozen=True)
class MarkDetach:
    """Set a ``DETACH#`` record's state (``terminating`` before the terminate, ``terminated``/``gone`` after)."""

    instance_id: str
    state: DetachState
    why: str

    def describe(self) -> str:
        return f"mark DETACH#{self.instance_id} {self.state.value} ({self.why})"


@dataclass(frozen=True)
class TerminateDetached:
    """EC2 TerminateInstances for an instance detached for early replacement and still running past its deadline."""

    instance_id: str
    why: str

    def describe(self) -> str:
        return f"terminate detached {self.instance_id} ({self.why})"


@dataclass(frozen=True)
class Note:
    """Something not done, or explained: logged and counted by reason, no effect."""

    reason: Reason
    detail: str = ""
    units: int = 0  # ``left_raised``: the units and MaxSizes left raised (``CapacityLeftRaised``)

    def describe(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


Action = WriteLedger | SetCapacity | SendDrain | Terminate | MarkDetach | TerminateDetached | Note
EFFECTS = (WriteLedger, SetCapacity, SendDrain, Terminate, MarkDetach, TerminateDetached)
# Effects that change capacity (they need the cluster lock); ledger writes of backoff only do not.
CAPACITY_EFFECTS = (SetCapacity, SendDrain, Terminate, TerminateDetached)
