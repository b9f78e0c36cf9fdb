"""ASG termination lifecycle hooks and instance shutdowns in the table: ``HOOK#<instance-id>`` items, and the
``CMD#`` look-ups and cancellations the interruption Lambda and the agent share (models here; table access in
``adapters.dynamo.hooks`` and ``adapters.dynamo.commands``).

A termination lifecycle action (Auto Scaling holds the instance in ``Terminating:Wait`` until someone calls
CompleteLifecycleAction or the hook's heartbeat timeout passes) is recorded by the interruption Lambda as::

    HOOK#<instance-id>   instance_id, asg_name, hook_name, token (LifecycleActionToken), event_id,
                         state: pending | completing | completed | gone, recorded_at, expires_at

and completed (CONTINUE) by whoever ends the instance's drain: the agent when a drain of that instance reaches a
terminal status, whatever command it came from (the Lambda's own ``lifecycle-<event id>`` drain, a Spot drain or
the refresher's), or the Lambda at once when a drain of the instance already succeeded recently. The one that
moves the item ``pending`` → ``completing`` (a conditional write) makes the call, so two finishers never both
complete it. Ordering makes the hand-over safe: the Lambda writes ``HOOK#`` before it reads the drains, and the
agent writes the drain's terminal status before it reads ``HOOK#``, so at least one of them sees the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A claim (``completing``) older than this is abandoned (its finisher died or could not record the end) and may be
# taken again: CompleteLifecycleAction is one short call (the SDK's own retries included, well under a minute), and a
# second CONTINUE for an action already completed is refused harmlessly ("No active Lifecycle Action found").
CLAIM_EXPIRY_SECONDS = 120


def claimable(item: Mapping[str, Any], now_epoch: float) -> bool:
    """Whether a ``HOOK#`` item may be claimed now: ``pending``, or ``completing`` with a claim that expired
    (``claim_expires`` epoch seconds, set by the claim; an old claim without it counts as expired). Pure."""
    state = item.get("state")
    if state == HookState.PENDING.value:
        return True
    if state != HookState.COMPLETING.value:
        return False
    try:
        return float(item.get("claim_expires", 0)) < now_epoch
    except (TypeError, ValueError):
        return True


class HookState(str, Enum):
    """State of a ``HOOK#`` item."""

    PENDING = "pending"  # recorded, waiting for a drain to end
    COMPLETING = "completing"  # claimed by a finisher, CompleteLifecycleAction in flight
    COMPLETED = "completed"  # CompleteLifecycleAction accepted
    GONE = "gone"  # Auto Scaling no longer knows the action (timed out, or completed by someone else)


class LifecycleAction(BaseModel):
    """One termination lifecycle action, as the "EC2 Instance-terminate Lifecycle Action" event names it.

    Attributes:
        instance_id: ``detail.EC2InstanceId``.
        asg_name: ``detail.AutoScalingGroupName``.
        hook_name: ``detail.LifecycleHookName``.
        token: ``detail.LifecycleActionToken`` (identifies this action in CompleteLifecycleAction).
        event_id: the EventBridge event id (for logs).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_id: str
    asg_name: str = Field(min_length=1)
    hook_name: str = Field(min_length=1)
    token: str = Field(min_length=1)
    event_id: str = ""
