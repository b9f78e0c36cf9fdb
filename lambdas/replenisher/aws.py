"""The replenisher's only AWS adapter: batched Auto Scaling and EC2 reads, UpdateAutoScalingGroup,
TerminateInstanceInAutoScalingGroup, and the agent's commands on SQS.

Thin: no decisions. Errors are translated as in ``lambdas.interruption.aws`` (whose helpers and command sender
it reuses): ``AwsUnavailableError`` (retryable) or ``AwsRequestError``, raised ``from`` the botocore error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

from core.exceptions import AwsUnavailableError
from core.kops import CLUSTER_TAG
from core.model import Command
from lambdas.interruption.aws import InterruptionAws, _call, translate

DESCRIBE_PAGE = 100  # DescribeAutoScalingGroups' maximum MaxRecords
FILTER_VALUES = 200  # values per DescribeInstances filter


class ReplenisherAws:
    """AWS calls of the replenisher.

    Args:
        autoscaling, ec2, sqs: boto3 clients.
        queue_url: the agent's command queue.
    """

    def __init__(self, autoscaling: Any, ec2: Any, sqs: Any, queue_url: str) -> None:
        self.autoscaling = autoscaling
        self.ec2 = ec2
        self.commands = InterruptionAws(autoscaling, ec2, sqs, queue_url)

    def cluster_groups(self, cluster: str) -> list[dict[str, Any]]:
        """Every ASG tagged ``KubernetesCluster=<cluster>``, with ``Instances`` and ``Tags``: DescribeAutoScalingGroups
        with a tag filter, 100 groups a call, following ``NextToken``.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        groups: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"Filters": [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]}],
                                  "MaxRecords": DESCRIBE_PAGE}
        while True:
            out = _call("DescribeAutoScalingGroups", self.autoscaling.describe_auto_scaling_groups, **kwargs)
            groups.extend(out.get("AutoScalingGroups", []))
            token = out.get("NextToken")
            if not token:
                return groups
            kwargs["NextToken"] = token

    def launch_times(self, instance_ids: list[str]) -> dict[str, datetime]:
        """EC2 launch time of each instance (DescribeInstances with an ``instance-id`` filter, 200 ids a call;
        unknown ids are simply absent). No call for an empty list.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        times: dict[str, datetime] = {}
        for start in range(0, len(instance_ids), FILTER_VALUES):
            chunk = instance_ids[start:start + FILTER_VALUES]
            kwargs: dict[str, Any] = {"Filters": [{"Name": "instance-id", "Values": chunk}]}
            while True:
                out = _call("DescribeInstances", self.ec2.describe_instances, **kwargs)
                for reservation in out.get("Reservations", []):
                    for inst in reservation.get("Instances", []):
                        if inst.get("LaunchTime") is not None:
                            times[str(inst["InstanceId"])] = inst["LaunchTime"]
                token = out.get("NextToken")
                if not token:
                    break
                kwargs["NextToken"] = token
        return times

    def set_capacity(self, asg_name: str, desired: int | None, max_size: int | None) -> None:
        """UpdateAutoScalingGroup with the given absolute DesiredCapacity and/or MaxSize (MaxSize first in effect:
        one call carries both, so a desired above the old MaxSize is accepted).

        Raises:
            AwsUnavailableError, AwsRequestError (e.g. ``ValidationError`` when MaxSize < desired).
        """
        kwargs: dict[str, Any] = {"AutoScalingGroupName": asg_name}
        if desired is not None:
            kwargs["DesiredCapacity"] = desired
        if max_size is not None:
            kwargs["MaxSize"] = max_size
        _call("UpdateAutoScalingGroup", self.autoscaling.update_auto_scaling_group, **kwargs)

    def terminate(self, instance_id: str, decrement: bool) -> bool:
        """TerminateInstanceInAutoScalingGroup.

        Returns:
            True when terminated; False when Auto Scaling no longer manages the instance (already terminated,
            detached): a redo after a crash is then harmless.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        try:
            self.autoscaling.terminate_instance_in_auto_scaling_group(
                InstanceId=instance_id, ShouldDecrementDesiredCapacity=decrement)
        except ClientError as err:
            error = err.response.get("Error", {})
            if error.get("Code") == "ValidationError" and "not found" in str(error.get("Message", "")).lower():
                return False
            raise translate("TerminateInstanceInAutoScalingGroup", err) from err
        except (ConnectionError, HTTPClientError) as err:
            raise AwsUnavailableError("TerminateInstanceInAutoScalingGroup", type(err).__name__, str(err)) from err
        return True

    def send_command(self, command: Command) -> str:
        """SendMessage of the command (see ``InterruptionAws.send_command``); returns the message id."""
        return self.commands.send_command(command)
