"""CommandQueue: the SQS queue that carries commands (``core.model.Command``) from the Lambdas to the agent.

Delivery is at least once; the agent makes commands idempotent through the ``CMD#`` item. A message received
``MAX_RECEIVE_COUNT`` times without being deleted (the agent crashed on it each time) moves to the dead-letter queue
and stays there for inspection. Both queues are encrypted at rest (SSE-SQS, or the stack's KMS key) and refuse
requests that are not over TLS (``aws:SecureTransport``). The command queue's policy denies ``sqs:SendMessage`` to
every principal but the roles named with ``restrict_senders`` (the three Lambdas): an identity policy elsewhere in
the account that allows SendMessage on ``*`` cannot put a command on it (an explicit Deny wins,
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html). The agent still runs only
a command that a ``CMD#`` item backs; this closes the channel itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

MAX_RECEIVE_COUNT = 3
# A command is worthless long before this (its deadline is minutes away); kept a day for late agents.
COMMAND_RETENTION = Duration.days(1)
DEAD_LETTER_RETENTION = Duration.days(14)  # the SQS maximum

SEND_ACTIONS = ("sqs:SendMessage",)
CONSUME_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility")
# SQS with a customer managed key (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/
# sqs-key-management.html): producers need GenerateDataKey and Decrypt, consumers Decrypt.
PRODUCER_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
CONSUMER_KEY_ACTIONS = ("kms:Decrypt",)


def encrypted_queue(
    scope: Construct,
    construct_id: str,
    *,
    encryption_key: kms.IKey | None,
    retention_period: Duration,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
    visibility_timeout: Duration | None = None,
) -> sqs.Queue:
    """A queue encrypted at rest (SSE-SQS when ``encryption_key`` is None, else SSE-KMS) that enforces TLS."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS if encryption_key is not None else sqs.QueueEncryption.SQS_MANAGED,
        encryption_master_key=encryption_key,
        enforce_ssl=True,
        retention_period=retention_period,
        dead_letter_queue=dead_letter_queue,
        visibility_timeout=visibility_timeout,
    )


class CommandQueue(Construct):
    """The command queue and its dead-letter queue.

    Parameters:
        encryption_key: encrypt both queues with this customer managed key; None: SSE-SQS.
        visibility_timeout_seconds: the queue's default visibility timeout (the agent extends it while it works,
            ``SQS_VISIBILITY_TIMEOUT_SECONDS``).

    Attributes:
        queue: where commands are sent (``QUEUE_URL``).
        dead_letter_queue: where a command lands after ``MAX_RECEIVE_COUNT`` receives.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        encryption_key: kms.IKey | None = None,
        visibility_timeout_seconds: int = 30,
    ) -> None:
        super().__init__(scope, construct_id)
        self.encryption_key = encryption_key
        self.dead_letter_queue = encrypted_queue(
            self, "DeadLetterQueue", encryption_key=encryption_key, retention_period=DEAD_LETTER_RETENTION
        )
        self.queue = encrypted_queue(
            self,
            "Queue",
            encryption_key=encryption_key,
            retention_period=COMMAND_RETENTION,
            visibility_timeout=Duration.seconds(visibility_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVE_COUNT),
        )

    def grant_send(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` send commands (``SEND_ACTIONS``)."""
        self.queue.grant(grantee, *SEND_ACTIONS)
        if self.encryption_key is not None:
            self.encryption_key.grant(grantee, *PRODUCER_KEY_ACTIONS)

    def restrict_senders(self, senders: Sequence[iam.IRole]) -> None:
        """Deny ``SEND_ACTIONS`` on the command queue to every principal whose ARN (``aws:PrincipalArn``: the role's
        ARN for a session of that role) is not one of ``senders``' roles. Call once, after every producer exists.

        Raises:
            ValueError: no senders (the queue would accept commands from no one).
        """
        if not senders:
            raise ValueError("the command queue needs at least one sender")
        self.queue.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheLambdasSendCommands",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(SEND_ACTIONS),
                resources=[self.queue.queue_arn],
                conditions={"ArnNotEquals": {"aws:PrincipalArn": [role.role_arn for role in senders]}},
            )
        )

    def grant_consume(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` receive, delete and extend the visibility of commands (``CONSUME_ACTIONS``)."""
        self.queue.grant(grantee, *CONSUME_ACTIONS)
        if self.encryption_key is not None:
            self.encryption_key.grant(grantee, *CONSUMER_KEY_ACTIONS)
