"""In-memory SQS standard queue behind ``adapters.aws.ports.CommandSender`` and ``CommandReceiver``: the command queue
as ``adapters.aws.sqs.CommandQueue`` uses it, with a dead-letter queue.

Amazon SQS Developer Guide: "Amazon SQS visibility timeout" (a received message is invisible for the visibility
timeout, then delivered again: at least once; ChangeMessageVisibility sets a new timeout from now, only for a message
in flight, ending at most 12 hours after the receive), "Using dead-letter queues" (a message whose receive count exceeds
``maxReceiveCount`` moves to the dead-letter queue instead of being delivered; the stack's is 3,
``infra.commands.MAX_RECEIVE_COUNT``), "Amazon SQS message identifiers" (a new receipt handle with every receive;
DeleteMessage needs the latest one, an older one deletes nothing), the retention period (the stack's 1 day) and
ReceiveMessage's 1..10 messages. Errors per the SQS API Reference: ``InvalidParameterValue``,
``ReceiptHandleIsInvalid``, ``AWS.SimpleQueueService.MessageNotInflight``.

A long poll does not block here (there are no threads in the simulation): ReceiveMessage answers at once, empty or not,
and the receiver waits on simulated time instead (``sim.agent``): until ``next_visible()``, when the earliest message
becomes visible (a visibility timeout ending), or until a listener (``listen``) is told of a message visible earlier (a
SendMessage; a ChangeMessageVisibility), as the Developer Guide's "Amazon SQS short and long polling" says a long poll
returns as soon as a message is available, or else when its wait ends.

Each call first asks ``faults.check("sqs", <operation>)``; once it took effect, ``faults.check("sqs:lost-answer",
<operation>)`` (``sim.aws_common.check_lost_answer``: a SendMessage whose answer is lost is a message sent that the
sender will send again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.model import Command
from sim.aws_common import check_fault, refuse
from sim.faults import Faults
from sim.kernel import Kernel

MAX_RECEIVE_COUNT = 3  # infra.commands.MAX_RECEIVE_COUNT (the stack's redrive policy)
RETENTION_SECONDS = 86400.0  # infra.commands.COMMAND_RETENTION
DEFAULT_VISIBILITY_SECONDS = 30  # the stack's default visibility timeout
MAX_VISIBILITY_SECONDS = 43200
MAX_MESSAGES = 10
LOST_ANSWER = "sqs:lost-answer"  # the fault service of an answer lost once the call took effect (``check_lost_answer``)


@dataclass(slots=True)
class Message:
    """One message in the queue.

    Attributes:
        receive_count: ``ApproximateReceiveCount`` (receives so far).
        visible_at: simulated second it may be delivered again (0 = now).
        receipt: the receipt handle of the latest receive ("" before the first).
        received_at: simulated second of the latest receive (a visibility timeout ends within 12 hours of it).
    """

    message_id: str
    body: str
    attributes: dict[str, str]
    sent_at: float
    receive_count: int = 0
    visible_at: float = 0.0
    receipt: str = ""
    received_at: float = 0.0

    def raw(self) -> dict[str, Any]:
        """The ``Messages[]`` element of ReceiveMessage with ``ApproximateReceiveCount``."""
        return {
            "MessageId": self.message_id,
            "ReceiptHandle": self.receipt,
            "MD5OfBody": hashlib.md5(self.body.encode(), usedforsecurity=False).hexdigest(),
            "Body": self.body,
            "Attributes": {"ApproximateReceiveCount": str(self.receive_count)},
        }


class SimQueue:
    """The command queue and its dead-letter queue.

    Args:
        kernel: time and the ``sqs:ids`` stream (message ids, receipt handles).
        faults: the run's fault windows (service ``sqs``).
        max_receive_count: the redrive policy's ``maxReceiveCount``.
        retention_seconds: ``MessageRetentionPeriod``.
    """

    def __init__(
        self,
        kernel: Kernel,
        faults: Faults,
        *,
        max_receive_count: int = MAX_RECEIVE_COUNT,
        retention_seconds: float = RETENTION_SECONDS,
    ) -> None:
        self.kernel = kernel
        self.faults = faults
        self.max_receive_count = max_receive_count
        self.retention_seconds = retention_seconds
        self.messages: dict[str, Message] = {}  # by id, in send order
        self.dead_letters: list[Message] = []
        self.expired: list[Message] = []
        self.sent = 0
        self.calls: dict[str, int] = {}
        self._receipts: dict[str, str] = {}  # every receipt handle issued -> its message id
        self._ids = kernel.stream("sqs:ids")
        self._listeners: list[Callable[[float], None]] = []
        # told the id and body of the next command sent, once each (a forger reading the queue: ``sim.actors._forged``)
        self.next_send: list[Callable[[str, str], None]] = []

    def _call(self, operation: str) -> None:
        self.calls[operation] = self.calls.get(operation, 0) + 1
        check_fault(self.faults, "sqs", operation)

    def _answered(self, operation: str) -> None:
        check_fault(self.faults, LOST_ANSWER, operation)  # ``check_lost_answer(faults, "sqs", operation)``

    def _uuid(self) -> str:
        bits = f"{self._ids.getrandbits(128):032x}"
        return f"{bits[:8]}-{bits[8:12]}-4{bits[13:16]}-a{bits[17:20]}-{bits[20:]}"

    # -- sender ----------------------------------------------------------------------------------------------
    def send_command(self, command: Command) -> str:
        """SendMessage: body ``command.model_dump_json()``, attributes ``kind`` and ``cluster``; the MessageId.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        body = command.model_dump_json()
        message_id = self.send_body(body, {"kind": command.kind.value, "cluster": command.cluster})
        sent, self.next_send = self.next_send, []
        for copy_of in sent:  # after the product's message: a forger's copy of it (``sim.actors._forged``)
            copy_of(message_id, body)
        return message_id

    def received_elsewhere(self, message_id: str, visibility_seconds: float) -> None:
        """A ReceiveMessage by another consumer that got ``message_id`` (still visible): its receive count up, hidden
        from every other receive for ``visibility_seconds``, then visible again (nothing deletes it). No call
        counted: not the product's."""
        message = self.messages.get(message_id)
        if message is None or message.visible_at > self.kernel.t:
            return
        message.receive_count += 1
        message.visible_at = message.received_at = self.kernel.t
        message.visible_at += visibility_seconds
        message.receipt = f"{message.message_id}#{self._uuid()}"
        self._receipts[message.receipt] = message.message_id

    def send_body(self, body: str, attributes: dict[str, str] | None = None) -> str:
        """SendMessage of any ``body`` (what a sender with ``sqs:SendMessage`` on the queue may put there, the
        product's or not: ``sim.actors``' forged messages); the MessageId.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        self._call("SendMessage")
        message = Message(message_id=self._uuid(), body=body, attributes=dict(attributes or {}), sent_at=self.kernel.t)
        self.messages[message.message_id] = message
        self.sent += 1
        self._visible(self.kernel.t)  # sent: a waiting long poll returns it (whether or not the answer is lost)
        self._answered("SendMessage")
        return message.message_id

    # -- receiver --------------------------------------------------------------------------------------------
    def receive(self, max_messages: int, wait_seconds: int, visibility_seconds: int) -> list[dict[str, Any]]:
        """ReceiveMessage: up to ``max_messages`` visible messages, each now invisible for ``visibility_seconds``;
        a message received ``max_receive_count`` times already moves to ``dead_letters`` instead.

        Raises:
            AwsUnavailableError; AwsRequestError ``InvalidParameterValue`` (max_messages outside 1..10, wait
            outside 0..20, visibility outside 0..43200).
        """
        operation = "ReceiveMessage"
        self._call(operation)
        if not 1 <= max_messages <= MAX_MESSAGES:
            refuse(
                operation,
                "InvalidParameterValue",
                f"Value {max_messages} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and "
                "10, if provided.",
            )
        if not 0 <= wait_seconds <= 20:
            refuse(
                operation, "InvalidParameterValue", f"Value {wait_seconds} for parameter WaitTimeSeconds is invalid."
            )
        if not 0 <= visibility_seconds <= MAX_VISIBILITY_SECONDS:
            refuse(
                operation,
                "InvalidParameterValue",
                f"Value {visibility_seconds} for parameter VisibilityTimeout is invalid.",
            )
        out: list[dict[str, Any]] = []
        if self.messages:  # most receives are a long poll's on an empty queue
            self._deliver(out, max_messages, visibility_seconds)
        self._answered(operation)  # lost: the messages stay invisible for their timeout, then come back
        return out

    def _deliver(self, out: list[dict[str, Any]], max_messages: int, visibility_seconds: int) -> None:
        """``receive``'s walk of the queue in send order: up to ``max_messages`` visible messages received into
        ``out``; expired and dead-lettered ones moved out of the queue as they are met."""
        now = self.kernel.t
        for message in list(self.messages.values()):
            if len(out) >= max_messages:
                break
            if message.visible_at > now:
                continue
            if now - message.sent_at >= self.retention_seconds:
                del self.messages[message.message_id]
                self.expired.append(message)
                continue
            if message.receive_count >= self.max_receive_count:
                del self.messages[message.message_id]
                self.dead_letters.append(message)
                continue
            message.receive_count += 1
            message.visible_at = now + visibility_seconds
            message.received_at = now
            message.receipt = f"{message.message_id}#{self._uuid()}"
            self._receipts[message.receipt] = message.message_id
            out.append(message.raw())

    def delete(self, receipt: str) -> None:
        """DeleteMessage: deletes the message when ``receipt`` is its latest receipt handle; an older handle (the
        message was received again since) or one of a deleted message deletes nothing and succeeds.

        Raises:
            AwsUnavailableError; AwsRequestError ``ReceiptHandleIsInvalid`` for a handle this queue never issued.
        """
        operation = "DeleteMessage"
        self._call(operation)
        message_id = self._receipts.get(receipt)
        if message_id is None:
            refuse(
                operation,
                "ReceiptHandleIsInvalid",
                f'The input receipt handle "{receipt}" is not a valid receipt handle.',
            )
        message = self.messages.get(message_id)
        if message is not None and message.receipt == receipt:
            del self.messages[message_id]
        self._answered(operation)

    def set_visibility(self, receipt: str, seconds: int) -> None:
        """ChangeMessageVisibility: the message stays invisible ``seconds`` from now.

        Raises:
            AwsUnavailableError; AwsRequestError: ``ReceiptHandleIsInvalid`` (never issued),
            ``InvalidParameterValue`` (seconds outside 0..43200, a deleted message or an older handle),
            ``AWS.SimpleQueueService.MessageNotInflight`` (its visibility timeout lapsed already).
        """
        operation = "ChangeMessageVisibility"
        self._call(operation)
        message_id = self._receipts.get(receipt)
        if message_id is None:
            refuse(
                operation,
                "ReceiptHandleIsInvalid",
                f'The input receipt handle "{receipt}" is not a valid receipt handle.',
            )
        if not 0 <= seconds <= MAX_VISIBILITY_SECONDS:
            refuse(operation, "InvalidParameterValue", f"Value {seconds} for parameter VisibilityTimeout is invalid.")
        message = self.messages.get(message_id)
        if message is None or message.receipt != receipt:
            refuse(
                operation,
                "InvalidParameterValue",
                f"Value {receipt} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "
                "available for visibility timeout change.",
            )
        now = self.kernel.t
        if message.visible_at <= now:
            refuse(operation, "AWS.SimpleQueueService.MessageNotInflight", "Message is not in flight.")
        if now + seconds - message.received_at > MAX_VISIBILITY_SECONDS:
            refuse(
                operation,
                "InvalidParameterValue",
                f"Value {seconds} for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the "
                "message is beyond the limit [43200 seconds]",
            )
        message.visible_at = now + seconds
        self._visible(message.visible_at)
        self._answered(operation)

    # -- long polling (the receiver's wait, on simulated time) -------------------------------------------------
    def next_visible(self) -> float | None:
        """The simulated second (since the epoch) the earliest message is visible: now or earlier when one is
        visible already; None when the queue holds none. A message a receive would move to ``dead_letters`` or
        ``expired`` counts too (the receive that finds it removes it)."""
        messages = self.messages
        return min(m.visible_at for m in messages.values()) if messages else None

    def listen(self, wake: Callable[[float], None]) -> None:
        """Call ``wake(at)`` whenever a message becomes visible at simulated second ``at`` by a call rather than by
        time passing: SendMessage (now) and ChangeMessageVisibility (now + its seconds). ``wake`` runs inside the
        caller's step: it may schedule a kernel action, never receive."""
        self._listeners.append(wake)

    def _visible(self, at: float) -> None:
        for wake in self._listeners:
            wake(at)

    # -- for the invariant checker ---------------------------------------------------------------------------
    def in_flight(self) -> list[Message]:
        """Messages received and not yet visible again."""
        return [m for m in self.messages.values() if m.visible_at > self.kernel.t]
