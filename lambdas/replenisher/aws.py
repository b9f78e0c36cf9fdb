"""The replenisher's only AWS adapter: batched Auto Scaling and EC2 reads, UpdateAutoScalingGroup,
TerminateInstanceInAutoScalingGroup, and the agent's commands on SQS.

Thin: no decisions. Errors are translated by ``lambdas.common.aws`` (whose calls it reuses): ``AwsUnavailableError``
(retryable) or ``AwsRequestError``, raised ``from`` the botocore error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lambdas.common import aws as common

FILTER_VALUES = 200  # values per DescribeInstances filter


class ReplenisherAws(common.LambdaAws):
    """AWS calls of the replenisher (``send_command`` is ``lambdas.common.aws.LambdaAws``'s).

    Args:
        autoscaling, ec2, sqs: boto3 clients.
        queue_url: the agent's command queue.
    """

    def cluster_groups(self, cluster: str) -> list[dict[str, Any]]:
        """Every ASG tagged ``KubernetesCluster=<cluster>``, with ``Instances`` and ``Tags``: DescribeAutoScalingGroups
        with a tag filter, 100 groups a call, following ``NextToken``.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return common.cluster_groups(self.autoscaling, cluster)

    def launch_times(self, instance_ids: list[str]) -> dict[str, datetime]:
        """EC2 launch time of each instance (DescribeInstances with an ``instance-id`` filter, 200 ids a call;
        unknown ids are simply absent). No call for an empty list.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        times: dict[str, datetime] = {}
        for start in range(0, len(instance_ids), FILTER_VALUES):
            chunk = instance_ids[start : start + FILTER_VALUES]
            kwargs: dict[str, Any] = {"Filters": [{"Name": "instance-id", "Values": chunk}]}
            while True:
                out = common.call("DescribeInstances", self.ec2.describe_instances, **kwargs)
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
        common.set_capacity(self.autoscaling, asg_name, desired, max_size)

    def terminate(self, instance_id: str, decrement: bool) -> bool:
        """TerminateInstanceInAutoScalingGroup.

        Returns:
            True when terminated; False when Auto Scaling no longer manages the instance (already terminated,
            detached): a redo after a crash is then harmless.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return common.terminate_in_group(self.autoscaling, instance_id, decrement, ("not found",))
