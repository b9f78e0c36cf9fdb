"""SQS: the agent's command queue. The Lambdas send commands; the agent receives, extends and deletes them.

Thin: no decisions; errors translated by ``adapters.aws.calls``. The message body is ``Command.model_dump_json()``
with the attributes ``kind`` and ``cluster`` (the SQS body is a stable contract, DESIGN.md).
"""

from __future__ import annotations

import hashlib
from typing import Any

from adapters.aws.calls import call
from core.exceptions import AwsUnavailableError
from core.model import Command


def send_command(client: Any, queue_url: str, command: Command) -> str:
    """SendMessage: body ``command.model_dump_json()``, attributes ``kind`` and ``cluster``.

    On a FIFO queue (``queue_url`` ends in ``.fifo``) the group is the instance (commands for one node stay in
    order) and the deduplication id derives from the command id.

    Returns:
        The SQS MessageId.

    Raises:
        AwsUnavailableError: throttled, a 5xx, no connection, or an answer without a MessageId (unreadable).
        AwsRequestError: any other refusal.
    """
    kwargs: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MessageBody": command.model_dump_json(),
        "MessageAttributes": {
            "kind": {"DataType": "String", "StringValue": command.kind.value},
            "cluster": {"DataType": "String", "StringValue": command.cluster},
        },
    }
    if queue_url.endswith(".fifo"):
        kwargs["MessageGroupId"] = command.instance_id
        kwargs["MessageDeduplicationId"] = hashlib.sha256(command.command_id.encode()).hexdigest()[:128]
    out = call("SendMessage", client.send_message, **kwargs)
    if not out.get("MessageId"):
        # every accepted message has an id; botocore reads a 200 whose body is not JSON as {}: not a sent message
        raise AwsUnavailableError("SendMessage", "NoMessageId", "an answer without MessageId (unreadable body)")
    return str(out["MessageId"])


class CommandQueue:
    """The command queue.

    Args:
        client: a boto3 ``sqs`` client (or an ``adapters.aws.clients.LazyClient``).
        queue_url: the queue (a FIFO queue is recognised by its ``.fifo`` suffix).
    """

    def __init__(self, client: Any, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def send_command(self, command: Command) -> str:
        """SendMessage of ``command`` (see ``send_command``); returns the MessageId.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return send_command(self.client, self.queue_url, command)

    def receive(self, max_messages: int, wait_seconds: int, visibility_seconds: int) -> list[dict[str, Any]]:
        """ReceiveMessage (long poll of ``wait_seconds``) with ``ApproximateReceiveCount``; the raw messages.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        out = call(
            "ReceiveMessage",
            self.client.receive_message,
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max_messages,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=visibility_seconds,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return list(out.get("Messages", []))

    def delete(self, receipt: str) -> None:
        """DeleteMessage.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        call("DeleteMessage", self.client.delete_message, QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def set_visibility(self, receipt: str, seconds: int) -> None:
        """ChangeMessageVisibility: the message stays invisible ``seconds`` from now.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        call(
            "ChangeMessageVisibility",
            self.client.change_message_visibility,
            QueueUrl=self.queue_url,
            ReceiptHandle=receipt,
            VisibilityTimeout=seconds,
        )
