"""Commands in the table: the ``CMD#<command-id>`` items, their status transitions, and look-ups by instance.

An item holds the command (``command``, as sent on SQS), ``kind``, ``instance_id``, ``status`` (``queued`` ->
``running`` -> a terminal status, or back to ``queued`` when released), ``attempt``, the running ``worker`` and its
``heartbeat_at`` (epoch seconds), the age past which that heartbeat is stale to the worker that started it
(``stale_after_seconds``: the agent's ``STALE_RUNNING_SECONDS``, read by the command sweeper), the SQS ``MessageId`` of
the message it was started from (``message_id``), ``result`` once terminal, timestamps, and ``expires_at``. Every
transition is a conditional write; losing one raises a ``ConflictError`` subclass carrying the current item.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import ConditionBase
from pydantic import ValidationError

from adapters.dynamo.command_index import (
    COMMAND_PREFIX,
    INDEXED,
    index_commands,
    index_complete,
    indexed_commands,
)
from adapters.dynamo.table import AlsoPut, Attr, Table, plain
from core.exceptions import CommandExistsError, CommandTransitionError, ConflictError
from core.lock import Lease
from core.model import Command, CommandKind, CommandStatus, to_epoch, utcnow

PREFIX = COMMAND_PREFIX


def command_sk(command_id: str) -> str:
    """The sort key of a command's item."""
    return f"{PREFIX}{command_id}"


def recording(command: Command, ttl_seconds: int, now: datetime) -> AlsoPut:
    """The write that records ``command`` as ``queued`` at ``now`` (aware), the one item ``record_command`` writes,
    conditioned on no item with its id (``CommandExistsError`` otherwise): for a transaction that records it with
    another write (``Table.put(..., also=...)``: a run's save and its drains)."""
    return AlsoPut(
        command_sk(command.command_id),
        {
            "command": command.model_dump(mode="json"),
            "kind": command.kind.value,
            "instance_id": command.instance_id,
            "status": CommandStatus.QUEUED.value,
            "attempt": 0,
            "created_at": now.isoformat(),
            "updated_at": now.isoformat(),
            "expires_at": to_epoch(now) + ttl_seconds,
            INDEXED: True,  # written with its pointers, or after them (``command_index.backfill_pointers``)
        },
        Attr("pk").not_exists(),
        CommandExistsError,
    )


class CommandItems(Table):
    """``CMD#`` items of one cluster: record, start, heartbeat, finish, release (see the module docstring)."""

    @staticmethod
    def command_sk(command_id: str) -> str:
        """The sort key of a command's item."""
        return command_sk(command_id)

    def record_command(
        self, command: Command, ttl_seconds: int, now: datetime | None = None, fence: Lease | None = None
    ) -> None:
        """Record a new command as ``queued``; with ``fence`` (the cluster lock's lease of a capacity operation)
        only while that lease is the lock's current one (``Table.put``).

        Raises:
            LockLostError: (with ``fence``) the lock changed hands; nothing was recorded.
            CommandExistsError: a command with this id is already recorded (carries it as ``current``).
        """
        now = now or utcnow()
        index_commands(self, [command], ttl_seconds, now)  # its pointers first (one left alone answers nothing)
        new = recording(command, ttl_seconds, now)
        self.put(new.sk, new.attrs, condition=new.condition, conflict=new.conflict, fence=fence)

    def get_command(self, command_id: str) -> dict[str, Any] | None:
        return self.get(command_sk(command_id))

    def start_command(
        self,
        command: Command,
        worker: str,
        stale_after_seconds: int,
        ttl_seconds: int,
        now: datetime | None = None,
        *,
        retake_own: bool = False,
        message_id: str | None = None,
    ) -> int:
        """Move a recorded command to ``running`` for ``worker``; returns its attempt number (1, 2, ...).

        Allowed from ``queued``, or ``running`` whose heartbeat is older than ``stale_after_seconds`` (the worker
        died; its message was redelivered), or, with ``retake_own``, ``running`` by ``worker`` itself (the caller
        holds no live job for it: its own handback's release failed, so no one else could start it before its
        heartbeat went stale, minutes past a Spot deadline). Never from no item: a command no Lambda recorded is not
        run (the agent binds a message to its item first, ``agent.consumer.decisions.bind_to_record``). The item's
        ``command``, ``kind`` and ``instance_id`` are left as recorded; ``command`` only names the item. The item
        keeps ``stale_after_seconds`` (when another worker may take it over: the command sweeper sends a message again
        for a ``running`` item stale by it) and ``message_id``, the SQS message being worked (None: unknown), so a
        worker receiving another copy can tell the holder's own message from a redundant one.

        Raises:
            CommandTransitionError: there is no item (``current`` None), the command is terminal, or another live
                worker runs it (``current`` holds the item).
        """
        now = now or utcnow()
        sk = command_sk(command.command_id)
        stale_before = now.timestamp() - stale_after_seconds
        takeable = Attr("status").eq(CommandStatus.QUEUED.value) | (
            Attr("status").eq(CommandStatus.RUNNING.value) & Attr("heartbeat_at").lt(Decimal(str(stale_before)))
        )
        if retake_own:
            takeable = takeable | (Attr("status").eq(CommandStatus.RUNNING.value) & Attr("worker").eq(worker))
        condition = Attr("pk").exists() & takeable
        current = self.get(sk)
        if current is None:
            raise CommandTransitionError(f"start {sk}: no such command recorded", None)
        attempt = int(current.get("attempt", 0)) + 1
        self.update(
            sk,
            {
                "status": CommandStatus.RUNNING.value,
                "attempt": attempt,
                "worker": worker,
                "heartbeat_at": now.timestamp(),
                "stale_after_seconds": stale_after_seconds,
                "message_id": message_id,
                "started_at": now.isoformat(),
                "updated_at": now.isoformat(),
                "expires_at": to_epoch(now) + ttl_seconds,
            },
            condition=condition & (Attr("attempt").not_exists() | Attr("attempt").eq(attempt - 1)),
            conflict=CommandTransitionError,
        )
        return attempt

    def heartbeat_command(
        self,
        command_id: str,
        worker: str,
        attempt: int,
        progress: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """Refresh a running command's heartbeat (and optional progress) while this worker owns it.

        Returns:
            the item after the update (its ``deadline_tightened_to``, if any, is read back by the running drain).

        Raises:
            CommandTransitionError: the command was taken over or finished.
        """
        now = now or utcnow()
        values: dict[str, Any] = {"heartbeat_at": now.timestamp(), "updated_at": now.isoformat()}
        if progress is not None:
            values["progress"] = progress
        return self.updated(
            command_sk(command_id),
            values,
            condition=Attr("status").eq(CommandStatus.RUNNING.value)
            & Attr("worker").eq(worker)
            & Attr("attempt").eq(attempt),
            conflict=CommandTransitionError,
        )

    def finish_command(
        self,
        command_id: str,
        worker: str,
        attempt: int,
        status: CommandStatus,
        result: dict[str, Any],
        now: datetime | None = None,
    ) -> None:
        """Move a running command owned by (worker, attempt) to a terminal ``status`` with its ``result``.

        Raises:
            ValueError: ``status`` is not terminal.
            CommandTransitionError: another worker took the command over, or it is already terminal.
        """
        if not status.terminal:
            raise ValueError(f"{status.value} is not a terminal status")
        now = now or utcnow()
        self.update(
            command_sk(command_id),
            {"status": status.value, "result": result, "finished_at": now.isoformat(), "updated_at": now.isoformat()},
            condition=Attr("status").eq(CommandStatus.RUNNING.value)
            & Attr("worker").eq(worker)
            & Attr("attempt").eq(attempt),
            conflict=CommandTransitionError,
        )

    def release_command(self, command_id: str, worker: str, attempt: int, now: datetime | None = None) -> None:
        """Hand a running command owned by (worker, attempt) back to ``queued``, so any worker may start it at once
        (an agent shutting down). The attempt counter stays, so the next start is ``attempt + 1``.

        Raises:
            CommandTransitionError: the command is no longer this worker's (taken over or finished).
        """
        now = now or utcnow()
        self.update(
            command_sk(command_id),
            {
                "status": CommandStatus.QUEUED.value,
                "worker": None,
                "heartbeat_at": None,
                "released_at": now.isoformat(),
                "updated_at": now.isoformat(),
            },
            condition=Attr("status").eq(CommandStatus.RUNNING.value)
            & Attr("worker").eq(worker)
            & Attr("attempt").eq(attempt),
            conflict=CommandTransitionError,
        )

    def mark_reported(self, command_id: str, status: CommandStatus, now: datetime | None = None) -> None:
        """Stamp ``reported_at`` on a command still in ``status`` (its EventBridge event was accepted).

        Raises:
            ConflictError: the command's status moved on.
        """
        now = now or utcnow()
        self.update(command_sk(command_id), {"reported_at": now.isoformat()}, condition=Attr("status").eq(status.value))


def recorded_command(item: dict[str, Any] | None) -> Command | None:
    """The command a ``CMD#`` item records (its ``command`` attribute), or None when there is none or it does not
    validate. A message sent again for a recorded command must carry this one: the agent rejects a body that differs
    from its item (``agent.consumer.decisions.bind_to_record``)."""
    stored = (item or {}).get("command")
    if not isinstance(stored, dict):
        return None
    try:
        return Command.model_validate(stored)
    except ValidationError:
        return None


def commands_for_instance(table: Table, instance_id: str, kind: CommandKind | None = None) -> list[dict[str, Any]]:
    """The ``CMD#`` items of ``instance_id`` (of ``kind`` when given), newest first (by ``created_at``).

    Once the command index is complete (``adapters.dynamo.command_index``), from the instance's pointers: one Query
    of them and one consistent GetItem per command, however many commands the week holds. Before (an upgrade's
    first week), one Query of the cluster's ``CMD#`` range with a FilterExpression on the instance (and kind):
    DynamoDB reads the whole range (a weekly refresh of 1,000 nodes alone leaves 1,000 items, about 4 MB) but sends
    only the instance's few. Either way the instance (and kind) is checked here on what comes back.
    """
    if index_complete(table, utcnow()):
        items = [
            item for item in indexed_commands(table, instance_id) if kind is None or item.get("kind") == kind.value
        ]
        return sorted(items, key=lambda item: str(item.get("created_at", "")), reverse=True)
    keep: ConditionBase = Attr("instance_id").eq(instance_id)
    if kind is not None:
        keep = keep & Attr("kind").eq(kind.value)
    items = [  # chosen on the table's values (strings compare the same), only those converted
        plain(item)
        for item in table.query_range(PREFIX, PREFIX[:-1] + "$", consistent=True, keep=keep, convert=False)
        if item.get("instance_id") == instance_id and (kind is None or item.get("kind") == kind.value)
    ]
    return sorted(items, key=lambda item: str(item.get("created_at", "")), reverse=True)


def end_queued_command(
    table: Table,
    command_id: str,
    status: CommandStatus,
    message: str,
    marker: tuple[str, str],
    now: datetime | None = None,
) -> bool:
    """End a command that is still ``queued`` with ``status`` (terminal) and a result saying ``message``, and set the
    item's ``marker`` attribute (name, value) saying why: the agent deletes its message as a finished duplicate when
    it arrives. Returns False when it was no longer queued (an agent started it and reports as usual)."""
    now = now or utcnow()
    errors = [] if status is CommandStatus.SKIPPED else [message]
    result = {"status": status.value, "message": message, "pods": [], "remaining": [], "errors": errors}
    try:
        table.update(
            command_sk(command_id),
            {
                "status": status.value,
                "result": result,
                marker[0]: marker[1],
                "finished_at": now.isoformat(),
                "reported_at": now.isoformat(),
                "updated_at": now.isoformat(),
            },
            condition=Attr("status").eq(CommandStatus.QUEUED.value),
        )
    except ConflictError:
        return False
    return True


def end_abandoned_command(
    table: Table,
    command_id: str,
    read: Mapping[str, Any],
    ended_at: datetime,
    message: str,
    now: datetime | None = None,
) -> bool:
    """End a command left ``running`` by a worker that stopped: ``timed_out`` with a result saying ``message`` and
    ``finished_at`` ``ended_at`` (aware: its worker's last heartbeat), conditionally on the item being still
    ``running`` with the ``attempt`` and ``heartbeat_at`` of ``read`` (the item as read, table values): no worker
    took it over, nor beat, since. Returns False when it was not (that worker reports as usual)."""
    now = now or utcnow()
    result = {"status": CommandStatus.TIMED_OUT.value, "message": message, "pods": [], "remaining": [], "errors": []}
    try:
        table.update(
            command_sk(command_id),
            {
                "status": CommandStatus.TIMED_OUT.value,
                "result": result,
                "finished_at": ended_at.isoformat(),
                "updated_at": now.isoformat(),
            },
            condition=Attr("status").eq(CommandStatus.RUNNING.value)
            & Attr("attempt").eq(read.get("attempt"))
            & Attr("heartbeat_at").eq(read.get("heartbeat_at")),
        )
    except ConflictError:
        return False
    return True


def cancel_queued_command(table: Table, command_id: str, why: str, now: datetime | None = None) -> bool:
    """End a ``queued`` command as ``skipped`` with ``why`` (its instance is going away): ``end_queued_command``."""
    return end_queued_command(table, command_id, CommandStatus.SKIPPED, f"cancelled: {why}", ("cancelled", why), now)


def tighten_deadline(table: Table, command_id: str, deadline: datetime, by: str, now: datetime | None = None) -> bool:
    """Bring a ``queued`` or ``running`` command's deadline forward to ``deadline`` (aware): sets the item's
    ``deadline_tightened_to`` (ISO 8601) and ``tightened_by``, never later than one already set (the same value again
    is accepted: a redelivered event). The recorded ``command`` stays as it was (the agent binds a message to it);
    the agent applies the earlier of the two (``agent.consumer.decisions.tightened``) at start and on its heartbeat.

    Returns:
        False when the command is no longer queued or running, or already has an earlier deadline.
    """
    now = now or utcnow()
    when = deadline.astimezone(UTC).isoformat()
    try:
        table.update(
            command_sk(command_id),
            {"deadline_tightened_to": when, "tightened_by": by, "updated_at": now.isoformat()},
            condition=Attr("status").is_in([CommandStatus.QUEUED.value, CommandStatus.RUNNING.value])
            & (Attr("deadline_tightened_to").not_exists() | Attr("deadline_tightened_to").gte(when)),
        )
    except ConflictError:
        return False
    return True


def resolve_cordon(
    table: Table, command_id: str, resolution: str, now: datetime | None = None, over: str | None = None
) -> bool:
    """Record how a command's give-back cordon (``options.uncordon_after_seconds``) was resolved: ``resolution``
    and ``resolved_at``; the first resolution wins (conditional on none yet, or on the resolution being ``over``:
    the agent's releaser replaces its own ``releasing`` claim). Returns False when another resolution was already
    recorded (or there is no such item)."""
    now = now or utcnow()
    unresolved: ConditionBase = Attr("resolution").not_exists()
    if over is not None:
        unresolved = unresolved | Attr("resolution").eq(over)
    try:
        table.update(
            command_sk(command_id),
            {"resolution": resolution, "resolved_at": now.isoformat(), "updated_at": now.isoformat()},
            condition=Attr("pk").exists() & unresolved,
        )
    except ConflictError:
        return False
    return True
