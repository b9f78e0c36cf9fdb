"""The agent's "Node Ready" reports (``agent.ready``): which writes make a node Ready, the membership reporter telling
them after its write (moto's DynamoDB, nodes in memory), and the batched PutEvents whose entries the refresher parses
(moto's EventBridge, read back through an SQS target as the local world does)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.events import MAX_ENTRIES, EventBus
from agent.asglookup import AsgLookup
from agent.membership import MembershipReporter
from agent.ready import DETAIL_TYPE, EVENT_SOURCE, MAX_NODES_PER_EVENT, ReadyReporter, became_ready, ready_details
from core.exceptions import AwsUnavailableError
from core.model import NodeRecord
from lambdas.events.dispatch import parse_event
from lambdas.events.event import EventKind
from lambdas.refresher.handler import KINDS as REFRESHER_KINDS
from tests.unit.agent.membership_world import CLUSTER, Aws, MemoryNodes, cluster_nodes

NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)


def record(instance_id: str, ready: bool, asg: str | None = "nodes-us-east-1a.demo.k8s.local") -> NodeRecord:
    return NodeRecord(instance_id=instance_id, node_name=f"n-{instance_id}", asg_name=asg, ready=ready, reported_at=NOW)


def test_a_node_becomes_ready_from_absent_or_not_ready_only() -> None:
    iid = "i-0aaaaaaaaaaaaaaa1"
    assert became_ready(None, record(iid, True))
    assert became_ready(record(iid, False), record(iid, True))
    assert not became_ready(record(iid, True), record(iid, True))  # still Ready (a cordon, a refresh of the item)
    assert not became_ready(None, record(iid, False))
    assert not became_ready(record(iid, True), record(iid, False))


def test_details_carry_at_most_the_batch_and_parse_for_the_refresher() -> None:
    records = [
        record(f"i-0{n:016x}", True, asg=None if n == 0 else "nodes-us-east-1a.demo.k8s.local") for n in range(51)
    ]
    details = list(ready_details(CLUSTER, records))
    assert [len(d["nodes"]) for d in details] == [MAX_NODES_PER_EVENT, 1]
    envelope = {
        "version": "0",
        "id": "0d9c7e52-8b1f-4a7e-9a53-2c4f1e0b6d11",
        "detail-type": DETAIL_TYPE,
        "source": EVENT_SOURCE,
        "account": "123456789012",
        "time": "2026-12-02T14:00:00Z",
        "region": "us-east-1",
        "resources": [],
    }
    event = parse_event({**envelope, "detail": json.loads(json.dumps(details[0]))}, REFRESHER_KINDS, NOW)
    assert event.kind is EventKind.NODE_READY and event.cluster == CLUSTER
    assert event.instance_ids == tuple(r.instance_id for r in records[:50])
    assert event.asg_names[0] == "" and event.asg_names[1] == "nodes-us-east-1a.demo.k8s.local"


@pytest.fixture
def bus() -> Iterator[tuple[EventBus, Any, str]]:
    """moto's EventBridge with a rule sending the agent's events to a queue (as the local world's observer)."""
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        sqs, events = session.client("sqs"), session.client("events")
        url = sqs.create_queue(QueueName="observer")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name="observer", EventPattern=json.dumps({"source": [EVENT_SOURCE]}), State="ENABLED")
        events.put_targets(Rule="observer", Targets=[{"Id": "q", "Arn": arn}])
        yield EventBus(CountingEvents(events), "default"), sqs, url


class CountingEvents:
    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[int] = []

    def put_events(self, **kwargs: Any) -> Any:
        self.calls.append(len(kwargs["Entries"]))
        return self.real.put_events(**kwargs)


def delivered(sqs: Any, url: str) -> list[dict[str, Any]]:
    out = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return out
        for m in messages:
            out.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_a_flush_sends_every_kept_node_once_in_batched_calls(bus: tuple[EventBus, Any, str]) -> None:
    events, sqs, url = bus
    reporter = ReadyReporter(events, CLUSTER)
    assert reporter.flush() == 0 and events.client.calls == []  # nothing kept: no call
    ids = [f"i-0{n:016x}" for n in range(501)]
    for iid in ids:
        reporter.note(record(iid, True))
    reporter.note(record(ids[0], True))  # noted twice before a flush: reported once
    assert reporter.flush() == 501
    assert events.client.calls == [MAX_ENTRIES, 1]  # 11 events of up to 50 nodes, 10 entries per call
    got = delivered(sqs, url)
    assert all(e["detail-type"] == "Node Ready" and e["detail"]["cluster"] == CLUSTER for e in got)
    reported = [n["instance_id"] for e in got for n in e["detail"]["nodes"]]
    assert sorted(reported) == sorted(ids)
    assert reporter.flush() == 0  # sent: not again


class FailingEvents:
    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer

    def put_events(self, **kwargs: Any) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    "answer",
    [
        AwsUnavailableError("throttled", "ThrottlingException"),
        {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "x"}]},
    ],
)
def test_a_refused_report_is_dropped_never_raised(answer: Any) -> None:
    reporter = ReadyReporter(EventBus(FailingEvents(answer), "default"), CLUSTER)
    reporter.note(record("i-0aaaaaaaaaaaaaaa1", True))
    assert reporter.flush() == 0
    assert (reporter.sent, reporter.dropped) == (0, 1)
    assert reporter.flush() == 0  # a hint: not kept for later (the refresher's slow poll and tick find the node)


def test_the_loop_flushes_until_stopped(bus: tuple[EventBus, Any, str]) -> None:
    events, sqs, url = bus
    reporter = ReadyReporter(events, CLUSTER, interval_seconds=0.1)
    stop = threading.Event()
    thread = threading.Thread(target=reporter.run, args=(stop,))
    thread.start()
    reporter.note(record("i-0aaaaaaaaaaaaaaa1", True))
    for _ in range(100):
        if reporter.sent:
            break
        stop.wait(0.05)
    reporter.note(record("i-0aaaaaaaaaaaaaaa2", True))
    stop.set()
    thread.join(5)
    assert reporter.sent == 2  # the last one flushed on the way out
    assert len(delivered(sqs, url)) == 2


def test_membership_tells_the_nodes_it_writes_ready_after_the_write(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    first, second = nodes[0], nodes[1]
    not_ready = type(second)(**{**second.__dict__, "ready": False})
    source = MemoryNodes([first, not_ready, *nodes[2:]])
    reporter = MembershipReporter(source, aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 60, 600)
    told: list[tuple[str, bool]] = []

    def on_ready(rec: NodeRecord) -> None:
        item = aws.store.get(f"NODE#{rec.instance_id}")
        told.append((rec.instance_id, bool(item and item["ready"])))  # the item says Ready when told

    reporter.on_ready = on_ready
    reporter.resync()  # a new cluster: every Ready node is new to the table
    assert sorted(told) == sorted((n.instance_id, True) for n in nodes if n is not second)
    told.clear()
    reporter.resync()
    reporter.apply("MODIFIED", first)  # unchanged
    assert told == []
    reporter.apply("MODIFIED", second)  # NotReady -> Ready
    assert told == [(second.instance_id, True)]
    reporter.apply("MODIFIED", type(first)(**{**first.__dict__, "unschedulable": True}))  # cordoned, still Ready
    assert told == [(second.instance_id, True)]
    reporter.apply("DELETED", first)
    reporter.apply("ADDED", first)  # gone and back Ready: its item was deleted, so it becomes Ready again
    assert told[-1] == (first.instance_id, True)

    # a new leader term reads the items from the table: nodes already Ready there are not told again
    again = MembershipReporter(source, aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 60, 600)
    again.on_ready = on_ready
    told.clear()
    source.nodes = [first, second, *nodes[2:]]
    again.resync()
    assert told == []
