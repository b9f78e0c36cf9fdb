"""Recording a command and sending it, once: the ``CMD#`` item first (conditional: the first writer wins), then its
message on SQS (``record_and_send``). The capacity operations (the replenisher's drains, the refresher's drains
recorded apart from its save) record their commands this way; the item's transitions are
``adapters.dynamo.commands``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from adapters.dynamo.commands import recorded_command
from adapters.dynamo.ports import CommandStore
from core.exceptions import CommandExistsError
from core.lock import Lease
from core.model import Command, CommandStatus


@dataclass(frozen=True)
class Delivery:
    """What ``record_and_send`` did with a command.

    Attributes:
        message_id: the SQS MessageId, or None when the command was not sent.
        previous_status: the status of the ``CMD#`` item found already recorded (None: recorded now).
    """

    message_id: str | None
    previous_status: str | None

    @property
    def sent(self) -> bool:
        return self.message_id is not None


def record_and_send(
    store: CommandStore,
    send: Callable[[Command], str],
    command: Command,
    ttl_seconds: int,
    now: datetime,
    fence: Lease | None = None,
) -> Delivery:
    """Record the command's ``CMD#`` item (conditional: first writer wins), then send it with ``send``; a command
    recorded already is sent (again) only while its item is still ``queued`` (an earlier attempt crashed before
    or after sending; the agent's conditional transitions make a second message harmless), and then as the item
    records it (``recorded_command``: a deadline recomputed now would not match the item, and the agent would
    reject the message).

    Args:
        fence: the cluster lock's lease (capacity operations): the record is fenced by it (``record_command``); a
            command recorded already is re-sent only when the lock check of that same transaction passed (a lost
            lock raises ``LockLostError`` before the item's own condition is looked at).

    Raises:
        LockLostError: (with ``fence``) the lock changed hands; nothing recorded or sent.
        StoreUnavailableError, AwsUnavailableError, AwsRequestError.
    """
    previous = None
    try:
        store.record_command(command, ttl_seconds, now=now, fence=fence)
    except CommandExistsError as err:
        previous = (err.current or {}).get("status")
        if previous != CommandStatus.QUEUED.value:
            return Delivery(message_id=None, previous_status=previous)
        command = recorded_command(err.current) or command
    return Delivery(message_id=send(command), previous_status=previous)
