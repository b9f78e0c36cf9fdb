"""The executor: applies a replenisher plan's actions in order. The only place with effects, and the only place
dry-run lives.

A ledger write that loses its version condition (``LedgerConflictError``) stops the plan there: what follows was
decided on a ledger someone else has changed, so it is left to the next invocation (which re-reads everything).
The exception propagates, so the event is retried. Other store and AWS errors propagate too.

Fencing: under the cluster lock (``Effects.lease``), every ``COMP#`` write and every ``CMD#`` record is a
transaction conditioned on that lease still being the lock's current one. When the lease was lost (expired and taken
over, or released) the write raises ``LockLostError`` and the plan stops there: a ledger write precedes the Auto
Scaling call it records, and a drain's record precedes its message, so nothing more of the plan reaches AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.aws.ports import AwsPort
from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.commands import record_and_send
from adapters.dynamo.store import Store
from core.lock import Lease
from lambdas.common.execute import apply_in_order
from lambdas.common.telemetry import Telemetry
from lambdas.replenisher.decide.builder import Plan
from lambdas.replenisher.plan import EFFECTS, Action, Note, SendDrain, SetCapacity, Terminate, WriteLedger


@dataclass(frozen=True)
class Effects:
    """What the executor acts with.

    Attributes:
        store: the cluster's table partition.
        aws: the AWS adapter.
        telemetry: metrics.
        logger: a Powertools ``Logger`` (or any ``logging.Logger``-like object).
        ttl_seconds: TTL of the ``CMD#`` items (``COMMAND_TTL_SECONDS``).
        after_action: called with each action once it was applied (tests inject a crash there); None: nothing.
        lease: the cluster lock's lease the plan runs under (its fencing token); None: no lock taken (the plan
            changes no capacity), writes are not fenced.
    """

    store: Store
    aws: AwsPort
    telemetry: Telemetry
    logger: Any
    ttl_seconds: int
    after_action: Callable[[Action], None] | None = None
    lease: Lease | None = None


def execute(plan: Plan, effects: Effects, now: datetime, dry_run: bool = False) -> list[dict[str, str]]:
    """Apply ``plan`` in order.

    Args:
        plan: from ``decide.decide``.
        effects: store, AWS adapter, telemetry, logger.
        now: the invocation's time, written into records.
        dry_run: log what would be done, change nothing (notes are still logged and counted).

    Returns:
        One ``{"action": <description>, "result": <what happened>}`` per action applied, in order.

    Raises:
        LockLostError: the lease was lost; nothing after the refused write was done.
        LedgerConflictError: a ledger changed under this invocation (retry: the next run re-reads it).
        StoreUnavailableError, AwsUnavailableError: transient faults.
        AwsRequestError: AWS refused a call (permissions, validation).
    """
    return apply_in_order(
        plan.actions,
        lambda action: _apply(action, effects, now),
        effects=EFFECTS,
        logger=effects.logger,
        dry_run=dry_run,
        after_action=effects.after_action,
    )


def _apply(action: Action, effects: Effects, now: datetime) -> str:
    if isinstance(action, WriteLedger):
        ledger_store.write(effects.store, action.ledger, action.expected_version, now, fence=effects.lease)
        return "written"
    if isinstance(action, SetCapacity):
        effects.aws.autoscaling.set_capacity(action.asg_name, action.desired, action.max_size)
        effects.telemetry.count("CapacityChanges")
        return "updated"
    if isinstance(action, SendDrain):
        delivery = record_and_send(
            effects.store, effects.aws.queue.send_command, action.command, effects.ttl_seconds, now, effects.lease
        )
        if not delivery.sent:
            return f"already recorded with status {delivery.previous_status}: not sent"
        effects.telemetry.count("CommandsQueued")
        return f"{'re-' if delivery.previous_status is not None else ''}sent (message {delivery.message_id})"
    if isinstance(action, Terminate):
        if effects.aws.autoscaling.terminate_in_group(action.instance_id, action.decrement):
            effects.telemetry.count("InstancesTerminated")
            return "terminated"
        return "no longer in an Auto Scaling group"
    if isinstance(action, Note):
        effects.telemetry.count_by("Skipped", "reason", action.reason.value)
        return "noted"
    raise TypeError(f"unknown action {action!r}")
