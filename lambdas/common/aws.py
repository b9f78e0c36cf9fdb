"""AWS plumbing shared by the Lambdas' adapters: one call wrapper that translates botocore errors, the cluster's
groups, capacity updates, and the agent's commands on SQS.

Thin: no decisions. botocore errors become ``core.exceptions`` types, raised ``from`` the botocore error:
``AwsUnavailableError`` (retryable: throttling, 5xx, connection) or ``AwsRequestError`` (not retryable: access
denied, validation).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.aws.calls import call, call_unless_gone
from adapters.dynamo.store import Store
from core.exceptions import CommandExistsError
from core.kops import CLUSTER_TAG
from core.model import Command, CommandStatus

DESCRIBE_GROUPS_PAGE = 100  # DescribeAutoScalingGroups' maximum MaxRecords


def cluster_groups(autoscaling: Any, cluster: str) -> list[dict[str, Any]]:
    """Every ASG tagged ``KubernetesCluster=<cluster>``, with ``Instances`` and ``Tags``: DescribeAutoScalingGroups
    with a tag filter, 100 groups a call, following ``NextToken``.

    Args:
        autoscaling: a boto3 ``autoscaling`` client.

    Raises:
        AwsUnavailableError, AwsRequestError.
    """
    groups: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "Filters": [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]}],
        "MaxRecords": DESCRIBE_GROUPS_PAGE,
    }
    while True:
        out = call("DescribeAutoScalingGroups", autoscaling.describe_auto_scaling_groups, **kwargs)
        groups.extend(out.get("AutoScalingGroups", []))
        token = out.get("NextToken")
        if not token:
            return groups
        kwargs["NextToken"] = token


def set_capacity(autoscaling: Any, asg_name: str, desired: int | None, max_size: int | None) -> None:
    """UpdateAutoScalingGroup with the given absolute DesiredCapacity and/or MaxSize (idempotent; MaxSize first in
    effect: one call carries both, so a desired above the old MaxSize is accepted).

    Raises:
        AwsUnavailableError, AwsRequestError (e.g. ``ValidationError`` when MaxSize < desired).
    """
    kwargs: dict[str, Any] = {"AutoScalingGroupName": asg_name}
    if desired is not None:
        kwargs["DesiredCapacity"] = desired
    if max_size is not None:
        kwargs["MaxSize"] = max_size
    call("UpdateAutoScalingGroup", autoscaling.update_auto_scaling_group, **kwargs)


def terminate_in_group(autoscaling: Any, instance_id: str, decrement: bool, gone_messages: tuple[str, ...]) -> bool:
    """TerminateInstanceInAutoScalingGroup.

    Args:
        gone_messages: lower-case fragments of a ``ValidationError`` message meaning Auto Scaling no longer has the
            instance (e.g. ``"not found"``).

    Returns:
        True when asked; False when Auto Scaling no longer has the instance (already terminated or detached, e.g.
        by an invocation that crashed before recording it): a redo after a crash is then harmless.

    Raises:
        AwsUnavailableError, AwsRequestError.
    """
    out = call_unless_gone(
        "TerminateInstanceInAutoScalingGroup",
        autoscaling.terminate_instance_in_auto_scaling_group,
        lambda code, message: code == "ValidationError" and any(m in message.lower() for m in gone_messages),
        InstanceId=instance_id,
        ShouldDecrementDesiredCapacity=decrement,
    )
    return out is not None


class LambdaAws:
    """The clients a Lambda's AWS adapter calls through (built by the entry point, injected by tests), and the
    command sender every adapter has.

    Args:
        autoscaling, ec2, sqs: boto3 clients.
        queue_url: the agent's command queue (a FIFO queue is recognised by its ``.fifo`` suffix).
    """

    def __init__(self, autoscaling: Any, ec2: Any, sqs: Any, queue_url: str) -> None:
        self.autoscaling = autoscaling
        self.ec2 = ec2
        self.sqs = sqs
        self.queue_url = queue_url

    def send_command(self, command: Command) -> str:
        """SendMessage of the command on the queue (``send_command``: on a FIFO queue grouped by instance,
        deduplicated by command id).

        Returns:
            The SQS MessageId.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return send_command(self.sqs, self.queue_url, command)


def send_command(sqs: Any, queue_url: str, command: Command) -> str:
    """SendMessage: body ``command.model_dump_json()``, attributes ``kind`` and ``cluster``.

    On a FIFO queue (``queue_url`` ends in ``.fifo``) the group is the instance (commands for one node stay in
    order) and the deduplication id derives from the command id.

    Returns:
        The SQS MessageId.

    Raises:
        AwsUnavailableError, AwsRequestError.
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
    out = call("SendMessage", sqs.send_message, **kwargs)
    return str(out.get("MessageId", ""))


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
    store: Store, send: Callable[[Command], str], command: Command, ttl_seconds: int, now: datetime
) -> Delivery:
    """Record the command's ``CMD#`` item (conditional: first writer wins), then send it with ``send``; a command
    recorded already is sent (again) only while its item is still ``queued`` (an earlier attempt crashed before
    or after sending; the agent's conditional transitions make a second message harmless).

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError.
    """
    previous = None
    try:
        store.record_command(command, ttl_seconds, now=now)
    except CommandExistsError as err:
        previous = (err.current or {}).get("status")
        if previous != CommandStatus.QUEUED.value:
            return Delivery(message_id=None, previous_status=previous)
    return Delivery(message_id=send(command), previous_status=previous)
