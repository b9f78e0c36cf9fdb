"""The AWS adapter: what it reports about instances (moto) and how it translates AWS errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from adapters.aws.calls import translate
from core.exceptions import AwsRequestError, AwsUnavailableError, RetryableError
from core.model import Command
from lambdas.interruption.aws import InterruptionAws

REGION = "us-east-1"
AMI = "ami-0123456789abcdef0"


def client_error(code: str, message: str = "", status: int = 400, operation: str = "Op") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [
        ("Throttling", 400, True),
        ("RequestLimitExceeded", 400, True),
        ("ResourceContention", 500, True),
        ("InternalFailure", 500, True),
        ("SomethingNew", 503, True),
        ("AccessDenied", 403, False),
        ("ValidationError", 400, False),
        ("UnauthorizedOperation", 403, False),
    ],
)
def test_errors_are_translated_by_cause(code, status, retryable):
    err = translate("DetachInstances", client_error(code, "text", status))
    assert isinstance(err, AwsUnavailableError if retryable else AwsRequestError)
    assert isinstance(err, RetryableError) is retryable
    assert err.operation == "DetachInstances" and err.code == code
    assert "DetachInstances" in str(err) and code in str(err)


class Raising:
    """A client whose every call fails with ``error`` (the real client's failure modes, without the network)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def call(**_: Any) -> Any:
            raise self.error

        return call


def test_connection_failures_are_retryable():
    aws = InterruptionAws(Raising(EndpointConnectionError(endpoint_url="https://autoscaling")), None, None, "q")
    with pytest.raises(AwsUnavailableError) as info:
        aws.instance_facts("i-0123456789abcdef0")
    assert isinstance(info.value.__cause__, EndpointConnectionError)


def test_detach_of_an_instance_no_longer_in_the_group_is_reported_not_raised():
    # The message Auto Scaling answers with in that case.
    err = client_error(
        "ValidationError",
        "The instance i-0123456789abcdef0 is not part of Auto Scaling group nodes.",
        operation="DetachInstances",
    )
    aws = InterruptionAws(Raising(err), None, None, "q")
    assert aws.detach_instance("i-0123456789abcdef0", "nodes") is False


def test_other_detach_errors_are_raised_from_the_botocore_error():
    err = client_error("AccessDenied", "no", 403, "DetachInstances")
    aws = InterruptionAws(Raising(err), None, None, "q")
    with pytest.raises(AwsRequestError) as info:
        aws.detach_instance("i-0123456789abcdef0", "nodes")
    assert info.value.__cause__ is err


@pytest.fixture
def aws(monkeypatch):
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
        yield InterruptionAws(autoscaling, ec2, sqs, sqs.create_queue(QueueName="q")["QueueUrl"])


def test_facts_of_an_instance_in_a_group(aws):
    instance = aws.autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
    facts = aws.instance_facts(instance)
    assert facts.known and facts.in_asg and facts.lifecycle_state == "InService"
    assert facts.asg is not None and facts.asg["AutoScalingGroupName"] == "nodes"
    assert {"Key": "KubernetesCluster", "Value": "demo"}.items() <= facts.asg["Tags"][0].items()


def test_facts_of_a_detached_instance_use_the_recorded_group(aws):
    instance = aws.autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
    assert aws.detach_instance(instance, "nodes") is True
    assert aws.instance_facts(instance).asg is None
    facts = aws.instance_facts(instance, recorded_asg="nodes")
    assert facts.known and not facts.in_asg and facts.asg["AutoScalingGroupName"] == "nodes"


def test_facts_of_a_bare_and_of_an_unknown_instance(aws):
    bare = aws.ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    assert aws.instance_facts(bare).known is True
    unknown = aws.instance_facts("i-0fedcba9876543210")
    assert unknown.known is False and unknown.asg is None and not unknown.in_asg


def test_command_message_carries_the_command_and_its_attributes(aws):
    command = Command(
        command_id="spot-1",
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=datetime.now(UTC) + timedelta(seconds=120),
    )
    message_id = aws.send_command(command)
    [message] = aws.sqs.receive_message(QueueUrl=aws.queue_url, MessageAttributeNames=["All"])["Messages"]
    assert message["MessageId"] == message_id
    assert Command.model_validate_json(message["Body"]) == command
    assert {k: v["StringValue"] for k, v in message["MessageAttributes"].items()} == {
        "kind": "drain",
        "cluster": "demo",
    }


def test_fifo_queue_gets_group_and_deduplication_ids(aws):
    fifo = aws.sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    fifo_aws = InterruptionAws(aws.autoscaling, aws.ec2, aws.sqs, fifo)
    command = Command(
        command_id="spot-1",
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=datetime.now(UTC) + timedelta(seconds=120),
    )
    fifo_aws.send_command(command)
    fifo_aws.send_command(command)  # deduplicated by SQS
    out = aws.sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert len(out) == 1
    assert out[0]["Attributes"]["MessageGroupId"] == "i-0123456789abcdef0"
