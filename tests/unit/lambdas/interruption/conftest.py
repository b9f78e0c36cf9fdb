"""Fixtures shared by the interruption Lambda's unit tests: ``effects``, the executor's ``Effects`` on moto (a
worker group of one instance from a launch template, a queue, the state table)."""

from __future__ import annotations

import boto3
import pytest
from aws_lambda_powertools import Logger, Metrics
from moto import mock_aws

from adapters.aws.gateway import AwsGateway
from adapters.dynamo.store import Store
from core.schema import state_table
from lambdas.common.telemetry import Telemetry
from lambdas.interruption.execute import Effects

REGION = "us-east-1"
AMI = "ami-0123456789abcdef0"


@pytest.fixture
def effects(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodeManagerTest")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        ddb = boto3.resource("dynamodb", region_name=REGION)
        ddb.create_table(**state_table("state"))
        ec2.create_launch_template(LaunchTemplateName="kops", LaunchTemplateData={"ImageId": AMI})
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName="nodes",
            LaunchTemplate={"LaunchTemplateName": "kops"},
            MinSize=1,
            MaxSize=3,
            DesiredCapacity=1,
            VPCZoneIdentifier=ec2.describe_subnets()["Subnets"][0]["SubnetId"],
        )
        aws = AwsGateway.from_clients(autoscaling, ec2, sqs, sqs.create_queue(QueueName="q")["QueueUrl"])
        metrics = Metrics()
        yield Effects(
            store=Store(ddb.Table("state"), "demo"),
            aws=aws,
            telemetry=Telemetry(metrics),
            logger=Logger(service="test"),
            ttl_seconds=3600,
        )
        metrics.clear_metrics()  # Powertools keeps metrics in class-level state shared by every Metrics()
