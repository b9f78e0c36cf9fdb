"""The consumer's pure decisions: what a message body is, whether the ``CMD#`` item recorded by a Lambda backs it,
whether a drain is too late to start, what a refused start means for the message, and a result decided without the
engine (see ``agent.consumer``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from pydantic import ValidationError

from core.clock import aware_time
from core.model import DEADLINE_PASSED_BEFORE_START, Command, CommandKind, CommandStatus, as_utc

DEADLINE_PASSED = DEADLINE_PASSED_BEFORE_START  # the result message a Lambda reads (``core.model``)


class MessageVerdict(str, Enum):
    RUN = "run"
    FOREIGN = "foreign"
    MALFORMED = "malformed"


@dataclass(frozen=True)
class Parsed:
    """What a message body is: ``command`` is set for RUN and FOREIGN; ``why`` explains the others."""

    verdict: MessageVerdict
    command: Command | None = None
    why: str = ""


def parse_message(body: str, cluster: str) -> Parsed:
    """Sort an SQS message body (``Command.model_dump_json()`` as the Lambdas send it). Pure.

    >>> parse_message("not json", "demo").verdict
    <MessageVerdict.MALFORMED: 'malformed'>
    """
    try:
        command = Command.model_validate_json(body)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        return Parsed(MessageVerdict.MALFORMED, why=f"{where}: {first['msg']}")
    if command.cluster != cluster:
        return Parsed(
            MessageVerdict.FOREIGN, command, f"for cluster {command.cluster!r}, this agent serves {cluster!r}"
        )
    return Parsed(MessageVerdict.RUN, command)


class Rejection(str, Enum):
    """Why a message's command is not run although its body parsed (the ``commands_rejected`` metric's reason)."""

    NO_RECORD = "no_record"  # no CMD# item with the body's command id, or one holding no readable command
    MISMATCH = "mismatch"  # the CMD# item's command differs from what the body claims


# What a body must claim exactly as its CMD# item records it (the fields that choose the node and how it is drained).
# ``reason`` is not compared, yet what the agent acts on is the STORED command's reason (deadline-bound drains,
# control-plane admission in agent/drain/guard.py), never the body's.
BOUND_FIELDS = ("cluster", "kind", "instance_id", "node_name", "deadline", "options")


@dataclass(frozen=True)
class Binding:
    """A message's command checked against its record: ``command`` is the STORED command to run, or None with
    ``rejection`` and ``why`` (the fields that differ, or what is missing)."""

    command: Command | None
    rejection: Rejection | None = None
    why: str = ""


def bind_to_record(claimed: Command, item: Mapping[str, Any] | None) -> Binding:
    """Bind a message body's command to the ``CMD#<command_id>`` item a Lambda recorded for it. Pure.

    The SQS body is only a pointer: anyone allowed to send to the queue can write one, while the item is written by
    the Lambda that decided the command (``adapters.dynamo.commands.record_command``, before it sends). The agent
    runs the command the item holds, and only when the body claims exactly that command (``BOUND_FIELDS``).

    Args:
        claimed: the command parsed from the message body.
        item: the ``CMD#`` item read by ``claimed.command_id`` (plain values), or None when there is none.

    Returns:
        The stored command (to be started whatever its status: ``start_command`` decides that), or a rejection:
        NO_RECORD (no item, or its ``command`` attribute does not validate as a ``Command``), MISMATCH (a bound
        field, or the command id, differs; ``why`` names each field with both values).
    """
    if item is None:
        return Binding(None, Rejection.NO_RECORD, f"no CMD# item for command id {claimed.command_id!r}")
    stored_raw = item.get("command")
    if not isinstance(stored_raw, Mapping):
        return Binding(None, Rejection.NO_RECORD, "the CMD# item holds no command")
    try:
        stored = Command.model_validate(dict(stored_raw))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "command"
        return Binding(None, Rejection.NO_RECORD, f"the CMD# item's command does not validate: {where}: {first['msg']}")
    shown_claimed, shown_stored = claimed.model_dump(mode="json"), stored.model_dump(mode="json")
    differences = [
        f"{name}: body {shown_claimed[name]!r}, recorded {shown_stored[name]!r}"
        for name in ("command_id", *BOUND_FIELDS)
        if getattr(claimed, name) != getattr(stored, name)
    ]
    if differences:
        return Binding(None, Rejection.MISMATCH, "; ".join(differences))
    return Binding(stored)


def capped(command: Command, now: datetime, max_seconds: float) -> Command:
    """``command`` with its deadline brought to at most ``now + max_seconds`` (``MAX_COMMAND_SECONDS``): whatever
    deadline a record carries, a drain blocked by a PodDisruptionBudget ends by then and frees its worker. Pure;
    the same command when its deadline is already nearer."""
    limit = now + timedelta(seconds=max_seconds)
    if command.deadline <= limit:
        return command
    return command.model_copy(update={"deadline": limit})


def deadline_passed(command: Command, now: datetime) -> bool:
    """True for a drain whose deadline is over (it is not started; see the module docstring). Pure."""
    return command.kind is CommandKind.DRAIN and command.seconds_left(now) <= 0


class RefusalDisposition(str, Enum):
    DUPLICATE = "duplicate"  # finished and notified: delete the message
    NOTIFY_AGAIN = "notify_again"  # finished, never notified, its worker surely gone: notify, then delete
    REDUNDANT = "redundant"  # running under a live holder that works another message of it: delete this copy
    LATER = "later"  # someone else is at it: leave the message, visible again after a delay


def on_refusal(
    current: Mapping[str, Any] | None,
    now: float,
    stale_running_seconds: float,
    visibility_timeout_seconds: int,
    message_id: str | None = None,
) -> tuple[RefusalDisposition, int]:
    """What to do with a message whose command ``Store.start_command`` refused. Pure.

    A command ``running`` under a live holder (heartbeat fresh) that started it from another message
    (the item's ``message_id`` is set and is not ``message_id``: a Lambda's re-send, the sweep's, a duplicate event's
    command) is REDUNDANT: the copy is deleted rather than left, since each look at it spends one of the queue's
    ``maxReceiveCount`` receives and a long drain would see it dead-lettered with nothing wrong. What covers the holder
    dying is its own message (kept invisible by its heartbeat, visible again when it dies) and, when that is gone
    too, the sweep's re-send of a command whose heartbeat went stale (``lambdas.common.sweep``). The holder's own
    message (same ``message_id``: its visibility lapsed, or a handback whose release failed left it running) and
    an item that names no message are left for later as before: deleting them could leave no message at all.

    Args:
        current: the ``CMD#`` item as the refusal returned it.
        now: epoch seconds.
        message_id: the SQS MessageId of the message being handled (None: unknown).

    Returns:
        (disposition, delay): for LATER, the seconds until the message should be visible again: for a command
        running elsewhere, when its heartbeat goes stale (1 .. ``stale_running_seconds`` + 1); for a command
        finished moments ago but not notified yet, when its worker should have notified (1 .. visibility timeout).
    """
    if current is None:
        return RefusalDisposition.LATER, 1
    status = CommandStatus(current.get("status", CommandStatus.QUEUED.value))
    if status.terminal:
        if current.get("reported_at"):
            return RefusalDisposition.DUPLICATE, 0
        finished = _epoch(current.get("finished_at"))
        age = now - finished if finished is not None else math.inf
        if age >= visibility_timeout_seconds:
            return RefusalDisposition.NOTIFY_AGAIN, 0
        return RefusalDisposition.LATER, _clamp(visibility_timeout_seconds - age + 1, visibility_timeout_seconds)
    if status is CommandStatus.RUNNING:
        # not capped at the visibility timeout: each look spends one of the queue's 3 receives, and one spent before
        # the holder can be stale is wasted (a holder that died, or a handback whose release failed, would otherwise
        # see its message dead-lettered just as the command became takeable, its CMD# left running with no message)
        heartbeat = float(current.get("heartbeat_at", 0))
        holder_message = current.get("message_id")
        live = heartbeat + stale_running_seconds > now
        if live and holder_message and message_id and str(holder_message) != message_id:
            return RefusalDisposition.REDUNDANT, 0
        upper = max(visibility_timeout_seconds, math.ceil(stale_running_seconds) + 1)
        return RefusalDisposition.LATER, _clamp(heartbeat + stale_running_seconds - now + 1, upper)
    return RefusalDisposition.LATER, 1  # queued: lost a race with another starter; look again soon


def own_result(
    command: Command, status: CommandStatus, message: str, errors: list[str] | None = None
) -> dict[str, Any]:
    """A result decided without the engine, in the shape of ``NodeCommandResult``'s JSON (fields it can fill). Pure."""
    return {
        "command_id": command.command_id,
        "kind": command.kind.value,
        "instance_id": command.instance_id,
        "node_name": command.node_name or "",
        "status": status.value,
        "message": message,
        "pods": [],
        "remaining": [],
        "errors": errors or [],
    }


def _clamp(seconds: float, upper: int) -> int:
    return int(min(max(math.ceil(seconds), 1), upper))


def _epoch(iso: Any) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def tightened(command: Command, item: Mapping[str, Any] | None) -> Command:
    """``command`` with the deadline its ``CMD#`` item tightened it to (``deadline_tightened_to``, written by
    ``adapters.dynamo.commands.tighten_deadline`` when a Spot warning came for a node a rebalance drain empties),
    when that is earlier; else ``command`` itself. Pure. An unreadable value is ignored (the recorded deadline
    stands). A tightened drain's instance ends at that deadline, so it never gives its cordon back
    (``options.uncordon_on_failure`` off; ``DrainEngine.tighten`` does the same to a drain already running)."""
    when = tightened_deadline(item)
    if when is None or when >= command.deadline:
        return command
    options = command.options.model_copy(update={"uncordon_on_failure": False})
    return command.model_copy(update={"deadline": when, "options": options})


def tightened_deadline(item: Mapping[str, Any] | None) -> datetime | None:
    """The ``deadline_tightened_to`` of a ``CMD#`` item (aware, UTC), None when absent or unreadable. Pure."""
    raw = (item or {}).get("deadline_tightened_to")
    if not raw:
        return None
    try:
        return as_utc(datetime.fromisoformat(str(raw)))
    except ValueError:
        return None


# A result key: the command was a drain or cordon of a control-plane node the agent refused (``agent.drain.guard``),
# or one whose deadline passed while every control-plane drain slot stayed held. Its instance's lifecycle action is
# never completed: CONTINUE would let Auto Scaling terminate a master that was not drained.
CONTROL_PLANE_REFUSED = "control_plane_refused"


def completes_hook(result: Mapping[str, Any] | None) -> bool:
    """Whether the end of a drain with ``result`` completes its instance's lifecycle action (CONTINUE). Pure."""
    return not (result or {}).get(CONTROL_PLANE_REFUSED)


def pending_when_ended(hook: Mapping[str, Any], finished_at: Any) -> bool:
    """Whether the lifecycle action a ``HOOK#`` item records was already pending when a drain ended at
    ``finished_at`` (its ``CMD#`` item's, ISO 8601): the item's ``recorded_at`` is no later. Pure. False when either
    time is absent, unreadable or has no time zone: a late duplicate of a drain that ended before the action was
    recorded must not complete it (CONTINUE would let Auto Scaling terminate the instance undrained; the drain
    queued for that action completes it when it ends)."""
    recorded, ended = _aware(hook.get("recorded_at")), _aware(finished_at)
    return recorded is not None and ended is not None and recorded <= ended


def _aware(raw: Any) -> datetime | None:
    """An ISO 8601 time with a time zone, in UTC; None when absent, unreadable or naive."""
    when = aware_time(raw)
    return as_utc(when) if when is not None else None


def receive_count(message: Mapping[str, Any]) -> int:
    """The message's ``ApproximateReceiveCount`` (SQS, requested with ReceiveMessage's MessageSystemAttributeNames;
    1 on its first receive), 1 when absent or unreadable. Pure."""
    raw = (message.get("Attributes") or {}).get("ApproximateReceiveCount", 1)
    try:
        return max(1, int(raw))
    except (TypeError, ValueError):
        return 1


def handback_delay(count: int, base: float, cap: float, seconds_left: float | None = None) -> int:
    """Seconds a command handed back after a retryable error stays invisible: ``base * 2**(count - 1)`` for its
    ``count``-th receive, at most ``cap``, and for a drain (``seconds_left`` to its deadline) no later than its
    deadline, so it is tried once more before it. At least 1 (0 only when ``base`` is 0: at once). Pure.

    Each receive counts towards the queue's ``maxReceiveCount``: growing the delay spreads those receives over
    minutes instead of seconds, so a burst of errors ends before the message would be dead-lettered.

    >>> [handback_delay(n, 5, 900) for n in (1, 2, 3, 9, 10)]
    [5, 10, 20, 900, 900]
    """
    delay = min(float(cap), base * 2.0 ** min(max(0, count - 1), 30))
    if seconds_left is not None:
        delay = min(delay, seconds_left)
    return max(1 if base > 0 else 0, math.ceil(delay))
