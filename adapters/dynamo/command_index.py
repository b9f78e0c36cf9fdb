"""Which commands name an instance, and which may still be open, without reading every command: two *pointers* per
recorded command in the agent partition beside the ``CMD#`` items, ``ICMD#<instance-id>#<command-id>`` (the
instance's) and ``OCMD#<command-id>`` (until the command sweeper finds it ended).

Why: a Spot warning (``lambdas.interruption``) and the agent's cordon check (``agent.cordons.releaser``) ask for
the commands of one instance. Answered from the ``CMD#`` range with a FilterExpression, DynamoDB reads (and bills)
every command of the week: after a weekly refresh of 1,000 nodes about 4 MB, 1,025 strongly consistent read units a
call (``bench/command_reads.py``). A wave of 50 warnings in a few seconds then asks 51,250 read units of one partition
key, 17 seconds of the 3,000 a second a partition serves ("Best practices for designing and using partition keys
effectively", DynamoDB Developer Guide): throttled reads, retried, drains that start later. Through the pointers a
call reads the instance's few pointers (one Query) and their commands (one GetItem each).

Writers put the pointers unconditionally, before the command (``index_commands``, in ``CommandItems.record_command``)
or in the same transaction (``pointing``, in the refresher's save): a pointer whose command was never written (the
write lost its condition or its fence, the writer crashed) answers nothing (``indexed_commands`` reads the command
and checks it names the instance). A pointer expires ``POINTER_TTL_MARGIN_SECONDS`` (30 days) after its command
first would: a command started later is given a later ``expires_at`` (by the agent's ``COMMAND_TTL_SECONDS``), and
the margin covers starts within 30 days and an agent TTL up to 30 days longer than the Lambdas'; a pointer left
after its command expired answers nothing.

The replenisher's command sweeper (``lambdas.common.sweep``) looks only at commands still ``queued`` or ``running``.
Read from the ``CMD#`` range with a FilterExpression, its tick read the week's commands every minute (the same 4 MB
at 1,000 nodes). Through the ``OCMD#`` pointers it reads the open commands and those that ended since its last tick
(``open_commands``: one Query, one GetItem per pointer, at most ``MAX_OPEN_POINTERS`` a tick), and deletes the
pointers of ended commands (``stale_open_pointer``; ``delete_open_pointer``, conditioned on the pointer read): nothing
else ever deletes them, so no status transition (the agent's included) changes. A pointer with no command is deleted
only once it is older than ``ORPHAN_POINTER_SECONDS`` (its command may be being written, after it), or when its
``created_at`` is unreadable or in the future (forged); a command recorded again under the same id (a retry) writes
its pointer again with a new ``created_at``, so a sweep that read the old one deletes nothing.

Commands recorded before the pointers existed (an upgrade) have none. The *index mark* (``ICMD#``, written once by
the first writer that records a command, conditionally) says from when every live command has pointers:
``complete_at`` = when it was written + the command TTL + ``INDEX_MARGIN_SECONDS`` (the commands recorded before the
mark, or by functions still running the previous code while a deployment updates them one by one, expire within
that). Until ``complete_at`` readers answer from the ``CMD#`` range as before; after it, from the pointers. An instance
of ``Table`` remembers both facts once true (``Table.memo``), so a warm Lambda or the agent reads the mark at most
until it is complete.

Rolling back to a version without pointers leaves the mark, and that version records commands without pointers: the
pointer readers of a later upgrade would not see those until they expire. So a command is recorded with
``indexed: true`` (``adapters.dynamo.commands.recording``, written only where its pointers are), and the
replenisher's sweep *backfills* (``backfill_pointers``): at its first tick in an execution environment (a
deployment starts new ones), every ``EARLY_BACKFILL_SECONDS`` (5 min) in that environment's first hour, while a
deployment's old functions may still record, and every ``BACKFILL_SECONDS`` (30 min) after, one Query of the
``CMD#`` range with a FilterExpression ``attribute_not_exists(indexed)`` (DynamoDB reads the range, about 1,025 read
units at 1,000 nodes after a week, and sends only the commands a pointerless writer recorded), then for each of those
its pointers and the stamp (only the stamp for one whose pointer is there: recorded by the versions that wrote
pointers before the stamp existed). After a rollback and a new upgrade the commands of the rollback are thus seen
from the replenisher's first tick; deleting the
mark (docs/DEPLOY.md) is no longer needed, and still safe. The same read repairs a mark forged complete too early.

Trust: the agent's role may write its partition, so it could forge a pointer (answered only when its command names
the instance; a forged open pointer costs the sweep a GetItem until it deletes it, at most ``MAX_OPEN_POINTERS`` a
tick) or a mark that is complete too early (commands recorded before the upgrade unseen until they expire); the same
role reports every command's status and drains nodes itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from adapters.dynamo.table import AlsoPut, Attr, Table
from core.exceptions import AwsRequestError, ConflictError
from core.model import INSTANCE_ID_RE, Command, CommandStatus, to_epoch, utcnow

PREFIX = "ICMD#"
OPEN_PREFIX = "OCMD#"
COMMAND_PREFIX = "CMD#"  # ``adapters.dynamo.commands.PREFIX`` (that module builds on this one)
MARK_SK = PREFIX  # the index mark: no pointer's key is the bare prefix (an instance id is never empty)
ORPHAN_POINTER_SECONDS = 3600  # an open pointer with no command is deleted past this age (4 x a Lambda's longest run)
FUTURE_SKEW_SECONDS = 300  # an open pointer created further in the future than this is forged: deleted
MAX_OPEN_POINTERS = 2000  # open pointers one sweep reads (a GetItem each); more wait for the next tick
INDEX_MARGIN_SECONDS = 3600  # past a TTL after the mark: a deployment's functions updated one by one, and clock skew
POINTER_TTL_MARGIN_SECONDS = 30 * 86400  # a pointer outlives its command's first ``expires_at`` by this much
MARKED = "command_index_marked"  # ``Table.memo`` keys
COMPLETE = "command_index_complete"
BACKFILLED = "command_index_backfilled_at"  # epoch seconds of the last backfill that went through every command
INDEXED = "indexed"  # on a ``CMD#`` item: its pointers were written (``recording``, ``backfill_pointers``)
BACKFILL_SECONDS = 1800  # between two backfills, past an environment's first hour
EARLY_BACKFILL_SECONDS = 300  # between two backfills in an environment's first hour (``backfill_due``)
EARLY_BACKFILL_WINDOW_SECONDS = 3600  # a deployment's old functions may still record for a few minutes of it
FIRST_BACKFILLED = "command_index_first_backfilled_at"  # ``Table.memo``: epoch seconds of this Table's first backfill
MAX_COMMAND_ID = 200  # ``core.model.Command.command_id``'s bound: a longer id in a ``CMD#`` key is forged
MAX_EPOCH = 2**40  # a command's ``expires_at`` at or above this is not a date (forged): a pointer's counts from now
MAX_BACKFILLED = 500  # commands one backfill handles (a GetItem and up to 3 writes each); more: the next tick goes on
OPEN = frozenset({CommandStatus.QUEUED.value, CommandStatus.RUNNING.value})


def pointer_sk(instance_id: str, command_id: str) -> str:
    """The sort key of the pointer from ``instance_id`` to ``command_id``."""
    return f"{PREFIX}{instance_id}#{command_id}"


def open_sk(command_id: str) -> str:
    """The sort key of ``command_id``'s open pointer."""
    return f"{OPEN_PREFIX}{command_id}"


def pointing(
    command: Command, ttl_seconds: int, now: datetime, written: datetime | None = None
) -> tuple[AlsoPut, AlsoPut]:
    """The writes of ``command``'s two pointers (unconditional), for a transaction that records the command with them
    (the refresher's save, ``Table.put(..., also=...)``). The index mark must be written first (``mark_index``).
    ``created_at`` is ``written`` (default ``now``): when the pointer is put."""
    attrs = {
        "command_id": command.command_id,
        "created_at": (written or now).isoformat(),
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
        # stamped when written (not the invocation's ``now``): the orphan age counts from the write
        for write in pointing(command, ttl_seconds, now, written=utcnow()):
            table.put(write.sk, write.attrs)


def mark_index(table: Table, ttl_seconds: int, now: datetime) -> None:
    """Write the index mark unless it exists (conditional: the first writer's stands), ``complete_at`` as the
    module docstring says; remembered on ``table``. ``ttl_seconds``: the command TTL (``COMMAND_TTL_SECONDS``)."""
    if table.memo.get(MARKED):
        return
    if table.get(MARK_SK) is None:
        complete_at = to_epoch(now) + ttl_seconds + INDEX_MARGIN_SECONDS
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
        item = _command(table, command_id)
        if item is not None and item.get("instance_id") == instance_id:
            out.append(item)
    return out


def _command(table: Table, command_id: str) -> dict[str, Any] | None:
    """The ``CMD#`` item a pointer names (a consistent GetItem), None when there is none (or no id)."""
    return table.get(f"{COMMAND_PREFIX}{command_id}", consistent=True) if command_id else None


def open_commands(table: Table, now: datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``CMD#`` items the open pointers name (plain values, by command id), and the pointers to delete
    (``stale_open_pointer``, as read): one Query of the pointers, one consistent GetItem per pointer, at most
    ``MAX_OPEN_POINTERS`` of them (the rest wait for the next call)."""
    items: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    for n, pointer in enumerate(table.query_prefix(OPEN_PREFIX, consistent=True)):
        if n >= MAX_OPEN_POINTERS:
            break
        item = _command(table, str(pointer["sk"])[len(OPEN_PREFIX) :])
        if stale_open_pointer(pointer, item, now):
            stale.append(pointer)
        elif item is not None:
            items.append(item)
    return items, stale


def is_open(item: Mapping[str, Any]) -> bool:
    """Whether a ``CMD#`` item is ``queued`` or ``running`` (a ``status`` of any other value or type is not: a list
    or a map, forged, is never looked up in ``OPEN``). Pure."""
    status = item.get("status")
    return isinstance(status, str) and status in OPEN


def stale_open_pointer(pointer: Mapping[str, Any], item: Mapping[str, Any] | None, now: datetime) -> bool:
    """Whether an open pointer may go: its command ended (any status but ``queued`` and ``running``: ended statuses
    never reopen), or it has none and the pointer is older than ``ORPHAN_POINTER_SECONDS``, dated more than
    ``FUTURE_SKEW_SECONDS`` ahead, or undated. Pure."""
    if item is not None:
        return not is_open(item)
    try:
        created = datetime.fromisoformat(str(pointer.get("created_at")))
        age = (now - created).total_seconds()
    except (TypeError, ValueError):
        return True
    return age > ORPHAN_POINTER_SECONDS or age < -FUTURE_SKEW_SECONDS


def delete_open_pointer(table: Table, pointer: Mapping[str, Any]) -> bool:
    """Delete an open pointer as it was read (conditioned on its ``created_at``: one written again since, by a
    command recorded again under its id, stays). False when it changed (nothing deleted)."""
    created = pointer.get("created_at")
    condition = Attr("created_at").eq(created) if created is not None else Attr("created_at").not_exists()
    try:
        table.delete(str(pointer["sk"]), condition=condition)
    except ConflictError:
        return False
    return True


def backfill_due(table: Table, now: datetime) -> bool:
    """Whether ``backfill_pointers`` should read the commands at ``now``: never yet on this ``Table`` (a new
    execution environment: a deployment starts new ones), then ``EARLY_BACKFILL_SECONDS`` after the last backfill that
    finished while the first is less than ``EARLY_BACKFILL_WINDOW_SECONDS`` old (a deployment's old functions may record
    for a few minutes after this one started), ``BACKFILL_SECONDS`` after it later."""
    last, first = table.memo.get(BACKFILLED), table.memo.get(FIRST_BACKFILLED)
    if not isinstance(last, float):
        return True
    early = isinstance(first, float) and now.timestamp() - first < EARLY_BACKFILL_WINDOW_SECONDS
    return now.timestamp() - last >= (EARLY_BACKFILL_SECONDS if early else BACKFILL_SECONDS)


@dataclass(frozen=True)
class Backfill:
    """What ``backfill_pointers`` did (with ``dry_run``: would do), command ids in sort-key order.

    Attributes:
        pointed: commands given a pointer they lacked: recorded by a version that writes none (a rollback).
        stamped: commands whose pointers were there (recorded by a version that wrote pointers but not ``indexed``:
            an upgrade from it): only ``indexed`` set.
        refused: commands DynamoDB refused a call for (``AwsRequestError``: none is expected, the keys are short and
            the values bounded): left as they are, asked again at the next backfill.
    """

    pointed: tuple[str, ...] = ()
    stamped: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


def pointer_expiry(item: Mapping[str, Any], now: datetime) -> int:
    """A backfilled pointer's ``expires_at`` (epoch seconds): ``POINTER_TTL_MARGIN_SECONDS`` after the command's own
    ``expires_at`` when that is a number in (0, 2**40) (one a Number attribute can carry with the margin added), after
    ``now`` otherwise (none, a bool, a string, a forged 1E+100 DynamoDB would refuse with the margin added).
    Pure."""
    expires = item.get("expires_at")
    if isinstance(expires, int | float | Decimal) and not isinstance(expires, bool) and 0 < expires < MAX_EPOCH:
        return int(expires) + POINTER_TTL_MARGIN_SECONDS
    return to_epoch(now) + POINTER_TTL_MARGIN_SECONDS


def backfill_pointers(table: Table, now: datetime, *, dry_run: bool = False) -> Backfill:
    """Write the pointers of the commands recorded without them (module docstring), when due (``backfill_due``).

    One consistent Query of the ``CMD#`` range keeping only the items without ``indexed``; for each with a command's
    id (at most ``MAX_COMMAND_ID`` characters) that names an instance (``core.model.INSTANCE_ID_RE``), as every
    ``Command`` does (any other item is forged, and no reader asks for it), up to ``MAX_BACKFILLED``: a GetItem of its
    ``ICMD#`` pointer and, while it is ``queued`` or ``running``, of its ``OCMD#`` pointer; the pointers missing
    written (none, after an upgrade from a version that wrote pointers but not the stamp); then ``indexed`` set on
    it, conditioned on the item existing (one deleted meanwhile, by its TTL, is not made again). A pointer expires as
    ``pointer_expiry`` says. A call DynamoDB refuses for one command (``AwsRequestError``) leaves that command and
    goes on with the next (not counted in ``MAX_BACKFILLED``).

    Remembered on ``table`` (``BACKFILLED``, ``backfill_due``): a backfill that went through every command; a dry
    run's always (it said what it would write: reading again each tick would say it again); a refused Query (not
    asked again each tick). One stopped at the bound is not: the next call goes on. ``dry_run``: nothing written
    (the GetItems are made: what is only stamped is told apart).

    Returns:
        A ``Backfill``; empty when not due.

    Raises:
        StoreUnavailableError: a read or a write could not reach the table (what was written stands; the next call
            reads again).
        AwsRequestError: DynamoDB refused the Query (remembered as a backfill: due again after the interval).
    """
    if not backfill_due(table, now):
        return Backfill()
    pointed: list[str] = []
    stamped: list[str] = []
    refused: list[str] = []
    unindexed = Attr(INDEXED).not_exists()
    try:
        for item in table.query_range(COMMAND_PREFIX, COMMAND_PREFIX[:-1] + "$", consistent=True, keep=unindexed):
            command_id = str(item.get("sk", ""))[len(COMMAND_PREFIX) :]
            instance_id = item.get("instance_id")
            if not (
                0 < len(command_id) <= MAX_COMMAND_ID
                and isinstance(instance_id, str)
                and INSTANCE_ID_RE.fullmatch(instance_id)
            ):
                continue  # no ``Command`` has such an id or names no instance: forged; no reader asks for it
            if len(pointed) + len(stamped) >= MAX_BACKFILLED:
                if dry_run:
                    break  # said what it would begin with: a dry run never goes on (nothing it reads changes)
                return Backfill(tuple(pointed), tuple(stamped), tuple(refused))  # the rest at the next call
            try:
                (pointed if _backfilled(table, item, command_id, instance_id, now, dry_run) else stamped).append(
                    command_id
                )
            except AwsRequestError:
                refused.append(command_id)
    except AwsRequestError:
        _remember_backfill(table, now)  # refused (an IAM policy without Query?): not asked every tick
        raise
    _remember_backfill(table, now)
    return Backfill(tuple(pointed), tuple(stamped), tuple(refused))


def _remember_backfill(table: Table, now: datetime) -> None:
    """Note on ``table`` a backfill at ``now`` (``backfill_due`` reads it), and the first one's time."""
    table.memo[BACKFILLED] = now.timestamp()
    table.memo.setdefault(FIRST_BACKFILLED, now.timestamp())


def _backfilled(
    table: Table, item: Mapping[str, Any], command_id: str, instance_id: str, now: datetime, dry_run: bool
) -> bool:
    """Give one unstamped command the pointers it lacks (its ``ICMD#``; its ``OCMD#`` while it is open), then its
    stamp; True when a pointer was missing (``dry_run``: only read)."""
    wanted = [pointer_sk(instance_id, command_id)] + ([open_sk(command_id)] if is_open(item) else [])
    missing = [sk for sk in wanted if table.get(sk) is None]
    if dry_run:
        return bool(missing)
    attrs = {"command_id": command_id, "created_at": utcnow().isoformat(), "expires_at": pointer_expiry(item, now)}
    for sk in missing:
        table.put(sk, attrs)
    with contextlib.suppress(ConflictError):  # deleted meanwhile (its TTL): nothing to stamp
        table.update(f"{COMMAND_PREFIX}{command_id}", {INDEXED: True}, condition=Attr("pk").exists())
    return bool(missing)
