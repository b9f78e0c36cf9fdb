"""The command sweeper: no ``CMD#`` item stays ``queued``, or ``running`` under a dead worker, because its message was
lost.

A message the agent could not start (a burst of retryable Kubernetes or DynamoDB errors, an agent crashing on it)
moves to the dead-letter queue after ``MAX_RECEIVE_COUNT`` receives, while its item stays ``queued``: nothing would
ever send it again. Likewise a command whose worker died while it ran stays ``running``: the agent takes it over once
its heartbeat is stale, but only when a message for it arrives, and its message may be gone (dead-lettered, or
deleted as a redundant copy while its holder was alive). The replenisher's periodic tick sweeps (``sweep_commands``):

- a ``queued`` item whose command's deadline has passed is ended ``timed_out`` (message ``expired: never started
  before its deadline``), conditionally on its still being ``queued``: what waits for it treats it as any drain that
  ran out of time (the refresher pauses or terminates by its drain-timeout policy; never ``skipped``, which would
  read as "no node to drain");
- a ``queued`` item last sent (``created_at``, or ``resent_at`` of an earlier sweep) more than
  ``COMMAND_SWEEP_SECONDS`` ago is sent again, exactly as recorded (the agent binds a body to its record), after
  ``resent_at`` is set conditionally on the item still being ``queued``;
- a ``running`` item whose heartbeat (``heartbeat_at``) is older than the staleness its worker recorded
  (``stale_after_seconds``, the agent's ``STALE_RUNNING_SECONDS``; ``COMMAND_SWEEP_SECONDS`` for an item that has
  none) and whose deadline (or the earlier ``deadline_tightened_to``) has not passed is sent again as recorded, at most
  once every ``COMMAND_SWEEP_SECONDS`` (``resent_at``) while no worker started it since (a re-send made before its
  ``started_at``, while it was queued or by an earlier retake, was taken: a worker dying after it is retaken at the
  next tick, not ``COMMAND_SWEEP_SECONDS`` after that re-send), after ``resent_at`` is set conditionally on the item
  being still ``running`` with a heartbeat that old: an agent receiving it takes the command over (``attempt + 1``)
  as it would on a redelivery. One past its deadline is left alone: what waits for it judges it timed out by then
  (``lambdas.refresher.decide.context.drain_outcome``), and a drain started that late would do nothing.

A second message for a command whose first is still queued is harmless: the agent's conditional start runs it once.
A SendMessage SQS refuses is not a re-send: its ``resent_at`` stamp is removed again (the command is due at the next
tick) and it is not reported; once SQS is unavailable or throttling, nothing more is sent that tick.
``stranded`` is the pure rule; ``sweep_commands`` applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from adapters.aws.ports import CommandSender
from adapters.dynamo.command_index import (
    OPEN,
    backfill_pointers,
    delete_open_pointer,
    index_complete,
    is_open,
    open_commands,
)
from adapters.dynamo.commands import command_sk, end_queued_command, recorded_command
from adapters.dynamo.store import Store
from adapters.dynamo.table import Attr, plain
from core.clock import aware_time
from core.exceptions import AwsRequestError, AwsUnavailableError, ConflictError, StoreUnavailableError
from core.model import Command, CommandStatus

EXPIRED = "expired: never started before its deadline"


@dataclass(frozen=True)
class Sweep:
    """What to do with the stranded commands: ``resend`` (``queued``, as recorded), ``expire`` (command ids) and
    ``retake`` (``running`` under a stale heartbeat: the command and the epoch second before which a heartbeat is
    stale, the resend's condition)."""

    resend: tuple[Command, ...] = ()
    expire: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = field(default=())
    retake: tuple[tuple[Command, float], ...] = ()


# the largest epoch second or staleness read (about the year 5138): anything past it (a forged item's "1e300", or
# an infinity) is unreadable, never made into a condition DynamoDB cannot take (its numbers stop at 1E+126)
MAX_SECONDS = 1e11


def _epoch(value: Any) -> float | None:
    """``value`` as a number of seconds, None when absent, not a number, or beyond ``MAX_SECONDS`` either way."""
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and abs(seconds) <= MAX_SECONDS else None


def stale_since(item: Mapping[str, Any], now: datetime, after_seconds: float) -> float | None:
    """For a ``running`` item whose worker is presumed dead, the epoch second before which a heartbeat is stale (its
    ``stale_after_seconds`` before ``now``, else ``after_seconds``); None while its heartbeat is fresh or unreadable.
    Pure."""
    heartbeat = _epoch(item.get("heartbeat_at"))
    stale_after = _epoch(item.get("stale_after_seconds"))
    if heartbeat is None:
        return None
    before = now.timestamp() - (stale_after if stale_after is not None and stale_after > 0 else after_seconds)
    return before if heartbeat < before else None


def stranded(items: Iterable[Mapping[str, Any]], now: datetime, after_seconds: float) -> Sweep:
    """Sort the ``CMD#`` items (plain values): ``queued`` ones past their command's deadline are expired, those last
    sent more than ``after_seconds`` before ``now`` re-sent; ``running`` ones under a stale heartbeat, before their
    deadline, not re-sent in the last ``after_seconds``, re-sent (``retake``); everything else is left alone. Pure.

    An item with no readable command (``recorded_command`` None) is reported in ``unreadable``, never sent.
    """
    resend: list[Command] = []
    expire: list[str] = []
    unreadable: list[str] = []
    retake: list[tuple[Command, float]] = []
    for item in items:
        if not is_open(item):  # the statuses the sweeper looks at (any other: never converted)
            continue
        status = item.get("status")
        command = recorded_command(dict(item))
        if command is None:
            unreadable.append(str(item.get("sk", "")))
            continue
        if status == CommandStatus.RUNNING.value:
            tightened = aware_time(item.get("deadline_tightened_to"))
            deadline = min(command.deadline, tightened) if tightened is not None else command.deadline
            before = stale_since(item, now, after_seconds)
            resent, started = aware_time(item.get("resent_at")), aware_time(item.get("started_at"))
            if resent is not None and started is not None and resent <= started:
                resent = None  # a re-send the current start took (made while queued, or the last retake's): spent
            if (
                before is not None
                and deadline > now
                and (resent is None or now - resent >= timedelta(seconds=after_seconds))
            ):
                retake.append((command, before))
            continue
        if command.deadline <= now:
            expire.append(command.command_id)
            continue
        last_sent = aware_time(item.get("resent_at")) or aware_time(item.get("created_at"))
        if last_sent is None or now - last_sent >= timedelta(seconds=after_seconds):
            resend.append(command)
    return Sweep(tuple(resend), tuple(expire), tuple(unreadable), tuple(retake))


def sweep_commands(
    store: Store, sender: CommandSender, now: datetime, after_seconds: float, *, dry_run: bool, logger: Any
) -> dict[str, list[str]]:
    """Apply ``stranded`` to the cluster's open commands. Returns the command ids re-sent (``queued`` and stale
    ``running`` ones alike) and expired.

    Once the command index is complete (``adapters.dynamo.command_index``), the open commands are those its
    ``OCMD#`` pointers name (one Query and a GetItem per pointer: the commands open, and those that ended since the
    last sweep, whose pointers are deleted after the rest is done, ``pointers_deleted`` in the answer), after
    the pointers of commands recorded without them are written, when due (``backfill_pointers``: at the first tick of
    an execution environment, every 5 minutes in its first hour, every half hour after; ``pointers_backfilled`` in the
    answer). Before (an upgrade's first week), one Query of the whole ``CMD#`` range with a FilterExpression on the
    status: DynamoDB reads the week of finished commands with their results, but neither sends them nor has the
    Lambda parse them.

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError.
    """
    stale: list[dict[str, Any]] = []
    backfilled: list[str] = []
    if index_complete(store, now):
        backfilled = _backfill(store, now, dry_run, logger)  # first: a command it gives pointers to is swept below
        found, stale = open_commands(store, now)
        items: Iterable[Mapping[str, Any]] = (item for item in found if is_open(item))
    else:
        queried = store.query_range(
            "CMD#", "CMD$", consistent=True, keep=Attr("status").is_in(sorted(OPEN)), convert=False
        )
        items = (plain(item) for item in queried if is_open(item))
    sweep = stranded(items, now, after_seconds)
    done: dict[str, list[str]] = {"resent": [], "expired": []}
    if backfilled:
        done["pointers_backfilled"] = backfilled
    for sk in sweep.unreadable:
        logger.warning(f"queued or running command item {sk} holds no readable command: left alone")
    if dry_run:
        done["resent"] = [c.command_id for c in sweep.resend] + [c.command_id for c, _ in sweep.retake]
        done["expired"] = list(sweep.expire)
        if stale:  # as with the commands, a dry run says what it would do
            done["pointers_deleted"] = [str(p["sk"]) for p in stale]
        return done
    for command_id in sweep.expire:
        if _expire(store, command_id, now):
            done["expired"].append(command_id)
            logger.warning(f"command {command_id} expired while queued: never started before its deadline")
    unavailable = False
    for command in sweep.resend:
        try:
            store.update(
                command_sk(command.command_id),
                {"resent_at": now.isoformat()},
                condition=Attr("status").eq(CommandStatus.QUEUED.value),
            )
        except ConflictError:
            continue  # an agent started it meanwhile
        sent = _send(store, sender, command, now, logger)
        if sent is None:
            unavailable = True
            break  # SQS unavailable or throttling: the rest, unstamped, are due at the next tick
        if sent:
            done["resent"].append(command.command_id)
            logger.warning(f"command {command.command_id} still queued: sent again as recorded")
    for command, before in () if unavailable else sweep.retake:
        try:
            store.update(
                command_sk(command.command_id),
                {"resent_at": now.isoformat()},
                condition=Attr("status").eq(CommandStatus.RUNNING.value)
                & Attr("heartbeat_at").lt(Decimal(str(before))),
            )
        except ConflictError:
            continue  # its worker beat meanwhile, or it ended or was taken over
        sent = _send(store, sender, command, now, logger)
        if sent is None:
            break
        if sent:
            done["resent"].append(command.command_id)
            logger.warning(f"command {command.command_id} running under a stale heartbeat: sent again as recorded")
    if stale:  # last, after what the sweep is for: a failure here only leaves pointers for the next tick
        done["pointers_deleted"] = _delete_pointers(store, stale, logger)
    return done


def _send(store: Store, sender: CommandSender, command: Command, now: datetime, logger: Any) -> bool | None:
    """SendMessage of ``command``, whose ``resent_at`` was just stamped ``now``. True when sent; when SQS refused it
    (``AwsRequestError``: False) or was unavailable or throttling (``AwsUnavailableError``: None, nothing more is
    sent this tick), the stamp is removed (conditionally on its still being this one), so the command is not taken
    for re-sent and is due again at the next tick; a failure of that removal is logged."""
    try:
        sender.send_command(command)
        return True
    except AwsUnavailableError as err:
        logger.warning(f"command {command.command_id} not sent again this tick: {err}")
        outcome: bool | None = None
    except AwsRequestError as err:
        logger.error(f"command {command.command_id} not sent again: SQS refused it: {err}")
        outcome = False
    try:
        store.update(
            command_sk(command.command_id), {"resent_at": None}, condition=Attr("resent_at").eq(now.isoformat())
        )
    except ConflictError:
        pass  # started, or stamped by another sweep, meanwhile: its stamp is not ours to remove
    except (StoreUnavailableError, AwsRequestError) as err:
        logger.error(f"command {command.command_id} left stamped re-sent though it was not: {err}")
    return outcome


def _backfill(store: Store, now: datetime, dry_run: bool, logger: Any) -> list[str]:
    """``backfill_pointers`` when due, logged; returns the commands given pointers (``Backfill.pointed``). A failure
    to reach the table, or DynamoDB refusing the Query, is logged and leaves the rest of the sweep to go on (due again
    at the next tick, or after the interval: ``backfill_pointers``), and so is any other exception (a defect: the
    stranded commands are still swept); a command whose writes were refused is logged (an error) and left."""
    try:
        backfill = backfill_pointers(store, now, dry_run=dry_run)
    except StoreUnavailableError as err:
        logger.warning(f"command pointers not backfilled this tick: {err}")
        return []
    except AwsRequestError as err:
        logger.error(f"command pointers not backfilled: DynamoDB refused the read: {err}")
        return []
    except Exception as err:  # noqa: BLE001 - a defect here must not keep the stranded commands below unsent
        logger.error(f"command pointers not backfilled: {type(err).__name__}: {err}")
        return []
    if backfill.pointed:
        logger.warning(
            f"{len(backfill.pointed)} commands were recorded without pointers (by a version without them: a "
            f"rollback?): {'would write' if dry_run else 'wrote'} their pointers",
            extra={"commands": list(backfill.pointed[:20])},
        )
    if backfill.stamped:
        logger.info(
            f"{len(backfill.stamped)} commands recorded with pointers before they carried indexed: stamped",
            extra={"commands": list(backfill.stamped[:20])},
        )
    if backfill.refused:
        logger.error(
            f"{len(backfill.refused)} commands without pointers could not be given them (DynamoDB refused a call: "
            "a forged item?): left as they are",
            extra={"commands": list(backfill.refused[:20])},
        )
    return list(backfill.pointed)


def _delete_pointers(store: Store, pointers: Iterable[Mapping[str, Any]], logger: Any) -> list[str]:
    """Delete the open pointers of ended commands (``delete_open_pointer``); stops at the first failure to reach
    the table (logged: the next tick reads them again). Returns the sort keys deleted."""
    deleted: list[str] = []
    for pointer in pointers:
        try:
            if delete_open_pointer(store, pointer):
                deleted.append(str(pointer["sk"]))
        except StoreUnavailableError as err:
            logger.warning(f"open command pointers left for the next sweep: {err}")
            break
    return deleted


def _expire(store: Store, command_id: str, now: datetime) -> bool:
    """End a ``queued`` command ``timed_out`` (``EXPIRED``); False when it was no longer queued."""
    return end_queued_command(store, command_id, CommandStatus.TIMED_OUT, EXPIRED, ("expired", EXPIRED), now)
