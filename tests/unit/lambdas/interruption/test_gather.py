"""What the interruption Lambda reads about an instance (``read_instance_facts``), against moto."""

from __future__ import annotations

import pytest
from botocore.exceptions import EndpointConnectionError

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.ec2 import Ec2
from adapters.aws.gateway import AwsGateway
from core.exceptions import AwsUnavailableError
from lambdas.interruption.gather import read_ec2_state, read_instance_facts
from tests.unit.adapters.aws.moto_group import one_group
from tests.unit.adapters.aws.raising import Raising

REGION = "us-east-1"
AMI = "ami-0123456789abcdef0"


def test_connection_failures_are_retryable():
    down = Raising(EndpointConnectionError(endpoint_url="https://autoscaling"))
    with pytest.raises(AwsUnavailableError) as info:
        read_instance_facts(AutoScaling(down), Ec2(down), "i-0123456789abcdef0")
    assert isinstance(info.value.__cause__, EndpointConnectionError)


@pytest.fixture
def aws(monkeypatch):
    with one_group(monkeypatch) as gateway:
        yield gateway


def read(aws: AwsGateway, instance_id: str, recorded_asg: str | None = None):
    return read_instance_facts(aws.autoscaling, aws.ec2, instance_id, recorded_asg=recorded_asg)


def test_facts_of_an_instance_in_a_group(aws):
    instance = aws.autoscaling.client.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"][0][
        "InstanceId"
    ]
    facts = read(aws, instance)
    assert facts.known and facts.in_asg and facts.lifecycle_state == "InService"
    assert facts.asg is not None and facts.asg["AutoScalingGroupName"] == "nodes"
    assert {"Key": "KubernetesCluster", "Value": "demo"}.items() <= facts.asg["Tags"][0].items()


def test_facts_of_a_detached_instance_use_the_recorded_group(aws):
    instance = aws.autoscaling.client.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"][0][
        "InstanceId"
    ]
    assert aws.autoscaling.detach_instance(instance, "nodes") is True
    assert read(aws, instance).asg is None
    facts = read(aws, instance, recorded_asg="nodes")
    assert facts.known and not facts.in_asg and facts.asg["AutoScalingGroupName"] == "nodes"


def test_facts_of_a_bare_and_of_an_unknown_instance(aws):
    bare = aws.ec2.client.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    assert read(aws, bare).known is True
    unknown = read(aws, "i-0fedcba9876543210")
    assert unknown.known is False and unknown.asg is None and not unknown.in_asg


def test_facts_carry_what_ec2_says_of_state_and_market(aws):
    member = aws.autoscaling.client.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
    spot = aws.ec2.client.run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceMarketOptions={"MarketType": "spot"}
    )["Instances"][0]["InstanceId"]
    assert (read(aws, member).state, read(aws, member).market) == ("running", "")  # moto's ASGs launch On-Demand
    assert (read(aws, spot).state, read(aws, spot).market) == ("running", "spot")
    aws.ec2.client.terminate_instances(InstanceIds=[spot])
    assert read_ec2_state(aws.ec2, spot).state == "terminated"
    assert read_ec2_state(aws.ec2, "i-0fedcba9876543210").known is False
