"""The local world's Auto Scaling answers as AWS does where moto 5.2 is laxer (FACTS.md, "The local test world's
known gaps"; localworld.aws_rules cites the API reference and AWS's messages). Each test first shows moto's own lax
answer, so it fails if the rule is not in force."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from localworld import aws_rules

REGION = "us-east-1"


@pytest.fixture
def asg(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    # the rules are process-wide: a local world started earlier in this process (MotoServer.start) installed them;
    # each test starts from moto's own answers and leaves the process as it found it
    was = aws_rules.installed()
    aws_rules.uninstall()
    assert not aws_rules.installed()
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        client = boto3.client("autoscaling", region_name=REGION)
        ec2.create_launch_template(LaunchTemplateName="kops", LaunchTemplateData={"ImageId": "ami-0123456789abcdef0"})
        subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
        for name in ("lax", "strict"):
            client.create_auto_scaling_group(
                AutoScalingGroupName=name,
                LaunchTemplate={"LaunchTemplateName": "kops"},
                MinSize=2,
                MaxSize=4,
                DesiredCapacity=2,
                VPCZoneIdentifier=subnet,
            )
        yield client
    aws_rules.uninstall()
    if was:
        aws_rules.install()


def _ids(client: Any, name: str) -> list[str]:
    group = client.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
    return [i["InstanceId"] for i in group["Instances"]]


def _refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return str(caught.value.response["Error"]["Message"])


def _crashes(call: Any, **kwargs: Any) -> None:
    """moto's own answer: an exception out of its code (in process; HTTP 500 through its server), no ValidationError."""
    with pytest.raises(Exception) as caught:
        call(**kwargs)
    assert not (isinstance(caught.value, ClientError) and caught.value.response["Error"]["Code"] == "ValidationError")


def test_a_decrement_at_min_size_is_refused(asg: Any) -> None:
    lax = _ids(asg, "lax")[0]
    asg.terminate_instance_in_auto_scaling_group(InstanceId=lax, ShouldDecrementDesiredCapacity=True)
    lax_group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=["lax"])["AutoScalingGroups"][0]
    assert lax_group["DesiredCapacity"] == 1 < lax_group["MinSize"]  # moto's own answer: below MinSize
    with aws_rules.strict_auto_scaling():
        target = _ids(asg, "strict")[0]
        says = _refused(
            asg.terminate_instance_in_auto_scaling_group, InstanceId=target, ShouldDecrementDesiredCapacity=True
        )
        assert says.startswith("Currently, desiredSize equals minSize (2).")
        assert target in _ids(asg, "strict")
        # without decrement it is allowed (the group replaces the instance)
        asg.terminate_instance_in_auto_scaling_group(InstanceId=target, ShouldDecrementDesiredCapacity=False)
        assert target not in _ids(asg, "strict")


def test_a_terminate_of_an_instance_no_group_holds_is_a_validation_error(asg: Any) -> None:
    _crashes(
        asg.terminate_instance_in_auto_scaling_group,
        InstanceId="i-0000000000000000f",
        ShouldDecrementDesiredCapacity=True,
    )
    with aws_rules.strict_auto_scaling():
        says = _refused(
            asg.terminate_instance_in_auto_scaling_group,
            InstanceId="i-0000000000000000f",
            ShouldDecrementDesiredCapacity=True,
        )
    assert says == "Instance Id not found - No managed instance found for instance ID i-0000000000000000f"


def test_desired_capacity_outside_min_and_max_is_refused(asg: Any) -> None:
    asg.update_auto_scaling_group(AutoScalingGroupName="lax", DesiredCapacity=9)  # moto accepts it
    with aws_rules.strict_auto_scaling():
        says = _refused(asg.update_auto_scaling_group, AutoScalingGroupName="strict", DesiredCapacity=9)
        assert says == "Desired capacity:9 must be between the specified min size:2 and max size:4"
        _refused(asg.set_desired_capacity, AutoScalingGroupName="strict", DesiredCapacity=1)
        asg.update_auto_scaling_group(AutoScalingGroupName="strict", DesiredCapacity=5, MaxSize=5)  # one call: fine


def test_a_detach_below_min_size_or_of_a_foreign_instance_is_refused(asg: Any) -> None:
    with aws_rules.strict_auto_scaling():
        target = _ids(asg, "strict")[0]
        says = _refused(
            asg.detach_instances,
            AutoScalingGroupName="strict",
            InstanceIds=[target],
            ShouldDecrementDesiredCapacity=True,
        )
        assert "min-size=2, max-size=4, and desired-size=2" in says
        says = _refused(
            asg.detach_instances,
            AutoScalingGroupName="strict",
            InstanceIds=[_ids(asg, "lax")[0]],
            ShouldDecrementDesiredCapacity=False,
        )
        assert says.endswith("is not part of Auto Scaling group strict.")


def test_per_call_limits(asg: Any) -> None:
    _crashes(asg.describe_auto_scaling_groups, MaxRecords=101)
    assert (
        len(asg.describe_auto_scaling_instances(InstanceIds=[f"i-{n:017x}" for n in range(51)])["AutoScalingInstances"])
        == 0
    )
    with aws_rules.strict_auto_scaling():
        assert "less than or equal to 100" in _refused(asg.describe_auto_scaling_groups, MaxRecords=101)
        asg.describe_auto_scaling_groups(MaxRecords=100)
        ids = [f"i-{n:017x}" for n in range(51)]
        assert "less than or equal to 50" in _refused(asg.describe_auto_scaling_instances, InstanceIds=ids)
        asg.describe_auto_scaling_instances(InstanceIds=ids[:50])
        assert "less than or equal to 20" in _refused(
            asg.detach_instances,
            AutoScalingGroupName="strict",
            InstanceIds=ids[:21],
            ShouldDecrementDesiredCapacity=False,
        )
