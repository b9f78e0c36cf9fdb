"""The replenisher's tick sweeps stranded commands (``lambdas.common.sweep``), on moto: a CMD# left ``queued`` after
its message was dead-lettered is on the queue again after the next tick; other events do not sweep."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws

from core.model import Command, CommandKind
from core.schema import state_table
from core.settings import ReplenisherSettings
from lambdas.replenisher.handler import Deps, handle
from localworld.eventbus import scheduled_event

ACCOUNT, REGION = "123456789012", "us-east-1"


@pytest.fixture
def deps(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]  # yields Deps
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "test")
    with mock_aws():
        dynamodb = boto3.resource("dynamodb", region_name=REGION)
        dynamodb.create_table(**state_table("state"))
        sqs = boto3.client("sqs", region_name=REGION)
        queue_url = sqs.create_queue(QueueName="commands")["QueueUrl"]
        settings = ReplenisherSettings(
            cluster_name="demo.k8s.local", table_name="state", queue_url=queue_url, account_id=ACCOUNT
        )
        yield Deps.from_clients(
            settings,
            dynamodb=dynamodb,
            autoscaling=boto3.client("autoscaling", region_name=REGION),
            ec2=boto3.client("ec2", region_name=REGION),
            sqs=sqs,
            metrics=Metrics(namespace="test", service="replenisher"),
            region=REGION,
        )


def test_the_tick_sends_a_stranded_command_again(deps: Deps) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    stuck = Command(
        command_id="giveback-1",
        cluster="demo.k8s.local",
        kind=CommandKind.DRAIN,
        instance_id="i-0123456789abcdef0",
        reason="give back",
        deadline=now + timedelta(minutes=10),
    )
    deps.store.record_command(stuck, ttl_seconds=3600, now=now - timedelta(minutes=6))

    response = handle(scheduled_event("replenisher-tick", time=now), deps, now=now)

    assert response["swept"] == {"resent": ["giveback-1"], "expired": []}
    sqs = deps.aws.queue.client  # type: ignore[attr-defined]  # the adapter's boto3 client
    [message] = sqs.receive_message(QueueUrl=deps.settings.queue_url)["Messages"]
    assert Command.model_validate(json.loads(message["Body"])) == stuck
