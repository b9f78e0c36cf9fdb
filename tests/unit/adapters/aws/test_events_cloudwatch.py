"""EventBridge and CloudWatch adapters on moto."""

import boto3
from moto import mock_aws

from adapters.aws.cloudwatch import MetricSink
from adapters.aws.events import EventBus, Rejection


def test_an_event_is_accepted_and_a_rejection_is_a_result() -> None:
    class Rejecting:
        def put_events(self, **_: object) -> dict[str, object]:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "Bad", "ErrorMessage": "no"}]}

    with mock_aws():
        bus = EventBus(boto3.client("events", region_name="us-east-1"), "default")
        assert bus.put("node-manager.agent", "Drain Succeeded", '{"a": 1}') is None
    assert EventBus(Rejecting(), "default").put("s", "t", "{}") == Rejection("Bad", "no")


def test_a_metric_data_point_carries_its_dimensions() -> None:
    with mock_aws():
        client = boto3.client("cloudwatch", region_name="us-east-1")
        MetricSink(client, "NodeManager").put("DrainFailures", 1, "Count", {"cluster": "demo"})
        [metric] = client.list_metrics(Namespace="NodeManager")["Metrics"]
        assert metric["MetricName"] == "DrainFailures"
        assert metric["Dimensions"] == [{"Name": "cluster", "Value": "demo"}]
