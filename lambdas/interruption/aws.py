"""The interruption Lambda's only AWS adapter: Auto Scaling and EC2 look-ups, DetachInstances, SQS SendMessage.

Thin: no decisions. botocore errors become ``core.exceptions`` types, raised ``from`` the botocore error, by
``lambdas.common.aws``: ``AwsUnavailableError`` (retryable: throttling, 5xx, connection) or ``AwsRequestError``
(not retryable: access denied, validation).
"""

from __future__ import annotations

from typing import Any

from core.lifecycle import LifecycleAction
from lambdas.common import aws as common
from lambdas.interruption.world import InstanceFacts

# DescribeInstances' answer for an id EC2 does not know ("Error codes for the Amazon EC2 API").
UNKNOWN_INSTANCE_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


class InterruptionAws(common.LambdaAws):
    """AWS calls of the interruption Lambda (``send_command`` is ``lambdas.common.aws.LambdaAws``'s).

    Args:
        autoscaling: a boto3 ``autoscaling`` client.
        ec2: a boto3 ``ec2`` client.
        sqs: a boto3 ``sqs`` client.
        queue_url: the command queue (a FIFO queue is recognised by its ``.fifo`` suffix).
        lifecycle_client: the ``autoscaling`` client CompleteLifecycleAction goes through (default
            ``autoscaling``; tests pass one wrapped in botocore's Stubber, moto lacks the call).
    """

    def __init__(self, autoscaling: Any, ec2: Any, sqs: Any, queue_url: str, lifecycle_client: Any = None) -> None:
        super().__init__(autoscaling, ec2, sqs, queue_url)
        self.lifecycle_client = lifecycle_client or autoscaling

    # -- look-ups ------------------------------------------------------------------------------------------

    def describe_group(self, asg_name: str) -> dict[str, Any] | None:
        """One DescribeAutoScalingGroups call: the group (with ``Tags``), or None if it does not exist."""
        out = common.call(
            "DescribeAutoScalingGroups", self.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[asg_name]
        )
        groups = out.get("AutoScalingGroups", [])
        return dict(groups[0]) if groups else None

    def instance_known(self, instance_id: str) -> bool:
        """One DescribeInstances call: False when EC2 does not know the id (NotFound, or no reservation).

        A terminated instance stays known for about an hour after termination.
        """
        out = common.call_unless_gone(
            "DescribeInstances",
            self.ec2.describe_instances,
            lambda code, _: code in UNKNOWN_INSTANCE_CODES,
            InstanceIds=[instance_id],
        )
        if out is None:
            return False
        return any(r.get("Instances") for r in out.get("Reservations", []))

    def instance_facts(self, instance_id: str, recorded_asg: str | None = None) -> InstanceFacts:
        """What AWS says about ``instance_id``: its ASG and lifecycle state, or whether EC2 knows it at all.

        Calls: DescribeAutoScalingInstances (one); DescribeAutoScalingGroups (one) for its group, or for
        ``recorded_asg`` (the group a ``DETACH#`` record names) when the instance is in no group any more;
        DescribeInstances (one) only when the instance is in no group.

        Raises:
            AwsUnavailableError, AwsRequestError: see the module docstring.
        """
        out = common.call(
            "DescribeAutoScalingInstances", self.autoscaling.describe_auto_scaling_instances, InstanceIds=[instance_id]
        )
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
        out = common.call_unless_gone(
            "DetachInstances",
            self.autoscaling.detach_instances,
            lambda code, message: code == "ValidationError" and "not part of" in message,
            InstanceIds=[instance_id],
            AutoScalingGroupName=asg_name,
            ShouldDecrementDesiredCapacity=False,
        )
        return out is not None

    def complete_lifecycle_action(self, action: LifecycleAction) -> bool:
        """CompleteLifecycleAction with ``CONTINUE`` (the instance may terminate now).

        Returns:
            True when Auto Scaling accepted it; False when it no longer knows the action (ValidationError "No
            active Lifecycle Action": it timed out or someone else completed it).

        Raises:
            AwsUnavailableError, AwsRequestError: see the module docstring.
        """
        out = common.call_unless_gone(
            "CompleteLifecycleAction",
            self.lifecycle_client.complete_lifecycle_action,
            lambda code, message: code == "ValidationError" and "No active Lifecycle Action" in message,
            LifecycleHookName=action.hook_name,
            AutoScalingGroupName=action.asg_name,
            LifecycleActionToken=action.token,
            LifecycleActionResult="CONTINUE",
            InstanceId=action.instance_id,
        )
        return out is not None
