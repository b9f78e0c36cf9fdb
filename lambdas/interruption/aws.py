"""The interruption Lambda's only AWS adapter: Auto Scaling and EC2 look-ups, DetachInstances, SQS SendMessage.

Thin: no decisions. botocore errors become ``core.exceptions`` types, raised ``from`` the botocore error:
``AwsUnavailableError`` (retryable: throttling, 5xx, connection) or ``AwsRequestError`` (not retryable: access
denied, validation).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

from core.exceptions import AwsRequestError, AwsUnavailableError
from core.lifecycle import LifecycleAction
from core.model import Command
from lambdas.interruption.world import InstanceFacts

T = TypeVar("T")

# Error codes worth retrying (AWS "Common Errors" for EC2 / Auto Scaling / SQS, plus Auto Scaling's
# ResourceContention, "already a pending update to an Auto Scaling resource").
RETRYABLE_CODES = frozenset({
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "Unavailable",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ResourceContention",
    "RequestTimeout",
    "RequestTimeoutException",
})
# DescribeInstances' answer for an id EC2 does not know ("Error codes for the Amazon EC2 API").
UNKNOWN_INSTANCE_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


def translate(operation: str, err: ClientError) -> AwsUnavailableError | AwsRequestError:
    """The project's exception for an AWS error answer (to be raised ``from err``): retryable for throttling
    and 5xx, not retryable otherwise."""
    error = err.response.get("Error", {})
    code = str(error.get("Code", "Unknown"))
    message = str(error.get("Message", ""))
    status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in RETRYABLE_CODES or status >= 500:
        return AwsUnavailableError(operation, code, message)
    return AwsRequestError(operation, code, message)


def _call(operation: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """Call one AWS API operation, translating its errors.

    Raises:
        AwsUnavailableError: throttled, a 5xx, or no connection.
        AwsRequestError: any other error answer.
    """
    try:
        return fn(**kwargs)
    except ClientError as err:
        raise translate(operation, err) from err
    except (ConnectionError, HTTPClientError) as err:
        raise AwsUnavailableError(operation, type(err).__name__, str(err)) from err
    except BotoCoreError as err:
        raise AwsRequestError(operation, type(err).__name__, str(err)) from err


class InterruptionAws:
    """AWS calls of the interruption Lambda.

    Args:
        autoscaling: a boto3 ``autoscaling`` client.
        ec2: a boto3 ``ec2`` client.
        sqs: a boto3 ``sqs`` client.
        queue_url: the command queue (a FIFO queue is recognised by its ``.fifo`` suffix).
        lifecycle_client: the ``autoscaling`` client CompleteLifecycleAction goes through (default
            ``autoscaling``; tests pass one wrapped in botocore's Stubber, moto lacks the call).
    """

    def __init__(self, autoscaling: Any, ec2: Any, sqs: Any, queue_url: str, lifecycle_client: Any = None) -> None:
        self.lifecycle_client = lifecycle_client or autoscaling
        self.autoscaling = autoscaling
        self.ec2 = ec2
        self.sqs = sqs
        self.queue_url = queue_url

    # -- look-ups ------------------------------------------------------------------------------------------

    def describe_group(self, asg_name: str) -> dict[str, Any] | None:
        """One DescribeAutoScalingGroups call: the group (with ``Tags``), or None if it does not exist."""
        out = _call("DescribeAutoScalingGroups", self.autoscaling.describe_auto_scaling_groups,
                    AutoScalingGroupNames=[asg_name])
        groups = out.get("AutoScalingGroups", [])
        return dict(groups[0]) if groups else None

    def instance_known(self, instance_id: str) -> bool:
        """One DescribeInstances call: False when EC2 does not know the id (NotFound, or no reservation).

        A terminated instance stays known for about an hour after termination.
        """
        try:
            out = self.ec2.describe_instances(InstanceIds=[instance_id])
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in UNKNOWN_INSTANCE_CODES:
                return False
            raise translate("DescribeInstances", err) from err
        except (ConnectionError, HTTPClientError) as err:
            raise AwsUnavailableError("DescribeInstances", type(err).__name__, str(err)) from err
        return any(r.get("Instances") for r in out.get("Reservations", []))

    def instance_facts(self, instance_id: str, recorded_asg: str | None = None) -> InstanceFacts:
        """What AWS says about ``instance_id``: its ASG and lifecycle state, or whether EC2 knows it at all.

        Calls: DescribeAutoScalingInstances (one); DescribeAutoScalingGroups (one) for its group, or for
        ``recorded_asg`` (the group a ``DETACH#`` record names) when the instance is in no group any more;
        DescribeInstances (one) only when the instance is in no group.

        Raises:
            AwsUnavailableError, AwsRequestError: see the module docstring.
        """
        out = _call("DescribeAutoScalingInstances", self.autoscaling.describe_auto_scaling_instances,
                    InstanceIds=[instance_id])
        members = [m for m in out.get("AutoScalingInstances", []) if m.get("InstanceId") == instance_id]
        if members:
            member = members[0]
            return InstanceFacts(
                instance_id=instance_id,
                known=True,
                asg=self.describe_group(str(member["AutoScalingGroupName"])),
                lifecycle_state=str(member.get("LifecycleState", "")) or None,
            )
        known = self.instance_known(instance_id)
        asg = self.describe_group(recorded_asg) if recorded_asg else None
        return InstanceFacts(instance_id=instance_id, known=known, asg=asg, lifecycle_state=None)

    # -- effects -------------------------------------------------------------------------------------------

    def detach_instance(self, instance_id: str, asg_name: str) -> bool:
        """DetachInstances with ShouldDecrementDesiredCapacity=False, so the ASG launches a replacement now.

        Returns:
            True when detached; False when Auto Scaling says the instance is not part of the group (already
            detached, e.g. by an earlier attempt that crashed before recording it).

        Raises:
            AwsUnavailableError, AwsRequestError: see the module docstring.
        """
        try:
            self.autoscaling.detach_instances(
                InstanceIds=[instance_id], AutoScalingGroupName=asg_name, ShouldDecrementDesiredCapacity=False
            )
        except ClientError as err:
            error = err.response.get("Error", {})
            if error.get("Code") == "ValidationError" and "not part of" in str(error.get("Message", "")):
                return False
            raise translate("DetachInstances", err) from err
        except (ConnectionError, HTTPClientError) as err:
            raise AwsUnavailableError("DetachInstances", type(err).__name__, str(err)) from err
        return True

    def complete_lifecycle_action(self, action: LifecycleAction) -> bool:
        """CompleteLifecycleAction with ``CONTINUE`` (the instance may terminate now).

        Returns:
            True when Auto Scaling accepted it; False when it no longer knows the action (ValidationError "No
            active Lifecycle Action": it timed out or someone else completed it).

        Raises:
            AwsUnavailableError, AwsRequestError: see the module docstring.
        """
        try:
            self.lifecycle_client.complete_lifecycle_action(
                LifecycleHookName=action.hook_name, AutoScalingGroupName=action.asg_name,
                LifecycleActionToken=action.token, LifecycleActionResult="CONTINUE", InstanceId=action.instance_id)
        except ClientError as err:
            error = err.response.get("Error", {})
            if error.get("Code") == "ValidationError" and "No active Lifecycle Action" in str(error.get("Message")):
                return False
            raise translate("CompleteLifecycleAction", err) from err
        except (ConnectionError, HTTPClientError) as err:
            raise AwsUnavailableError("CompleteLifecycleAction", type(err).__name__, str(err)) from err
        return True

    def send_command(self, command: Command) -> str:
        """SendMessage: body ``command.model_dump_json()``, attributes ``kind`` and ``cluster``.

        On a FIFO queue the group is the instance (commands for one node stay in order) and the deduplication
        id derives from the command id.

        Returns:
            The SQS MessageId.

        Raises:
            AwsUnavailableError, AwsRequestError: see the module docstring.
        """
        kwargs: dict[str, Any] = {
            "QueueUrl": self.queue_url,
            "MessageBody": command.model_dump_json(),
            "MessageAttributes": {
                "kind": {"DataType": "String", "StringValue": command.kind.value},
                "cluster": {"DataType": "String", "StringValue": command.cluster},
            },
        }
        if self.queue_url.endswith(".fifo"):
            kwargs["MessageGroupId"] = command.instance_id
            kwargs["MessageDeduplicationId"] = hashlib.sha256(command.command_id.encode()).hexdigest()[:128]
        out = _call("SendMessage", self.sqs.send_message, **kwargs)
        return str(out.get("MessageId", ""))
