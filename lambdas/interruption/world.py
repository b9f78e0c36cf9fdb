"""What the decision looks at: what AWS said about the instance, and what the table has recorded.

Plain frozen values, gathered by the handler (``read_instance_facts`` and the ``Store``) and handed
to ``decide.decide``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.aws.ports import AutoScalingPort, Ec2Port
from core.model import NodeRecord


@dataclass(frozen=True)
class InstanceFacts:
    """What AWS said about one instance.

    Attributes:
        instance_id: the instance.
        known: False when EC2 does not know the id (DescribeInstances: ``InvalidInstanceID.NotFound`` or no
            reservation). Only asked when the instance is in no ASG, so True otherwise.
        asg: the instance's Auto Scaling group as one element of DescribeAutoScalingGroups'
            ``AutoScalingGroups`` (with ``Tags``); for an instance already detached by this system, the group
            named by its ``DETACH#`` record; None when there is none.
        lifecycle_state: DescribeAutoScalingInstances' ``LifecycleState`` (``InService``, ``Terminating:Wait``,
            ...); None when the instance is in no ASG now.
    """

    instance_id: str
    known: bool = True
    asg: Mapping[str, Any] | None = None
    lifecycle_state: str | None = None

    @property
    def in_asg(self) -> bool:
        return self.lifecycle_state is not None


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


@dataclass(frozen=True)
class World:
    """Everything ``decide`` needs besides the notice, the clock and the settings.

    Attributes:
        instance: what AWS said about the instance.
        membership: the ``NODE#`` record of the instance, if any (``decide`` checks its age itself).
        command: the ``CMD#`` item of the command this notice would create, if already recorded.
        detach: the ``DETACH#`` item of the instance, if an early replacement was already recorded.
        hook: for a lifecycle action, the instance's ``HOOK#`` item, if any.
        commands: for a lifecycle action or a state change, the instance's ``CMD#`` items, newest first
            (``adapters.dynamo.commands.commands_for_instance``); empty otherwise.
    """

    instance: InstanceFacts
    membership: NodeRecord | None = None
    command: Mapping[str, Any] | None = None
    detach: Mapping[str, Any] | None = None
    hook: Mapping[str, Any] | None = None
    commands: tuple[Mapping[str, Any], ...] = ()
