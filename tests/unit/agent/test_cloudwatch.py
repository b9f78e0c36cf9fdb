"""The CloudWatch metrics the alarms watch, published to moto's CloudWatch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
from moto import mock_aws

from adapters.aws.cloudwatch import MetricSink
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from agent.cloudwatch import (
    DRAIN_FAILURES,
    LOCK_HELD_SECONDS,
    MEMBERSHIP_REPORTS,
    CloudWatchPublisher,
    lock_held_seconds,
)
from core.schema import state_table


def test_lock_age_is_zero_when_free_and_counts_from_the_acquisition() -> None:
    assert lock_held_seconds(None, 1000.0) == 0.0
    assert lock_held_seconds({"holder": None, "acquired_at": 10}, 1000.0) == 0.0
    assert lock_held_seconds({"holder": "refresher:r1", "acquired_at": 400}, 1000.0) == 600.0


def test_membership_heartbeat_lock_age_and_drain_failures_are_published() -> None:
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        dynamodb = boto3.resource("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**state_table("state"))
        store = Store(dynamodb.Table("state"), "demo.k8s.local")
        LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:r1", "refresh", lease_seconds=600)
        publisher = CloudWatchPublisher(MetricSink(cloudwatch, "NodeManager"), "demo.k8s.local", clock=lambda: 1300.0)
        publisher.membership_reported(12, store)
        publisher.drain_failed()
        metrics = cloudwatch.list_metrics(Namespace="NodeManager")["Metrics"]
        assert {m["MetricName"] for m in metrics} == {MEMBERSHIP_REPORTS, LOCK_HELD_SECONDS, DRAIN_FAILURES}
        assert all(m["Dimensions"] == [{"Name": "cluster", "Value": "demo.k8s.local"}] for m in metrics)
        data = cloudwatch.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": "lock",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "NodeManager",
                            "MetricName": LOCK_HELD_SECONDS,
                            "Dimensions": [{"Name": "cluster", "Value": "demo.k8s.local"}],
                        },
                        "Period": 60,
                        "Stat": "Maximum",
                    },
                }
            ],
            StartTime=datetime.now(UTC) - timedelta(minutes=10),
            EndTime=datetime.now(UTC) + timedelta(minutes=10),
        )
        assert data["MetricDataResults"][0]["Values"] == [300.0]


def test_publishing_never_raises_and_can_be_switched_off() -> None:
    class Broken:
        def put_metric_data(self, **_: object) -> None:
            raise RuntimeError("no network")

    assert CloudWatchPublisher(MetricSink(Broken(), "NodeManager"), "c").put(DRAIN_FAILURES, 1) is False
    assert CloudWatchPublisher(None, "c").put(DRAIN_FAILURES, 1) is False
