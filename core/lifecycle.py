"""ASG termination lifecycle hooks and instance shutdowns in the table: ``HOOK#<instance-id>`` items, and the
``CMD#`` look-ups and cancellations the interruption Lambda and the agent share.

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

from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Attr
from pydantic import BaseModel, ConfigDict, Field

from core.exceptions import ConflictError
from core.model import CommandKind, CommandStatus, to_epoch, utcnow
from core.store import Store

HOOK_PREFIX = "HOOK#"


class HookState:
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


def hook_sk(instance_id: str) -> str:
    return f"{HOOK_PREFIX}{instance_id}"


def record_hook(store: Store, action: LifecycleAction, ttl_seconds: int, now: datetime | None = None) -> bool:
    """Record ``action`` as ``pending``. Returns False when this very action (same token) was already recorded
    (a duplicate event); an item of an older action of the instance (another token) is replaced.

    Raises:
        StoreUnavailableError: DynamoDB throttled.
    """
    now = now or utcnow()
    try:
        store.put(
            hook_sk(action.instance_id),
            {
                **action.model_dump(),
                "state": HookState.PENDING,
                "recorded_at": now.isoformat(),
                "expires_at": to_epoch(now) + ttl_seconds,
            },
            condition=Attr("pk").not_exists() | Attr("token").ne(action.token),
        )
    except ConflictError:
        return False
    return True


def get_hook(store: Store, instance_id: str) -> dict[str, Any] | None:
    """The ``HOOK#`` item of ``instance_id`` (consistent read), None if there is none."""
    return store.get(hook_sk(instance_id))


def claim_hook(store: Store, instance_id: str, token: str, claimer: str, now: datetime | None = None) -> bool:
    """Move the pending action ``token`` to ``completing`` for ``claimer``; False when someone else claimed it,
    it is not pending, or it is another action."""
    now = now or utcnow()
    try:
        store.update(
            hook_sk(instance_id),
            {"state": HookState.COMPLETING, "claimed_by": claimer, "updated_at": now.isoformat()},
            condition=Attr("state").eq(HookState.PENDING) & Attr("token").eq(token),
        )
    except ConflictError:
        return False
    return True


def settle_hook(
    store: Store, instance_id: str, token: str, state: str, detail: str = "", now: datetime | None = None
) -> None:
    """Record how a claimed action ended (``COMPLETED`` or ``GONE``), or put it back to ``PENDING`` after a
    failed call so the next finisher retries. Lost races (another action now) are ignored."""
    now = now or utcnow()
    try:
        store.update(
            hook_sk(instance_id),
            {"state": state, "detail": detail or None, "updated_at": now.isoformat()},
            condition=Attr("token").eq(token),
        )
    except ConflictError:
        pass


def commands_for_instance(store: Store, instance_id: str, kind: CommandKind | None = None) -> list[dict[str, Any]]:
    """The ``CMD#`` items of ``instance_id`` (of ``kind`` when given), newest first (by ``created_at``).

    Reads the cluster's whole ``CMD#`` range (items expire after ``COMMAND_TTL_SECONDS``, a week by default:
    hundreds of items at most) and filters here.
    """
    items = [
        item
        for item in store.query_prefix("CMD#", consistent=True)
        if item.get("instance_id") == instance_id and (kind is None or item.get("kind") == kind.value)
    ]
    return sorted(items, key=lambda item: str(item.get("created_at", "")), reverse=True)


def cancel_queued_command(store: Store, command_id: str, why: str, now: datetime | None = None) -> bool:
    """End a ``queued`` command as ``skipped`` with ``why`` (its instance is going away): the agent deletes its
    message as a finished duplicate when it arrives. Returns False when it was no longer queued (an agent started
    it: that agent finds no node, or drains what is left, and reports as usual)."""
    now = now or utcnow()
    result = {
        "status": CommandStatus.SKIPPED.value,
        "message": f"cancelled: {why}",
        "pods": [],
        "remaining": [],
        "errors": [],
    }
    try:
        store.update(
            Store.command_sk(command_id),
            {
                "status": CommandStatus.SKIPPED.value,
                "result": result,
                "cancelled": why,
                "finished_at": now.isoformat(),
                "reported_at": now.isoformat(),
                "updated_at": now.isoformat(),
            },
            condition=Attr("status").eq(CommandStatus.QUEUED.value),
        )
    except ConflictError:
        return False
    return True
