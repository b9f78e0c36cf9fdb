"""Reading what the interruption Lambda decides on from AWS, through the adapters' ports (kept out of ``world`` so
the decider imports no adapter)."""

from __future__ import annotations

from adapters.aws.ports import AutoScalingPort, Ec2Port
from lambdas.interruption.world import InstanceFacts


def read_instance_facts(
    autoscaling: AutoScalingPort, ec2: Ec2Port, instance_id: str, recorded_asg: str | None = None
) -> InstanceFacts:
    """What AWS says about ``instance_id``: its ASG and lifecycle state, or whether EC2 knows it at all.

    Calls: DescribeAutoScalingInstances (one); DescribeAutoScalingGroups (one) for its group, or for
    ``recorded_asg`` (the group a ``DETACH#`` record names) when the instance is in no group any more;
    DescribeInstances (one) only when the instance is in no group.

    Raises:
        AwsUnavailableError, AwsRequestError.
    """
    member = autoscaling.membership(instance_id)
    if member is not None:
        return InstanceFacts(
            instance_id=instance_id,
            known=True,
            asg=autoscaling.describe_group(member.asg_name),
            lifecycle_state=member.lifecycle_state or None,
        )
    known = ec2.instance_known(instance_id)
    asg = autoscaling.describe_group(recorded_asg) if recorded_asg else None
    return InstanceFacts(instance_id=instance_id, known=known, asg=asg, lifecycle_state=None)
