"""The CloudWatch metrics the alarms watch, published to moto's CloudWatch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
from moto import mock_aws

from adapters.aws.cloudwatch import MetricSink
from agent.cloudwatch import DRAIN_FAILURES, MEMBERSHIP_REPORTS, CloudWatchPublisher


def test_membership_heartbeat_and_drain_failures_are_published_and_nothing_else() -> None:
    """The lock's age is the replenisher's metric now (the agent's role reads nothing of the cluster partition)."""
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        publisher = CloudWatchPublisher(MetricSink(cloudwatch, "NodeManager"), "demo.k8s.local")
        publisher.membership_reported(12)
        publisher.drain_failed()
        metrics = cloudwatch.list_metrics(Namespace="NodeManager")["Metrics"]
        assert {m["MetricName"] for m in metrics} == {MEMBERSHIP_REPORTS, DRAIN_FAILURES}
        assert all(m["Dimensions"] == [{"Name": "cluster", "Value": "demo.k8s.local"}] for m in metrics)
        data = cloudwatch.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": "reports",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "NodeManager",
                            "MetricName": MEMBERSHIP_REPORTS,
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
        assert data["MetricDataResults"][0]["Values"] == [12.0]


def test_publishing_never_raises_and_can_be_switched_off() -> None:
    class Broken:
        def put_metric_data(self, **_: object) -> None:
            raise RuntimeError("no network")

    assert CloudWatchPublisher(MetricSink(Broken(), "NodeManager"), "c").put(DRAIN_FAILURES, 1) is False
    assert CloudWatchPublisher(None, "c").put(DRAIN_FAILURES, 1) is False
