"""Auto Scaling on both sides: the look-ups (the group as the product reads it, the cluster's groups, memberships)
and the effects (capacity within the sizes, terminate with and without decrement, a refused terminate, detach)."""

from __future__ import annotations

from adapters.aws.ports import Membership
from tests.unit.sim.aws_contract.sides import CLUSTER, GROUP, UNKNOWN, ZONE, Side, outcome

# -- Auto Scaling look-ups ----------------------------------------------------------------------------------------


def test_the_group_as_the_product_reads_it(side: Side):
    group = side.aws.autoscaling.describe_group(GROUP)
    assert (group["AutoScalingGroupName"], group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (
        GROUP,
        1,
        3,
        2,
    )
    assert group["AvailabilityZones"] == [ZONE]
    assert group["LaunchTemplate"] == {
        "LaunchTemplateId": side.template_id,
        "LaunchTemplateName": GROUP,
        "Version": "$Latest",
    }
    assert [(i["AvailabilityZone"], i["LifecycleState"], i["HealthStatus"]) for i in group["Instances"]] == [
        (ZONE, "InService", "Healthy")
    ] * 2
    assert {i["LaunchTemplate"]["Version"] for i in group["Instances"]} == {"1"}
    tags = {t["Key"]: (t["Value"], t["PropagateAtLaunch"], t["ResourceId"]) for t in group["Tags"]}
    assert tags["KubernetesCluster"] == (CLUSTER, True, GROUP)
    assert tags["kops.k8s.io/instancegroup"] == ("nodes-us-east-1a", True, GROUP)
    assert side.aws.autoscaling.describe_group("no-such-group") is None


def test_the_cluster_groups_and_memberships(side: Side):
    assert [g["AutoScalingGroupName"] for g in side.aws.autoscaling.cluster_groups(CLUSTER)] == [GROUP]
    assert side.aws.autoscaling.cluster_groups("other") == []
    first, second = side.instances()
    assert side.aws.autoscaling.membership(first) == Membership(GROUP, "InService")
    assert side.aws.autoscaling.membership(UNKNOWN) is None
    assert side.aws.autoscaling.group_names([first, UNKNOWN, second]) == {first: GROUP, second: GROUP}
    many = [f"i-{n:017x}" for n in range(120)] + [first]  # three DescribeAutoScalingInstances calls of <= 50 ids
    assert side.aws.autoscaling.group_names(many) == {first: GROUP}


# -- Auto Scaling effects -----------------------------------------------------------------------------------------


def test_capacity_outside_the_sizes_is_refused(side: Side):
    assert outcome(lambda: side.aws.autoscaling.set_capacity(GROUP, 4, None)) == ("AwsRequestError", "ValidationError")
    assert outcome(lambda: side.aws.autoscaling.set_capacity(GROUP, 0, None)) == ("AwsRequestError", "ValidationError")
    assert outcome(lambda: side.aws.autoscaling.set_capacity("no-such-group", 1, None)) == (
        "AwsRequestError",
        "ValidationError",
    )
    side.aws.autoscaling.set_capacity(GROUP, 4, 4)  # MaxSize first in effect: one call carries both
    group = side.aws.autoscaling.describe_group(GROUP)
    assert (group["MaxSize"], group["DesiredCapacity"]) == (4, 4)


def test_a_max_size_below_the_desired_capacity_lowers_it(side: Side):
    side.aws.autoscaling.set_capacity(GROUP, None, 1)
    group = side.aws.autoscaling.describe_group(GROUP)
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (1, 1, 1)


def test_terminate_with_decrement_stops_at_min_size(side: Side):
    first, second = side.instances()
    assert side.aws.autoscaling.terminate_in_group(first, decrement=True) is True
    side.settle()
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 1
    assert side.instances() == [second]
    assert outcome(lambda: side.aws.autoscaling.terminate_in_group(second, decrement=True)) == (
        "AwsRequestError",
        "ValidationError",
    )
    assert side.aws.autoscaling.terminate_in_group(UNKNOWN, decrement=False) is False
    assert side.aws.autoscaling.terminate_in_group(first, decrement=False) is False  # gone already
    assert side.aws.ec2.describe_instance(first).state in ("shutting-down", "terminated")


def test_a_terminate_auto_scaling_refuses_is_an_error_and_changes_nothing(side: Side):
    """``ScalingActivityInProgress`` (HTTP 400) is a refusal (``AwsRequestError``, not retryable by the adapter):
    the instance stays in service and the desired capacity is not decremented; once Auto Scaling accepts again, the
    same call goes through."""
    first, second = side.instances()
    with side.terminates_refused():
        assert outcome(lambda: side.aws.autoscaling.terminate_in_group(first, decrement=True)) == (
            "AwsRequestError",
            "ScalingActivityInProgress",
        )
    side.settle()
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 2
    assert side.instances() == [first, second]
    assert side.aws.autoscaling.terminate_in_group(first, decrement=True) is True
    side.settle()
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 1


def test_terminate_without_decrement_is_replaced(side: Side):
    first, second = side.instances()
    assert side.aws.autoscaling.terminate_in_group(first, decrement=False) is True
    side.settle()
    now = side.instances()
    assert len(now) == 2 and second in now and first not in now


def test_detach_leaves_the_instance_running_outside_the_group(side: Side):
    first, _ = side.instances()
    assert side.aws.autoscaling.detach_instance(first, GROUP) is True
    side.settle()
    assert side.aws.autoscaling.membership(first) is None
    assert side.aws.autoscaling.detach_instance(first, GROUP) is False
    assert side.aws.autoscaling.detach_instance(first, "no-such-group") is False
    assert side.aws.ec2.describe_instance(first).state == "running"
    assert len(side.instances()) == 2  # not decremented: a replacement
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 2
