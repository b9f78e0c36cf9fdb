"""The Auto Scaling adapter: "already gone" answers are results, other errors are raised (moto and fakes)."""

from __future__ import annotations

import pytest

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.gateway import AwsGateway
from core.exceptions import AwsRequestError
from tests.unit.adapters.aws.moto_group import one_group
from tests.unit.adapters.aws.raising import Raising, client_error

REGION = "us-east-1"
AMI = "ami-0123456789abcdef0"


def test_detach_of_an_instance_no_longer_in_the_group_is_reported_not_raised():
    # The message Auto Scaling answers with in that case.
    err = client_error(
        "ValidationError",
        "The instance i-0123456789abcdef0 is not part of Auto Scaling group nodes.",
        operation="DetachInstances",
    )
    assert AutoScaling(Raising(err)).detach_instance("i-0123456789abcdef0", "nodes") is False


def test_other_detach_errors_are_raised_from_the_botocore_error():
    err = client_error("AccessDenied", "no", 403, "DetachInstances")
    with pytest.raises(AwsRequestError) as info:
        AutoScaling(Raising(err)).detach_instance("i-0123456789abcdef0", "nodes")
    assert info.value.__cause__ is err


@pytest.fixture
def aws(monkeypatch):
    with one_group(monkeypatch) as gateway:
        yield gateway


def first_instance(aws: AwsGateway) -> str:
    return str(
        aws.autoscaling.client.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
    )


def test_membership_and_groups_of_the_cluster(aws):
    instance = first_instance(aws)
    member = aws.autoscaling.membership(instance)
    assert member is not None and member.asg_name == "nodes" and member.lifecycle_state == "InService"
    assert aws.autoscaling.group_names([instance, "i-0fedcba9876543210"]) == {instance: "nodes"}
    assert [g["AutoScalingGroupName"] for g in aws.autoscaling.cluster_groups("demo")] == ["nodes"]
    assert aws.autoscaling.cluster_groups("other") == []


def test_terminate_of_an_instance_no_longer_in_the_group_is_reported_not_raised(aws):
    instance = first_instance(aws)
    assert aws.autoscaling.detach_instance(instance, "nodes") is True
    assert aws.autoscaling.membership(instance) is None
    err = client_error(
        "ValidationError", f"Instance Id not found - No managed instance found for instance ID: {instance}"
    )
    assert AutoScaling(Raising(err)).terminate_in_group(instance, decrement=True) is False


def test_termination_hook_is_read_by_name_and_put_idempotently(aws):
    autoscaling = aws.autoscaling
    autoscaling.client.put_lifecycle_hook(  # another tool's hook on the same group is not ours
        AutoScalingGroupName="nodes",
        LifecycleHookName="nth",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
    )
    assert autoscaling.lifecycle_hook("nodes", "node-manager-drain") is None

    autoscaling.put_termination_hook("nodes", "node-manager-drain", 300)
    autoscaling.put_termination_hook("nodes", "node-manager-drain", 300)

    hook = autoscaling.lifecycle_hook("nodes", "node-manager-drain")
    assert hook is not None
    assert (hook["LifecycleTransition"], hook["HeartbeatTimeout"], hook["DefaultResult"]) == (
        "autoscaling:EC2_INSTANCE_TERMINATING",
        300,
        "CONTINUE",
    )
    hooks = autoscaling.client.describe_lifecycle_hooks(AutoScalingGroupName="nodes")["LifecycleHooks"]
    assert sorted(h["LifecycleHookName"] for h in hooks) == ["node-manager-drain", "nth"]


def test_hook_calls_refused_are_raised():
    err = client_error("AccessDenied", "no", 403, "PutLifecycleHook")
    with pytest.raises(AwsRequestError):
        AutoScaling(Raising(err)).put_termination_hook("nodes", "node-manager-drain", 300)
    with pytest.raises(AwsRequestError):
        AutoScaling(Raising(err)).lifecycle_hook("nodes", "node-manager-drain")
