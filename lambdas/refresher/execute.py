"""The executor: applies a plan's actions in order. The only place with effects, and the only place dry-run lives.

``SaveRun`` comes first in a decision and is conditioned on the run's version: when another invocation saved first
it raises ``RunConflictError`` and nothing else of the decision is done (the caller reads the run again and
decides anew). ``AcquireLock`` raising ``LockHeldError`` stops a start the same way, before ``CreateRun``.

Fencing: ``SaveRun``, ``CreateRun`` and the ``CMD#`` record of ``SendCommand`` are transactions conditioned on the
lease the run holds (``Effects.lease``, or the one ``AcquireLock`` just took) still being the lock's current one. A
lost lease raises ``LockLostError`` and nothing after it is done: the ``SaveRun`` that opens a decision precedes every
Auto Scaling call and drain of it.

Bounded replay: every DesiredCapacity and MaxSize is clamped right before UpdateAutoScalingGroup to the group's
``core.capacity.Bounds`` (``Effects.bounds``, from ``lambdas.refresher.bounds``: what Auto Scaling reported this pass
and the settings, not the ``RUN#`` item): a clamp is logged as a warning and counted (``CapacityClamped``); a group
with no bounds (not one of the run's groups) is not touched (counted ``Skipped``, reason ``unknown_group``).

``SendCommand`` records the ``CMD#`` item first (conditional: a command already recorded is sent again only while
still ``queued``; the agent makes a second message harmless) and then sends it. The ``CMD#`` items of a decision's
drains are written in the transaction of its ``SaveRun`` (``RunStore.save(..., also=...)``, each conditioned on no
item with its id, each with its ``ICMD#`` and ``OCMD#`` pointers, ``adapters.dynamo.command_index``: one call for
the run, the lock and the commands), and their ``SendCommand`` only sends. When the only condition that failed is a
command's (it is recorded already: a drain decided again after a crash between its record and its send), the run is
saved alone and each command goes the way above (``record_and_send``); a lost lock or version fails the save as
always, whatever the commands found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from adapters.aws.ports import AwsPort
from adapters.dynamo.command_delivery import record_and_send
from adapters.dynamo.command_index import mark_index, pointing
from adapters.dynamo.commands import recording
from adapters.dynamo.lock import LeaseLock, Taking
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.capacity import Bounds
from core.exceptions import CommandExistsError, RunAlreadyActiveError
from core.lock import Lease
from core.model import Command
from core.runs import LOCK_OPERATION, run_id_of_holder
from lambdas.common.execute import apply_in_order, set_bounded_capacity
from lambdas.common.telemetry import Telemetry
from lambdas.refresher.passes import recorded_with_save
from lambdas.refresher.plan import (
    EFFECTS,
    AcquireLock,
    Action,
    CreateRun,
    Metric,
    MetricUnitName,
    ReleaseLock,
    SaveRun,
    SendCommand,
    SetCapacity,
    TerminateInstance,
)


@dataclass(frozen=True)
class Effects:
    """What the executor acts with.

    Attributes:
        store: the cluster's table partition; runs: its ``RUN#`` items; lock: the cluster lock.
        aws: the AWS adapter; telemetry: metrics; logger: a Powertools ``Logger`` (or a ``logging.Logger``).
        ttl_seconds: TTL of ``CMD#`` items (``COMMAND_TTL_SECONDS``).
        lease: the cluster lock's lease the run holds (its fencing token); None before ``AcquireLock`` takes it.
        bounds: group name -> the limits its sizes are clamped to (``lambdas.refresher.bounds``); a group without
            bounds is never resized.
        take: with no ``lease``, the lock's taking (``LeaseLock.taking``) the first ``SaveRun`` (or a ``CreateRun``)
            makes in its own transaction; ``taken`` receives the lease once it is taken (the caller releases it,
            even when a later action fails).
    """

    store: Store
    runs: RunStore
    lock: LeaseLock
    aws: AwsPort
    telemetry: Telemetry
    logger: Any
    ttl_seconds: int
    lease: Lease | None = None
    bounds: Mapping[str, Bounds] = field(default_factory=dict)
    take: Taking | None = None
    taken: list[Lease] = field(default_factory=list)


class _Held:
    """The lease the actions are fenced by: the one given, then the one an ``AcquireLock`` took; the commands of the
    decision (its ``SendCommand``s) and those the ``SaveRun``'s transaction recorded."""

    def __init__(self, lease: Lease | None, commands: list[Command]) -> None:
        self.lease = lease
        self.commands = commands
        self.recorded: set[str] = set()


def execute(actions: list[Action], effects: Effects, now: datetime, dry_run: bool = False) -> list[dict[str, str]]:
    """Apply ``actions`` in order.

    Args:
        actions: from ``select``/``decide`` (a ``SaveRun`` or ``AcquireLock`` + ``CreateRun`` first).
        effects: store, lock, AWS adapter, telemetry, logger.
        now: the invocation's time, written into records.
        dry_run: log what would be done and change nothing.

    Returns:
        One ``{"action": <description>, "result": <what happened>}`` per action done, in order.

    Raises:
        RunConflictError: the run changed since it was read (nothing after the ``SaveRun`` was done).
        LockHeldError: another holder has the cluster lock (nothing after the ``AcquireLock`` was done).
        LockLostError: the lease was lost (nothing after the refused write was done).
        RunAlreadyActiveError: at ``CreateRun``, under the lock, another run is active (the lock just taken is
            released, nothing after it done).
        StoreUnavailableError, AwsUnavailableError: transient faults; AwsRequestError: AWS refused a call.
    """
    held = _Held(effects.lease, [a.command for a in actions if isinstance(a, SendCommand)])
    return apply_in_order(
        actions,
        lambda action: _apply(action, effects, now, held),
        effects=EFFECTS,
        logger=effects.logger,
        dry_run=dry_run,
    )


def _apply(action: Action, effects: Effects, now: datetime, held: _Held) -> str:
    if isinstance(action, SaveRun):
        return _save(action, effects, now, held)
    if isinstance(action, SendCommand) and action.command.command_id in held.recorded:
        message_id = effects.aws.queue.send_command(action.command)
        effects.telemetry.count("CommandsQueued")
        return f"recorded with the run's save, sent (message {message_id})"
    if isinstance(action, SendCommand):
        delivery = record_and_send(
            effects.store, effects.aws.queue.send_command, action.command, effects.ttl_seconds, now, held.lease
        )
        if not delivery.sent:
            return f"already recorded with status {delivery.previous_status}: not sent again"
        effects.telemetry.count("CommandsQueued")
        return f"sent (message {delivery.message_id})"
    if isinstance(action, SetCapacity):
        return _set_capacity(action, effects)
    if isinstance(action, TerminateInstance):
        if effects.aws.autoscaling.terminate_in_group(action.instance_id, action.decrement):
            return "terminating"
        return "no longer in the group"
    if isinstance(action, AcquireLock):
        held.lease = effects.lock.acquire(action.holder, LOCK_OPERATION, action.lease_seconds)
        return f"held (fencing {held.lease.fencing})"
    if isinstance(action, CreateRun) and held.lease is None and effects.take is not None:
        # the lock taken in the run's creation, pinned to the free LOCK item read in the Query that found no active
        # run (``lambdas.refresher.start``): any run created since has raised the fencing, and the take fails
        effects.runs.create(action.run, take=effects.take)
        held.lease = effects.take.lease
        effects.taken.append(held.lease)
        effects.telemetry.count("RunsStarted")
        return f"created, cluster lock taken as {held.lease.holder} (fencing {held.lease.fencing})"
    if isinstance(action, CreateRun):
        # the caller's "no active run" was read before the lock: read again under it (a concurrent start may have
        # created its run and released the lock in between); a run already active keeps the cluster to itself
        other = effects.runs.active()
        if other is not None and other.run_id != action.run.run_id:
            if held.lease is not None:
                effects.lock.release(held.lease)
            raise RunAlreadyActiveError(other.run_id)
        effects.runs.create(action.run, fence=held.lease)
        effects.telemetry.count("RunsStarted")
        return "created"
    if isinstance(action, ReleaseLock):
        lease = held.lease
        if lease is None or run_id_of_holder(lease.holder) != action.run_id:
            return f"not held by this invocation (holder {(effects.lock.current() or {}).get('holder')})"
        effects.lock.release(lease)  # conditional on this lease: never another holder's
        return "released"
    if isinstance(action, Metric):
        if action.unit is MetricUnitName.SECONDS:
            effects.telemetry.seconds(action.name, action.value)
        else:
            effects.telemetry.count(action.name, int(action.value))
        return "counted"
    raise TypeError(f"unknown action {action!r}")


def _save(action: SaveRun, effects: Effects, now: datetime, held: _Held) -> str:
    """The ``SaveRun``: fenced by the lease held, or taking the lock (``Effects.take``); with the decision's commands
    recorded in its transaction (module docstring)."""
    take = effects.take if held.lease is None else None
    release_at = now.timestamp() if action.release and held.lease is not None else None
    also = []
    if held.commands and (held.lease is not None or take is not None) and recorded_with_save(len(held.commands)):
        # each with its two pointers (``adapters.dynamo.command_index``), the index mark written before
        mark_index(effects.store, effects.ttl_seconds, now)
        also = [
            w
            for c in held.commands
            for w in (*pointing(c, effects.ttl_seconds, now), recording(c, effects.ttl_seconds, now))
        ]
    try:
        effects.runs.save(action.run, fence=held.lease, release_at=release_at, take=take, also=also)
        held.recorded = {c.command_id for c in held.commands} if also else set()
    except CommandExistsError as err:  # only a command's condition failed (a version or lock loss raises its own)
        effects.logger.info(f"a command of the save is recorded already ({err}): the run saved alone")
        effects.runs.save(action.run, fence=held.lease, release_at=release_at, take=take)
    saved = f"saved (version {action.run.version + 1})"
    if held.recorded:
        saved += f" with {len(held.recorded)} command(s) recorded"
    if take is not None and not take.holds:  # taken and given up by the save itself (``LeaseLock.passing``)
        return f"{saved}, cluster lock taken and given up in the same write (fencing {take.lease.fencing})"
    if take is not None:  # the lock taken by the save itself
        held.lease = take.lease
        effects.taken.append(held.lease)
        return f"{saved}, cluster lock taken (fencing {held.lease.fencing})"
    if release_at is None:
        return saved
    held.lease = None
    return f"{saved}, cluster lock released"


def _set_capacity(action: SetCapacity, effects: Effects) -> str:
    bounds = effects.bounds.get(action.asg_name)
    if bounds is None:
        effects.telemetry.count_by("Skipped", "reason", "unknown_group")
        effects.logger.warning(f"{action.describe()} not done: {action.asg_name} is not one of the run's groups")
        return f"not done: {action.asg_name} is not one of the run's groups"
    return set_bounded_capacity(effects, action.asg_name, action.desired, action.max_size, bounds)
