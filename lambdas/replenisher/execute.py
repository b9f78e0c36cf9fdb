"""The executor: applies a replenisher plan's actions in order. The only place with effects, and the only place
dry-run lives.

Bounded replay: every DesiredCapacity and MaxSize is clamped right before UpdateAutoScalingGroup to the group's
``core.capacity.Bounds`` (``Effects.bounds``, derived from what Auto Scaling reported this invocation and the
settings, not from the table): a clamp is logged as a warning and counted (``CapacityClamped``); a group with no
bounds (not one of the cluster's groups) is not touched.

A terminate Auto Scaling refuses (``AwsRequestError``, e.g. "Currently, desiredSize equals minSize" for a decrement
at MinSize) is logged and counted (``TerminateRefused``), and the rest of the plan is not applied: the ledger writes
after it would record the instance as given back. The ledger still says ``terminating``, so the next invocation
re-reads the group and retries, or re-chooses (``decide.give_back``). So does a terminate with decrement that Auto
Scaling answers with "not part of the group" (the instance left another way: reclaimed, detached, terminated by
someone else): nothing was decremented, and the next invocation judges that by the donor's desired capacity.

An UpdateAutoScalingGroup Auto Scaling refuses (``AwsRequestError``: AccessDenied, a validation error once kOps
changed the group's sizes) is logged and counted (``CapacityChangeRefused``) and raises nothing: the rest of the plan
still applies, but for the later resizes and terminates of that group, which were decided on the sizes it asked. No
ledger write after it counts it done: a give-back records what it asks before the call and counts it once a later
invocation reads it back (``decide.give_back``), and a raise the donor does not hold is read as a reset
(``decide.reality``). Before, the refusal raised out of every invocation's plan: nothing after it was applied, and it
was asked again at every tick, for good.

A ledger write that loses its version condition (``LedgerConflictError``) stops the plan there: what follows was
decided on a ledger someone else has changed, so it is left to the next invocation (which re-reads everything).
The exception propagates, so the event is retried. Other store and AWS errors propagate too.

Fencing: under the cluster lock (``Effects.lease``), every ``COMP#`` write and every ``CMD#`` record is a
transaction conditioned on that lease still being the lock's current one. When the lease was lost (expired and taken
over, or released) the write raises ``LockLostError`` and the plan stops there: a ledger write precedes the Auto
Scaling call it records, and a drain's record precedes its message, so nothing more of the plan reaches AWS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from adapters.aws.ports import AwsPort
from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.command_delivery import record_and_send
from adapters.dynamo.store import Store
from core.capacity import Bounds
from core.exceptions import AwsRequestError
from core.lock import Lease
from lambdas.common.execute import apply_in_order, set_bounded_capacity
from lambdas.common.telemetry import Telemetry
from lambdas.replenisher.decide.builder import Plan
from lambdas.replenisher.plan import (
    EFFECTS,
    Action,
    MarkDetach,
    Note,
    Reason,
    SendDrain,
    SetCapacity,
    Terminate,
    TerminateDetached,
    WriteLedger,
)


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
        bounds: group name -> the limits its sizes are clamped to (``lambdas.replenisher.bounds``); read only by a
            ``SetCapacity`` (the handler makes it only for a plan that has one).
        lease: the cluster lock's lease the plan runs under (its fencing token); None: no lock taken (the plan
            changes no capacity), writes are not fenced.
    """

    store: Store
    aws: AwsPort
    telemetry: Telemetry
    logger: Any
    ttl_seconds: int
    after_action: Callable[[Action], None] | None = None
    bounds: Mapping[str, Bounds] = field(default_factory=dict)
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
        AwsRequestError: AWS refused a call (permissions, validation) other than a resize or a terminate.
    """
    refused: list[str] = []
    resize_refused: dict[str, str] = {}  # group -> why its resize was refused

    def apply(action: Action) -> str:
        if refused and not isinstance(action, Note):
            return f"not applied: {refused[0]}"
        group = action.asg_name if isinstance(action, (SetCapacity, Terminate)) else None
        if group in resize_refused:
            return f"not applied: {resize_refused[group]}"
        if isinstance(action, SetCapacity):
            try:
                return _set_capacity(action, effects)
            except AwsRequestError as err:
                effects.telemetry.count("CapacityChangeRefused")
                effects.logger.warning(
                    f"resize of {action.asg_name} refused: {err}",
                    extra={"asg_name": action.asg_name, "code": err.code},
                )
                resize_refused[action.asg_name] = f"the resize of {action.asg_name} was refused ({err.code})"
                return f"refused: {err}"
        return _apply(action, effects, now, refused)

    return apply_in_order(
        plan.actions,
        apply,
        effects=EFFECTS,
        logger=effects.logger,
        dry_run=dry_run,
        after_action=effects.after_action,
    )


def _apply(action: Action, effects: Effects, now: datetime, refused: list[str]) -> str:
    if isinstance(action, WriteLedger):
        ledger_store.write(effects.store, action.ledger, action.expected_version, now, fence=effects.lease)
        return "written"
    if isinstance(action, SetCapacity):
        return _set_capacity(action, effects)
    if isinstance(action, Terminate):
        try:
            done = effects.aws.autoscaling.terminate_in_group(action.instance_id, action.decrement)
        except AwsRequestError as err:
            effects.telemetry.count("TerminateRefused")
            effects.logger.warning(
                f"terminate of {action.instance_id} in {action.asg_name} refused: {err}",
                extra={"instance_id": action.instance_id, "asg_name": action.asg_name, "code": err.code},
            )
            refused.append(f"the terminate of {action.instance_id} was refused ({err.code}); retried next invocation")
            return f"refused: {err}"
        if done:
            effects.telemetry.count("InstancesTerminated")
            return "terminated"
        if action.decrement:  # it left some other way, decrementing nothing: what follows must not count it done
            refused.append(
                f"{action.instance_id} was no longer in {action.asg_name}, so its terminate decremented nothing; "
                "read back next invocation"
            )
        return "no longer in an Auto Scaling group"
    if isinstance(action, SendDrain):
        delivery = record_and_send(
            effects.store, effects.aws.queue.send_command, action.command, effects.ttl_seconds, now, effects.lease
        )
        if not delivery.sent:
            return f"already recorded with status {delivery.previous_status}: not sent"
        effects.telemetry.count("CommandsQueued")
        return f"{'re-' if delivery.previous_status is not None else ''}sent (message {delivery.message_id})"
    if isinstance(action, MarkDetach):
        effects.store.mark_detached(action.instance_id, action.state, now=now)
        return "recorded"
    if isinstance(action, TerminateDetached):
        effects.aws.ec2.terminate([action.instance_id])
        effects.telemetry.count("DetachedTerminated")
        effects.logger.warning(
            f"detached instance {action.instance_id} terminated: {action.why}",
            extra={"instance_id": action.instance_id},
        )
        return "terminated"
    if isinstance(action, Note):
        effects.telemetry.count_by("Skipped", "reason", action.reason.value)
        if action.reason is Reason.SIZE_RESET:
            effects.telemetry.count("SizeResets")
            effects.logger.warning(action.describe(), extra={"reason": action.reason.value})
        if action.reason is Reason.LEFT_RAISED:
            effects.telemetry.count("CapacityLeftRaised", max(1, action.units))
            effects.logger.warning(action.describe(), extra={"reason": action.reason.value})
        return "noted"
    raise TypeError(f"unknown action {action!r}")


def _set_capacity(action: SetCapacity, effects: Effects) -> str:
    bounds = effects.bounds.get(action.asg_name)
    if bounds is None:
        effects.telemetry.count_by("Skipped", "reason", "unknown_group")
        return f"not done: {action.asg_name} is not one of the cluster's groups"
    result = set_bounded_capacity(effects, action.asg_name, action.desired, action.max_size, bounds)
    effects.telemetry.count("CapacityChanges")
    return result
