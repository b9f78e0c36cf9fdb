"""Which commands name an instance, and which may still be open, without reading every command: two *pointers* per
recorded command in the agent partition beside the ``CMD#`` items, ``ICMD#<instance-id>#<command-id>`` (the
instance's) and ``OCMD#<command-id>`` (until the command sweeper finds it ended).

Why: a Spot warning (``lambdas.interruption``) and the agent's cordon check (``agent.cordons.releaser``) ask for
the commands of one instance. Answered from the ``CMD#`` range with a FilterExpression, DynamoDB reads (and bills)
every command of the week: after a weekly refresh of 1,000 nodes about a megabyte, some 256 strongly consistent read
units a call. A wave of 50 warnings in a few seconds then asks about 12,800 read units of one partition key, above
the 3,000 a second a partition serves ("Best practices for designing and using partition keys effectively",
DynamoDB Developer Guide): throttled reads, retried, drains that start later. Through the pointers a call reads the
instance's few pointers (one Query) and their commands (one GetItem each).

Writers put the pointer unconditionally, before the command (``index_commands``, in ``CommandItems.record_command``)
or in the same transaction (``pointing``, in the refresher's save): a pointer whose command was never written (the
write lost its condition, the writer crashed) answers nothing (``indexed_commands`` reads the command and checks it
names the instance), and a command never lacks its pointer. A pointer expires ``POINTER_TTL_MARGIN_SECONDS`` after
its command would (a command started later is given a later ``expires_at``; the margin covers starts up to three days
after recording).

The replenisher's command sweeper (``lambdas.common.sweep``) looks only at commands still ``queued`` or ``running``.
Read from the ``CMD#`` range with a FilterExpression, its tick read the week's commands every minute (the same 4 MB
at 1,000 nodes). Through the ``OCMD#`` pointers it reads the open commands and those that ended since its last tick
(``open_commands``: one Query, one GetItem per pointer), and deletes the pointers of ended commands
(``stale_open_pointers``): nothing else ever deletes them, so no status transition (the agent's included) changes. A
pointer with no command is deleted only once it is older than ``ORPHAN_POINTER_SECONDS`` (its command may be being
written, after it).

Commands recorded before the pointers existed (an upgrade) have none. The *index mark* (``ICMD#``, written once by
the first writer that indexes, conditionally) says from when every live command has a pointer: ``complete_at`` =
when it was written + ``INDEX_MARGIN_SECONDS`` (an execution environment still running the previous code may record
a command without a pointer while its invocation lasts, at most the Lambda timeout of 15 minutes), + the command TTL
when the table held a ``CMD#`` item then (they expire within it). Until ``complete_at`` readers answer from the
``CMD#`` range as before; after it, from the pointers. An instance of ``Table`` remembers both facts once true
(``Table.memo``), so a warm Lambda or the agent reads the mark at most until it is complete.

Trust: the agent's role may write its partition, so it could forge a pointer (answered only when its command names
the instance) or a mark that is complete too early (commands recorded before the upgrade unseen until they
expire); the same role reports every command's status and drains nodes itself, so it gains nothing by either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from adapters.dynamo.table import AlsoPut, Attr, Table
from core.exceptions import ConflictError
from core.model import Command, CommandStatus, to_epoch

PREFIX = "ICMD#"
OPEN_PREFIX = "OCMD#"
MARK_SK = PREFIX  # the index mark: no pointer's key is the bare prefix (an instance id is never empty)
ORPHAN_POINTER_SECONDS = 900  # an open pointer with no command is deleted past this age (a Lambda's longest run)
INDEX_MARGIN_SECONDS = 3600  # past the mark, commands the previous code may still record (Lambda timeout <= 900 s)
POINTER_TTL_MARGIN_SECONDS = 3 * 86400  # a pointer outlives its command's first ``expires_at`` by this much
MARKED = "command_index_marked"  # ``Table.memo`` keys
COMPLETE = "command_index_complete"


def pointer_sk(instance_id: str, command_id: str) -> str:
    """The sort key of the pointer from ``instance_id`` to ``command_id``."""
    return f"{PREFIX}{instance_id}#{command_id}"


def open_sk(command_id: str) -> str:
    """The sort key of ``command_id``'s open pointer."""
    return f"{OPEN_PREFIX}{command_id}"


def pointing(command: Command, ttl_seconds: int, now: datetime) -> tuple[AlsoPut, AlsoPut]:
    """The writes of ``command``'s two pointers (unconditional), for a transaction that records the command with them
    (the refresher's save, ``Table.put(..., also=...)``). The index mark must be written first (``mark_index``)."""
    attrs = {
        "command_id": command.command_id,
        "created_at": now.isoformat(),
        "expires_at": to_epoch(now) + ttl_seconds + POINTER_TTL_MARGIN_SECONDS,
    }
    return AlsoPut(pointer_sk(command.instance_id, command.command_id), attrs), AlsoPut(
        open_sk(command.command_id), attrs
    )


def index_commands(table: Table, commands: Iterable[Command], ttl_seconds: int, now: datetime) -> None:
    """Put the index mark if this ``Table`` has not seen it (``mark_index``), then each command's two pointers (a
    PutItem each), before the commands are recorded (module docstring). Idempotent.

    Raises:
        StoreUnavailableError, AwsRequestError: a write failed (the commands are then not recorded either).
    """
    listed = list(commands)
    if not listed:
        return
    mark_index(table, ttl_seconds, now)
    for command in listed:
        for write in pointing(command, ttl_seconds, now):
            table.put(write.sk, write.attrs)


def mark_index(table: Table, ttl_seconds: int, now: datetime) -> None:
    """Write the index mark unless it exists (conditional: the first writer's stands), ``complete_at`` as the
    module docstring says (a Query of the ``CMD#`` range's first page tells whether commands without pointers may
    exist); remembered on ``table``. ``ttl_seconds``: the command TTL (``COMMAND_TTL_SECONDS``)."""
    if table.memo.get(MARKED):
        return
    if table.get(MARK_SK) is None:
        older = next(iter(table.query_range("CMD#", "CMD$", consistent=True, convert=False)), None)
        complete_at = to_epoch(now) + INDEX_MARGIN_SECONDS + (ttl_seconds if older is not None else 0)
        with contextlib.suppress(ConflictError):  # another writer marked it first: its mark stands
            table.put(
                MARK_SK, {"since": now.isoformat(), "complete_at": complete_at}, condition=Attr("pk").not_exists()
            )
    table.memo[MARKED] = True


def index_complete(table: Table, now: datetime) -> bool:
    """Whether every live command has a pointer at ``now`` (the mark's ``complete_at`` passed); True is remembered
    on ``table``. An unreadable mark is not complete."""
    if table.memo.get(COMPLETE):
        return True
    mark = table.get(MARK_SK)
    value = None if mark is None else mark.get("complete_at")
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return False
    if value > now.timestamp():
        return False
    table.memo[COMPLETE] = True
    return True


def indexed_commands(table: Table, instance_id: str) -> list[dict[str, Any]]:
    """The ``CMD#`` items the pointers of ``instance_id`` name that name it too (plain values, any order): one
    Query of its pointers, one consistent GetItem per pointer."""
    prefix = pointer_sk(instance_id, "")
    ids = sorted(
        {str(item["sk"])[len(prefix) :] for item in table.query_prefix(prefix, consistent=True, convert=False)}
    )
    out = []
    for command_id in ids:
        item = table.get(f"CMD#{command_id}", consistent=True) if command_id else None
        if item is not None and item.get("instance_id") == instance_id:
            out.append(item)
    return out


def open_commands(table: Table, now: datetime) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``CMD#`` items the open pointers name (plain values, by command id), and the pointers to delete
    (``stale_open_pointers``): one Query of the pointers, one consistent GetItem per pointer."""
    items: list[dict[str, Any]] = []
    stale: list[str] = []
    for pointer in table.query_prefix(OPEN_PREFIX, consistent=True, convert=False):
        sk = str(pointer["sk"])
        command_id = sk[len(OPEN_PREFIX) :]
        item = table.get(f"CMD#{command_id}", consistent=True) if command_id else None
        if stale_open_pointer(pointer, item, now):
            stale.append(sk)
        elif item is not None:
            items.append(item)
    return items, stale


def stale_open_pointer(pointer: Mapping[str, Any], item: Mapping[str, Any] | None, now: datetime) -> bool:
    """Whether an open pointer may go: its command ended (any status but ``queued`` and ``running``: ended statuses
    never reopen), or it has none and the pointer is older than ``ORPHAN_POINTER_SECONDS`` (or its age unreadable).
    Pure."""
    if item is not None:
        return item.get("status") not in (CommandStatus.QUEUED.value, CommandStatus.RUNNING.value)
    try:
        created = datetime.fromisoformat(str(pointer.get("created_at")))
        age = (now - created).total_seconds()
    except (TypeError, ValueError):
        return True
    return age > ORPHAN_POINTER_SECONDS
