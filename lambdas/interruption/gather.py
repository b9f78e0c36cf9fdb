"""Reading what the interruption Lambda decides on from AWS, through the adapters' ports (kept out of ``world`` so
the decider imports no adapter)."""

from __future__ import annotations

from decimal import Decimal

from adapters.aws.ports import AutoScalingPort, Ec2Port
from adapters.dynamo.commands import PREFIX as COMMAND_PREFIX
from adapters.dynamo.nodes import MARK_SK
from adapters.dynamo.store import Store
from core.model import QUIET_CORDON_PREFIX
from lambdas.interruption.decide.rebalance import in_effect
from lambdas.interruption.world import InstanceFacts


def read_instance_facts(
    autoscaling: AutoScalingPort, ec2: Ec2Port, instance_id: str, recorded_asg: str | None = None
) -> InstanceFacts:
    """What AWS says about ``instance_id``: its ASG and lifecycle state, its EC2 state and purchase option (what a
    Spot notice claims is checked against them: ``verify``).

    Calls: DescribeAutoScalingInstances (one); DescribeAutoScalingGroups (one) for its group, or for
    ``recorded_asg`` (the group a ``DETACH#`` record names) when the instance is in no group any more;
    DescribeInstances (one).

    Raises:
        AwsUnavailableError, AwsRequestError.
    """
    member = autoscaling.membership(instance_id)
    status = ec2.describe_instance(instance_id)
    state = status.state if status is not None else None
    market = status.lifecycle if status is not None else ""
    if member is not None:
        return InstanceFacts(
            instance_id=instance_id,
            known=True,
            asg=autoscaling.describe_group(member.asg_name),
            lifecycle_state=member.lifecycle_state or None,
            state=state,
            market=market,
        )
    asg = autoscaling.describe_group(recorded_asg) if recorded_asg else None
    return InstanceFacts(
        instance_id=instance_id, known=status is not None, asg=asg, lifecycle_state=None, state=state, market=market
    )


def read_ec2_state(ec2: Ec2Port, instance_id: str) -> InstanceFacts:
    """What EC2 says about ``instance_id`` alone (a state change is checked against it: ``verify``): one
    DescribeInstances call; ``known`` False when EC2 does not know the id.

    Raises:
        AwsUnavailableError, AwsRequestError.
    """
    status = ec2.describe_instance(instance_id)
    if status is None:
        return InstanceFacts(instance_id=instance_id, known=False)
    return InstanceFacts(instance_id=instance_id, state=status.state, market=status.lifecycle)


def read_rebalance_load(store: Store, instance_id: str) -> tuple[int, int | None]:
    """What rule 5d (``decide.rebalance.rebalance_capped``) counts: the other instances' rebalance commands in effect
    (``decide.rebalance.in_effect``) and the node count of the agent's ``MEMBERSHIP`` mark (None when there is none
    or it is unreadable).

    Calls: one Query of the ``CMD#rebalance-`` range (the agent's cordon releaser reads the same range every
    ``CORDON_CHECK_SECONDS``; its items are cordon commands, with no pod lists) and one GetItem.

    Raises:
        StoreUnavailableError.
    """
    held = sum(
        1
        for item in store.query_prefix(COMMAND_PREFIX + QUIET_CORDON_PREFIX)
        if item.get("instance_id") != instance_id and in_effect(item)
    )
    nodes = (store.get(MARK_SK, consistent=False) or {}).get("nodes")
    if isinstance(nodes, int | Decimal) and not isinstance(nodes, bool) and nodes > 0:
        return held, int(nodes)
    return held, None
