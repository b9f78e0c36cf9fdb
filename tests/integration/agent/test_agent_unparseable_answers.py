"""Every AWS call the agent makes, answered by a body botocore cannot parse (an HTML page from a proxy or a load
balancer): no exception escapes a loop of the agent (the consumer's receive loop and its worker threads, the
heartbeat, the membership reporter, the lifecycle-hook finisher, the CloudWatch publisher, the reporter); each error is
logged and counted in ``node_manager_agent_loop_errors_total`` and becomes a retry (the message comes back, the next
pass lists again, the claim is put back) or a terminal status.

The server is a real HTTP server on 127.0.0.1 answering every request with one status and an unclosed HTML page
(``tests.integration.garbage_server.Garbage``); the clients are real boto3 clients with one
attempt. A 200 whose body is not JSON is read by botocore as an empty answer (no error to count) for the JSON
services (SQS, DynamoDB, EventBridge); the XML ones (Auto Scaling, CloudWatch) raise ``ResponseParserError``.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.cloudwatch import MetricSink
from adapters.aws.sqs import CommandQueue
from adapters.dynamo.hooks import get_hook, record_hook
from adapters.dynamo.store import Store
from agent.cloudwatch import CloudWatchPublisher
from agent.consumer.config import ConsumerConfig
from agent.consumer.jobs import Job
from agent.consumer.loop import CommandConsumer
from agent.hooks import HookFinisher
from agent.kube.views import NodeView
from agent.membership import AsgLookup, MembershipReporter
from agent.metrics import AgentMetrics
from agent.report import Outcome, Reporter
from core.lifecycle import LifecycleAction
from core.model import Command, CommandKind, CommandStatus, utcnow
from tests.integration.garbage_server import Garbage

CLUSTER = "demo.k8s.local"
INSTANCE = "i-0123456789abcdef0"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/commands"
STATUSES = [200, 400, 502]
ACTION = LifecycleAction(instance_id=INSTANCE, asg_name="nodes", hook_name="drain", token="t-1", event_id="ev-1")


def clients(url: str) -> dict[str, Any]:
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2, read_timeout=5)
    s = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
    made = {n: s.client(n, endpoint_url=url, config=config) for n in ("sqs", "events", "autoscaling", "cloudwatch")}
    made["store"] = Store(s.resource("dynamodb", endpoint_url=url, config=config).Table("state"), CLUSTER)
    return made


def command() -> Command:
    return Command(
        command_id="spot-1",
        cluster=CLUSTER,
        kind=CommandKind.DRAIN,
        instance_id=INSTANCE,
        node_name="ip-10-0-1-17.ec2.internal",
        reason="spot interruption warning",
        deadline=utcnow() + timedelta(seconds=120),
    )


class NoEngine:
    def cordon(self, command: Command, scan: bool = True) -> None:
        raise AssertionError("no command may run without its record")

    def run(self, command: Command) -> None:
        raise AssertionError("no command may run without its record")


# what the adapters raise for an AWS answer they cannot use (core.exceptions)
TRANSLATED = {"AwsUnavailableError", "AwsRequestError", "StoreUnavailableError"}


def errors(metrics: AgentMetrics, loop: str) -> float:
    total = 0.0
    for metric in metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == "node_manager_agent_loop_errors_total" and sample.labels.get("loop") == loop:
                total += sample.value
    return total


def consumer(made: dict[str, Any], metrics: AgentMetrics) -> CommandConsumer:
    config = ConsumerConfig(cluster=CLUSTER, queue_url=QUEUE, worker_id="agent-a:1", wait_seconds=0)
    reporter = Reporter(made["store"], made["events"], "default")
    return CommandConsumer(
        CommandQueue(made["sqs"], QUEUE), made["store"], NoEngine(), reporter, config, metrics=metrics
    )


@pytest.fixture
def made(endpoint: str) -> dict[str, Any]:
    return clients(endpoint)


@pytest.mark.parametrize("status", STATUSES)
def test_the_receive_loop_survives_and_counts(made: dict[str, Any], status: int) -> None:
    Garbage.status = status
    metrics = AgentMetrics()
    loop = consumer(made, metrics)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(1.5)
    assert thread.is_alive()  # still polling
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    if status != 200:  # ReceiveMessage raised the project's error: counted, backed off
        assert errors(metrics, "consumer") >= 1
        assert metrics.registry.get_sample_value("node_manager_agent_sqs_poll_errors_total") >= 1


@pytest.mark.parametrize("status", STATUSES)
def test_a_worker_thread_survives_an_unreadable_command_record(made: dict[str, Any], status: int) -> None:
    """GetItem (the CMD# record), then ChangeMessageVisibility: never run, never raised out of the thread."""
    Garbage.status = status
    metrics = AgentMetrics()
    loop = consumer(made, metrics)
    message = {"MessageId": "m-1", "ReceiptHandle": "r-1", "Body": command().model_dump_json()}
    loop._work(message, lambda: None)  # the worker thread's target (no cordon-first wait here): must return
    if status != 200:
        assert errors(metrics, "consumer") >= 1
    else:  # read as "no record": rejected and released for the dead-letter queue
        assert loop.counters.snapshot().get("rejected_no_record") == 1


@pytest.mark.parametrize("status", STATUSES)
def test_the_heartbeat_survives_and_counts(made: dict[str, Any], status: int) -> None:
    """ChangeMessageVisibility and UpdateItem (the CMD# heartbeat) of an in-flight command."""
    Garbage.status = status
    metrics = AgentMetrics()
    loop = consumer(made, metrics)
    loop.worker.jobs.add(Job("m-1", "r-1", command(), attempt=1))
    loop.heartbeat_once()
    if status != 200:
        # both calls tried and each counted: a failed visibility extension does not stop the item's heartbeat
        assert errors(metrics, "heartbeat") == 2


@pytest.mark.parametrize("status", STATUSES)
def test_the_lifecycle_finisher_survives_counts_and_never_leaves_the_action_claimed(endpoint: str, status: int) -> None:
    """RecordLifecycleActionHeartbeat and CompleteLifecycleAction answered with garbage (the XML parser gives up
    whatever the status); the HOOK# item lives in moto's DynamoDB and goes back to ``pending`` for the next
    finisher."""
    Garbage.status = status
    with mock_aws():
        session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
        dynamodb = session.resource("dynamodb")
        dynamodb.create_table(
            TableName="state",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        store = Store(dynamodb.Table("state"), CLUSTER)
        record_hook(store, ACTION, ttl_seconds=3600)
        metrics = AgentMetrics()
        finisher = HookFinisher(store, AutoScaling(clients(endpoint)["autoscaling"]), "agent-a:1", metrics)
        assert finisher.heartbeat(INSTANCE) is False
        assert finisher.complete(INSTANCE, "drain spot-1 succeeded") is False
        item = get_hook(store, INSTANCE)
    assert item is not None and item["state"] == "pending"
    assert errors(metrics, "lifecycle") == 2
    assert (
        metrics.registry.get_sample_value(
            "node_manager_agent_lifecycle_actions_total", {"action": "complete", "result": "error"}
        )
        == 1
    )


@pytest.mark.parametrize("status", STATUSES)
def test_the_lifecycle_finisher_survives_an_unreadable_hook_item(made: dict[str, Any], status: int) -> None:
    Garbage.status = status
    metrics = AgentMetrics()
    finisher = HookFinisher(made["store"], AutoScaling(made["autoscaling"]), "agent-a:1", metrics)
    assert finisher.complete(INSTANCE, "drain spot-1 succeeded") is False
    assert finisher.heartbeat(INSTANCE) is False
    if status != 200:
        assert errors(metrics, "lifecycle") == 2


class OneNode:
    """The Kubernetes side of membership: one node with a providerID (no watch is reached)."""

    def list_nodes_versioned(self) -> tuple[list[NodeView], str]:
        node = {
            "metadata": {"name": "ip-10-0-1-17.ec2.internal", "resourceVersion": "7"},
            "spec": {"providerID": f"aws:///us-east-1a/{INSTANCE}"},
        }
        return [NodeView.from_api(node)], "7"

    def watch_nodes(self, resource_version: str, timeout_seconds: int) -> Any:
        raise AssertionError("the resync must fail first")


@pytest.mark.parametrize("status", STATUSES)
def test_the_membership_loop_survives_and_counts(made: dict[str, Any], status: int) -> None:
    """The resync's AWS reads (garbage bodies: ResponseParserError, whatever the status)."""
    Garbage.status = status
    metrics = AgentMetrics()
    reporter = MembershipReporter(OneNode(), made["store"], AsgLookup(AutoScaling(made["autoscaling"])), 60, 600)
    reporter.on_error = lambda err: metrics.loop_error("membership", err)
    stop = threading.Event()
    thread = threading.Thread(target=reporter.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while errors(metrics, "membership") < 1:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.05)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    # the resync's first AWS read fails (the table read of what NODE# holds, or DescribeAutoScalingInstances): what
    # is counted is the adapters' translation, never a botocore type escaping them
    kinds = {
        sample.labels["error"]
        for metric in metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "node_manager_agent_loop_errors_total" and sample.labels.get("loop") == "membership"
    }
    assert kinds and kinds <= TRANSLATED, kinds


@pytest.mark.parametrize("status", STATUSES)
def test_finishing_a_command_and_cloudwatch_never_raise(made: dict[str, Any], status: int) -> None:
    """UpdateItem (the terminal status), PutEvents (the drain's event) and PutMetricData, from the worker's end of a
    command: the message is left (it comes back and the end is written again), the error counted."""
    Garbage.status = status
    metrics = AgentMetrics()
    loop = consumer(made, metrics)
    loop.worker.alarms = CloudWatchPublisher(MetricSink(made["cloudwatch"], "NodeManager"), CLUSTER)
    job = Job("m-1", "r-1", command(), attempt=1)
    outcome = Outcome(CommandStatus.FAILED, {"message": "x", "node_name": "n"}, engine_posted_event=True)
    loop.worker._finish(job, outcome)
    if status != 200:
        # the end could not be written (counted), and handing the message back with a short visibility meets the same
        # garbage (counted too): never raised, and the message comes back
        assert errors(metrics, "consumer") >= 1
        assert loop.counters.snapshot().get("failed") is None  # not counted as finished: it is retried
