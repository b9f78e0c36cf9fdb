"""The command queue: the SQS body and attributes of a command (a stable contract), FIFO grouping (moto)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from adapters.aws.sqs import CommandQueue
from core.model import Command

REGION = "us-east-1"


@pytest.fixture
def queue():
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        yield CommandQueue(sqs, sqs.create_queue(QueueName="q")["QueueUrl"])


def test_command_message_carries_the_command_and_its_attributes(queue):
    command = Command(
        command_id="spot-1",
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=datetime.now(UTC) + timedelta(seconds=120),
    )
    message_id = queue.send_command(command)
    [message] = queue.client.receive_message(QueueUrl=queue.queue_url, MessageAttributeNames=["All"])["Messages"]
    assert message["MessageId"] == message_id
    assert Command.model_validate_json(message["Body"]) == command
    assert {k: v["StringValue"] for k, v in message["MessageAttributes"].items()} == {
        "kind": "drain",
        "cluster": "demo",
    }


def test_fifo_queue_gets_group_and_deduplication_ids(queue):
    fifo = queue.client.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    fifo_queue = CommandQueue(queue.client, fifo)
    command = Command(
        command_id="spot-1",
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=datetime.now(UTC) + timedelta(seconds=120),
    )
    fifo_queue.send_command(command)
    fifo_queue.send_command(command)  # deduplicated by SQS
    out = queue.client.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert len(out) == 1
    assert out[0]["Attributes"]["MessageGroupId"] == "i-0123456789abcdef0"


def test_the_agent_side_receives_extends_and_deletes(queue):
    command = Command(
        command_id="spot-2",
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=datetime.now(UTC) + timedelta(seconds=120),
    )
    queue.send_command(command)
    [message] = queue.receive(max_messages=10, wait_seconds=0, visibility_seconds=30)
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    queue.set_visibility(message["ReceiptHandle"], 0)
    [again] = queue.receive(max_messages=10, wait_seconds=0, visibility_seconds=30)
    queue.delete(again["ReceiptHandle"])
    assert queue.receive(max_messages=10, wait_seconds=0, visibility_seconds=0) == []
