"""A moto account with one kOps-tagged Auto Scaling group ``nodes`` (cluster ``demo``, one instance), shared by the
tests of the Auto Scaling adapter and of the readers built on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from moto import mock_aws

from adapters.aws.gateway import AwsGateway

REGION = "us-east-1"
AMI = "ami-0123456789abcdef0"


@contextmanager
def one_group(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsGateway]:
    """The gateway over that account, for the life of the ``with`` block."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        ec2.create_launch_template(LaunchTemplateName="kops", LaunchTemplateData={"ImageId": AMI})
        subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName="nodes",
            LaunchTemplate={"LaunchTemplateName": "kops"},
            MinSize=1,
            MaxSize=3,
            DesiredCapacity=1,
            VPCZoneIdentifier=subnet,
            Tags=[
                {
                    "Key": "KubernetesCluster",
                    "Value": "demo",
                    "PropagateAtLaunch": True,
                    "ResourceId": "nodes",
                    "ResourceType": "auto-scaling-group",
                }
            ],
        )
        yield AwsGateway.from_clients(autoscaling, ec2, sqs, sqs.create_queue(QueueName="q")["QueueUrl"])
