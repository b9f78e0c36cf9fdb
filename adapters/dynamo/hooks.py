"""Termination lifecycle actions in the table: the ``HOOK#<instance-id>`` items (``core.lifecycle``), and the one
way to finish an action (``finish``: claim the item, call CompleteLifecycleAction, record how it ended), used by
both finishers, the interruption Lambda and the agent.

An item::

    HOOK#<instance-id>   instance_id, asg_name, hook_name, token (LifecycleActionToken), event_id,
                         state: pending | completing | completed | gone, recorded_at, claimed_by,
                         claim_expires (epoch s), detail, expires_at
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any

from adapters.dynamo.table import Attr, Table
from core.exceptions import AwsUnavailableError, ConflictError
from core.lifecycle import CLAIM_EXPIRY_SECONDS, HookState, LifecycleAction
from core.model import to_epoch, utcnow

PREFIX = "HOOK#"


def hook_sk(instance_id: str) -> str:
    """The sort key of an instance's lifecycle action item."""
    return f"{PREFIX}{instance_id}"


def record_hook(table: Table, action: LifecycleAction, ttl_seconds: int, now: datetime | None = None) -> bool:
    """Record ``action`` as ``pending``. Returns False when this very action (same token) was already recorded
    (a duplicate event); an item of an older action of the instance (another token) is replaced.

    Raises:
        StoreUnavailableError: DynamoDB throttled.
    """
    now = now or utcnow()
    try:
        table.put(
            hook_sk(action.instance_id),
            {
                **action.model_dump(),
                "state": HookState.PENDING.value,
                "recorded_at": now.isoformat(),
                "expires_at": to_epoch(now) + ttl_seconds,
            },
            condition=Attr("pk").not_exists() | Attr("token").ne(action.token),
        )
    except ConflictError:
        return False
    return True


def get_hook(table: Table, instance_id: str) -> dict[str, Any] | None:
    """The ``HOOK#`` item of ``instance_id`` (consistent read), None if there is none."""
    return table.get(hook_sk(instance_id))


def claim_hook(table: Table, instance_id: str, token: str, claimer: str, now: datetime | None = None) -> bool:
    """Move the pending action ``token`` to ``completing`` for ``claimer`` until ``claim_expires`` (now +
    ``core.lifecycle.CLAIM_EXPIRY_SECONDS``); a claim past its expiry is taken over (its finisher died between the
    claim and recording the end, so the action is never left claimed forever). False when someone else holds a
    live claim, it is not pending, or it is another action."""
    now = now or utcnow()
    epoch = to_epoch(now)
    expired_claim = Attr("state").eq(HookState.COMPLETING.value) & (
        Attr("claim_expires").not_exists() | Attr("claim_expires").lt(epoch)
    )
    try:
        table.update(
            hook_sk(instance_id),
            {
                "state": HookState.COMPLETING.value,
                "claimed_by": claimer,
                "claim_expires": epoch + CLAIM_EXPIRY_SECONDS,
                "updated_at": now.isoformat(),
            },
            condition=(Attr("state").eq(HookState.PENDING.value) | expired_claim) & Attr("token").eq(token),
        )
    except ConflictError:
        return False
    return True


def settle_hook(
    table: Table, instance_id: str, token: str, state: HookState, detail: str = "", now: datetime | None = None
) -> None:
    """Record how a claimed action ended (``COMPLETED`` or ``GONE``), or put it back to ``PENDING`` after a
    failed call so the next finisher retries. Lost races (another action now) are ignored."""
    now = now or utcnow()
    with contextlib.suppress(ConflictError):
        table.update(
            hook_sk(instance_id),
            {"state": HookState(state).value, "detail": detail or None, "updated_at": now.isoformat()},
            condition=Attr("token").eq(token),
        )


class Finish(str, Enum):
    """How ``finish`` ended."""

    CLAIMED_ELSEWHERE = "claimed_elsewhere"  # not pending, another action, or another finisher won the claim
    COMPLETED = "completed"  # Auto Scaling accepted CONTINUE
    GONE = "gone"  # Auto Scaling no longer has the action (timed out, completed by someone else)


def finish(
    table: Table,
    action: LifecycleAction,
    claimer: str,
    complete: Callable[[LifecycleAction], bool],
    detail: str = "",
    now: datetime | None = None,
) -> Finish:
    """Finish ``action``: claim its ``HOOK#`` item (``pending`` -> ``completing``), then ``complete`` it (the
    CompleteLifecycleAction(CONTINUE) call: True accepted, False the action is gone), then record the end.

    The claim makes sure only one finisher calls Auto Scaling. When the call fails the claim is put back to
    ``pending`` (so the next drain end, or a redelivered event, retries) and the error is raised.

    Args:
        claimer: who finishes (recorded in ``claimed_by``), e.g. ``interruption-lambda`` or the agent's identity.
        detail: recorded on the item when completed (default ``claimer``).

    Raises:
        AwsUnavailableError, AwsRequestError: from ``complete`` (the claim was put back to ``pending``).
        StoreUnavailableError: the claim could not be written.
    """
    now = now or utcnow()
    if not claim_hook(table, action.instance_id, action.token, claimer, now=now):
        return Finish.CLAIMED_ELSEWHERE
    try:
        accepted = complete(action)
    except Exception as err:
        why = "retrying" if isinstance(err, AwsUnavailableError) else str(err)
        settle_hook(table, action.instance_id, action.token, HookState.PENDING, why, now=now)
        raise
    state = HookState.COMPLETED if accepted else HookState.GONE
    settle_hook(table, action.instance_id, action.token, state, detail or claimer, now=now)
    return Finish.COMPLETED if accepted else Finish.GONE


def action_of(item: dict[str, Any]) -> LifecycleAction:
    """The ``LifecycleAction`` a ``HOOK#`` item records."""
    return LifecycleAction(
        instance_id=str(item["instance_id"]),
        asg_name=str(item["asg_name"]),
        hook_name=str(item["hook_name"]),
        token=str(item["token"]),
        event_id=str(item.get("event_id", "")),
    )
