"""The consumer's pure decisions: what a message body is, whether a drain is too late to start, what a refused
start means for the message, and a result decided without the engine (see ``agent.consumer``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import ValidationError

from core.model import Command, CommandKind, CommandStatus

DEADLINE_PASSED = "deadline passed before start"


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


def deadline_passed(command: Command, now: datetime) -> bool:
    """True for a drain whose deadline is over (it is not started; see the module docstring). Pure."""
    return command.kind is CommandKind.DRAIN and command.seconds_left(now) <= 0


class RefusalDisposition(str, Enum):
    DUPLICATE = "duplicate"  # finished and notified: delete the message
    NOTIFY_AGAIN = "notify_again"  # finished, never notified, its worker surely gone: notify, then delete
    LATER = "later"  # someone else is at it: leave the message, visible again after a delay


def on_refusal(
    current: Mapping[str, Any] | None, now: float, stale_running_seconds: float, visibility_timeout_seconds: int
) -> tuple[RefusalDisposition, int]:
    """What to do with a message whose command ``Store.start_command`` refused. Pure.

    Args:
        current: the ``CMD#`` item as the refusal returned it.
        now: epoch seconds.

    Returns:
        (disposition, delay): for LATER, the seconds until the message should be visible again (1 ..
        visibility timeout): for a command running elsewhere, about when its heartbeat goes stale; for a command
        finished moments ago but not notified yet, when its worker should have notified.
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
        heartbeat = float(current.get("heartbeat_at", 0))
        return RefusalDisposition.LATER, _clamp(heartbeat + stale_running_seconds - now + 1, visibility_timeout_seconds)
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
