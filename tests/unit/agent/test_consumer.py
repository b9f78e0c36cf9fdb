"""The command consumer on moto's SQS, DynamoDB and EventBridge, with a scripted engine in place of the drain.

The queue, dead-letter queue, state table and the EventBridge rule to an observer queue are made by
``localworld.cluster.create_kops_cluster`` as in the local world. The end-to-end run with the real drain engine and
a real kube-apiserver is in tests/integration/test_agent*.py.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from agent.consumer.config import ConsumerConfig
from agent.consumer.decisions import DEADLINE_PASSED
from agent.consumer.loop import CommandConsumer
from agent.drain.results import NodeCommandResult, PodOutcome
from agent.report import Reporter
from core.exceptions import KubernetesApiError, KubernetesRejectedError, NodeNotFoundError
from core.model import Command, CommandKind, CommandStatus, utcnow
from core.store import Store
from localworld.cluster import ClusterInfo, create_kops_cluster

CLUSTER = "demo.k8s.local"
INSTANCE = "i-0123456789abcdef0"


def succeed(command: Command) -> NodeCommandResult:
    now = utcnow()
    return NodeCommandResult(
        command_id=command.command_id,
        kind=command.kind,
        instance_id=command.instance_id,
        node_name="ip-10-0-1-17.ec2.internal",
        status=CommandStatus.SUCCEEDED,
        message="drained",
        pods=[PodOutcome(namespace="web", name="web-1", action="evict", attempts=1, evicted_at=now, gone=True)],
        started_at=now,
        finished_at=now,
        event_posted=True,
    )


class ScriptedEngine:
    """Answers each command with ``answer(command)`` (or raises what it raises); records what it ran."""

    def __init__(self, answer: Callable[[Command], NodeCommandResult] = succeed) -> None:
        self.answer = answer
        self.ran: list[str] = []
        self._lock = threading.Lock()
        self.active = 0
        self.max_active = 0

    def run(self, command: Command) -> NodeCommandResult:
        with self._lock:
            self.ran.append(command.command_id)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            return self.answer(command)
        finally:
            with self._lock:
                self.active -= 1


class Clock:
    """A settable clock (UTC)."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@dataclass
class World:
    session: Any
    info: ClusterInfo
    sqs: Any
    events: Any
    store: Store

    def consumer(
        self,
        engine: ScriptedEngine,
        worker: str = "agent-a:1",
        clock: Callable[[], datetime] = utcnow,
        bus: str | None = None,
        poster: Any = None,
        **config: Any,
    ) -> CommandConsumer:
        reporter = Reporter(self.store, self.events, bus or self.info.event_bus_name, post_node_event=poster)
        cfg = ConsumerConfig(
            **{
                "cluster": CLUSTER,
                "queue_url": self.info.queue_url,
                "worker_id": worker,
                "wait_seconds": 0,
                "visibility_timeout_seconds": 30,
                "stale_running_seconds": 60,
                **config,
            }
        )
        return CommandConsumer(self.sqs, self.store, engine, reporter, cfg, clock=clock)

    def send(self, command: Command, record: bool = True) -> None:
        """What the interruption Lambda does: record the command, then send it."""
        if record:
            self.store.record_command(command, ttl_seconds=3600)
        self.sqs.send_message(QueueUrl=self.info.queue_url, MessageBody=command.model_dump_json())

    def receive(self, queue_url: str | None = None) -> dict[str, Any] | None:
        out = self.sqs.receive_message(
            QueueUrl=queue_url or self.info.queue_url,
            MaxNumberOfMessages=1,
            WaitTimeSeconds=0,
            VisibilityTimeout=30,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        messages = out.get("Messages", [])
        return messages[0] if messages else None

    def in_queue(self, queue_url: str | None = None) -> int:
        """Messages in the queue, visible or in flight."""
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=queue_url or self.info.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def observed(self) -> list[tuple[str, dict[str, Any]]]:
        """(detail-type, detail) of every agent event EventBridge delivered to the observer queue so far."""
        seen = []
        while True:
            out = self.sqs.receive_message(
                QueueUrl=self.info.observer_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            )
            if not out.get("Messages"):
                return seen
            for message in out["Messages"]:
                event = json.loads(message["Body"])
                seen.append((event["detail-type"], event["detail"]))
                self.sqs.delete_message(QueueUrl=self.info.observer_queue_url, ReceiptHandle=message["ReceiptHandle"])

    def item(self, command_id: str = "spot-1") -> dict[str, Any]:
        item = self.store.get_command(command_id)
        assert item is not None
        return item


@pytest.fixture(scope="module")
def session() -> Any:
    """One boto3 session for the module: its clients share the loaded service models (fast to create)."""
    return boto3.Session(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def world(session: Any) -> Iterator[World]:
    with mock_aws():
        info = create_kops_cluster(session, name=CLUSTER, azs=())  # queues, table, rule; no ASGs needed
        store = Store(session.resource("dynamodb").Table(info.table_name), CLUSTER)
        yield World(session, info, session.client("sqs"), session.client("events"), store)


def command(
    command_id: str = "spot-1", kind: str = "drain", deadline_in: float = 120, cluster: str = CLUSTER
) -> Command:
    return Command(
        command_id=command_id,
        cluster=cluster,
        kind=kind,
        instance_id=INSTANCE,
        node_name="ip-10-0-1-17.ec2.internal",
        reason="spot interruption warning",
        deadline=utcnow() + timedelta(seconds=deadline_in),
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


# -- one message ----------------------------------------------------------------------------------------------


def test_a_drain_runs_once_is_finished_reported_and_deleted(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command())
    world.consumer(engine).handle(world.receive())

    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 1 and item["worker"] == "agent-a:1"
    assert item["result"]["message"] == "drained" and "reported_at" in item
    assert engine.ran == ["spot-1"]
    assert world.in_queue() == 0
    [(detail_type, detail)] = world.observed()
    assert detail_type == "Node Drain Succeeded"
    assert detail["command_id"] == "spot-1" and detail["status"] == "succeeded" and detail["attempt"] == 1
    assert detail["summary"]["evicted"] == 1


def test_a_duplicate_delivery_of_a_finished_command_is_deleted_without_running_again(world: World) -> None:
    engine = ScriptedEngine()
    consumer = world.consumer(engine)
    world.send(command())
    consumer.handle(world.receive())
    world.observed()
    world.send(command(), record=False)  # SQS delivers it again
    consumer.handle(world.receive())

    assert engine.ran == ["spot-1"]
    assert world.in_queue() == 0
    assert world.observed() == []
    assert world.item()["attempt"] == 1
    assert consumer.counters.snapshot()["duplicate"] == 1


def test_a_command_without_a_record_is_run_and_recorded(world: World) -> None:
    world.send(command(), record=False)
    world.consumer(ScriptedEngine()).handle(world.receive())
    assert world.item()["status"] == "succeeded"


def test_garbage_is_logged_and_ends_in_the_dead_letter_queue(world: World, caplog: pytest.LogCaptureFixture) -> None:
    engine = ScriptedEngine()
    consumer = world.consumer(engine)
    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody="{not json")
    handled = 0
    with caplog.at_level(logging.WARNING, logger="agent.consumer"):
        while (message := world.receive()) is not None:  # visible again at once after each attempt
            consumer.handle(message)
            handled += 1
            assert handled <= 3
    assert handled == 3  # maxReceiveCount: the 4th receive moved it to the DLQ
    dead = world.receive(world.info.dlq_url)
    assert dead is not None and dead["Body"] == "{not json"
    assert engine.ran == []
    assert consumer.counters.snapshot()["malformed"] == 3
    assert f"message_id={dead['MessageId']}" in caplog.text and "'{not json'" in caplog.text


def test_a_command_for_another_cluster_is_dropped_with_a_log_line(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    engine = ScriptedEngine()
    consumer = world.consumer(engine)
    world.sqs.send_message(
        QueueUrl=world.info.queue_url, MessageBody=command(cluster="other.k8s.local").model_dump_json()
    )
    with caplog.at_level(logging.WARNING, logger="agent.consumer"):
        consumer.handle(world.receive())
    assert engine.ran == []
    assert world.in_queue() == 0
    assert world.store.get_command("spot-1") is None
    assert "command for another cluster dropped" in caplog.text and "other.k8s.local" in caplog.text
    assert consumer.counters.snapshot()["foreign"] == 1


def test_an_instance_without_node_is_skipped(world: World) -> None:
    def no_node(cmd: Command) -> NodeCommandResult:
        raise NodeNotFoundError(cmd.instance_id)

    world.send(command())
    world.consumer(ScriptedEngine(no_node)).handle(world.receive())
    item = world.item()
    assert item["status"] == "skipped" and INSTANCE in item["result"]["message"]
    [(detail_type, detail)] = world.observed()
    assert detail_type == "Node Drain Skipped" and detail["status"] == "skipped"
    assert world.in_queue() == 0


class RecordingPoster:
    """Stands in for ``agent.events.NodeEventRecorder`` (posting Events for real is covered by the drain tests)."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, CommandKind, CommandStatus, str]] = []

    def __call__(self, node_name: str, kind: CommandKind, status: CommandStatus, message: str) -> None:
        self.posted.append((node_name, kind, status, message))


def test_a_drain_whose_deadline_passed_is_not_started(world: World) -> None:
    engine = ScriptedEngine()
    poster = RecordingPoster()
    world.send(command(deadline_in=-5))
    world.consumer(engine, poster=poster).handle(world.receive())
    assert engine.ran == []
    item = world.item()
    assert item["status"] == "timed_out" and item["result"]["message"] == DEADLINE_PASSED
    [(detail_type, detail)] = world.observed()
    assert detail_type == "Node Drain Failed" and detail["status"] == "timed_out"
    assert poster.posted == [("ip-10-0-1-17.ec2.internal", CommandKind.DRAIN, CommandStatus.TIMED_OUT, DEADLINE_PASSED)]


def test_the_event_on_the_node_is_left_to_the_engine_when_it_posted_one(world: World) -> None:
    poster = RecordingPoster()
    world.send(command())
    world.consumer(ScriptedEngine(), poster=poster).handle(world.receive())
    assert world.item()["status"] == "succeeded" and poster.posted == []


def test_a_request_the_apiserver_refuses_fails_the_command(world: World) -> None:
    def forbidden(cmd: Command) -> NodeCommandResult:
        raise KubernetesRejectedError(403, "patch node ip-10-0-1-17: HTTP 403 forbidden")

    poster = RecordingPoster()
    world.send(command())
    world.consumer(ScriptedEngine(forbidden), poster=poster).handle(world.receive())
    item = world.item()
    assert item["status"] == "failed" and "HTTP 403" in item["result"]["message"]
    assert [t for t, _ in world.observed()] == ["Node Drain Failed"]
    assert [p[2] for p in poster.posted] == [CommandStatus.FAILED]


def test_a_late_uncordon_still_runs(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command(kind="uncordon", deadline_in=-5))
    world.consumer(engine).handle(world.receive())
    assert engine.ran == ["spot-1"] and world.item()["status"] == "succeeded"
    assert [t for t, _ in world.observed()] == ["Node Uncordon Succeeded"]


def test_an_engine_bug_fails_the_command_with_the_error(world: World) -> None:
    def bug(cmd: Command) -> NodeCommandResult:
        raise ZeroDivisionError("oops")

    world.send(command())
    world.consumer(ScriptedEngine(bug)).handle(world.receive())
    item = world.item()
    assert item["status"] == "failed" and item["result"]["errors"] == ["ZeroDivisionError: oops"]
    assert [t for t, _ in world.observed()] == ["Node Drain Failed"]


def test_a_command_running_on_a_live_worker_is_left_alone(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command())
    world.store.start_command(command(), "agent-b:2", stale_after_seconds=60, ttl_seconds=3600)
    consumer = world.consumer(engine)
    consumer.handle(world.receive())
    assert engine.ran == []
    assert world.item()["worker"] == "agent-b:2" and world.item()["status"] == "running"
    assert world.in_queue() == 1  # left; visible again about when agent-b's heartbeat would go stale
    assert consumer.counters.snapshot()["busy_elsewhere"] == 1


def test_a_stale_running_command_is_taken_over_with_the_next_attempt(world: World) -> None:
    world.send(command())
    world.store.start_command(
        command(), "agent-b:2", stale_after_seconds=60, ttl_seconds=3600, now=utcnow() - timedelta(seconds=120)
    )  # agent-b died two minutes ago
    world.consumer(ScriptedEngine()).handle(world.receive())
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 2 and item["worker"] == "agent-a:1"
    [(_, detail)] = world.observed()
    assert detail["attempt"] == 2


def test_a_worker_that_lost_its_command_mid_run_reports_nothing(world: World) -> None:
    def taken_over(cmd: Command) -> NodeCommandResult:
        # while this worker drains, another takes the command over (this one's heartbeat looked stale)
        world.store.start_command(
            cmd, "agent-b:2", stale_after_seconds=60, ttl_seconds=3600, now=utcnow() + timedelta(seconds=120)
        )
        return succeed(cmd)

    world.send(command())
    consumer = world.consumer(ScriptedEngine(taken_over))
    consumer.handle(world.receive())
    item = world.item()
    assert item["status"] == "running" and item["worker"] == "agent-b:2" and item["attempt"] == 2
    assert world.observed() == []
    assert world.in_queue() == 1
    assert consumer.counters.snapshot()["lost"] == 1


def test_a_retryable_engine_error_hands_the_command_back(world: World) -> None:
    def apiserver_down(cmd: Command) -> NodeCommandResult:
        raise KubernetesApiError("get node: HTTP 503")

    world.send(command())
    world.consumer(ScriptedEngine(apiserver_down), retry_delay_seconds=0).handle(world.receive())
    item = world.item()
    assert item["status"] == "queued" and item["attempt"] == 1 and "worker" not in item
    assert world.observed() == []

    world.consumer(ScriptedEngine(), worker="agent-b:2").handle(world.receive())  # visible again at once
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 2


def test_an_event_not_sent_keeps_the_terminal_status_and_is_sent_when_the_message_returns(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command())
    first = world.receive()
    world.consumer(engine, bus="no-such-bus").handle(first)
    item = world.item()
    assert item["status"] == "succeeded" and "reported_at" not in item
    assert world.in_queue() == 1 and world.observed() == []

    # the visibility timeout lapses; the message comes back 31 s after the command finished
    world.sqs.change_message_visibility(
        QueueUrl=world.info.queue_url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
    )
    clock = Clock()
    clock.now = utcnow() + timedelta(seconds=31)
    world.consumer(engine, clock=clock).handle(world.receive())

    assert engine.ran == ["spot-1"]
    [(detail_type, _)] = world.observed()
    assert detail_type == "Node Drain Succeeded"
    assert "reported_at" in world.item()
    assert world.in_queue() == 0


# -- threads: heartbeat, shutdown, the poll loop --------------------------------------------------------------


class Gate:
    """An engine answer that blocks until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, cmd: Command) -> NodeCommandResult:
        self.entered.set()
        assert self.release.wait(10)
        return succeed(cmd)


def test_the_heartbeat_keeps_the_command_alive_and_notices_a_takeover(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate()
    clock = Clock()
    consumer = world.consumer(ScriptedEngine(gate), clock=clock)
    world.send(command())
    worker = threading.Thread(target=consumer.handle, args=(world.receive(),))
    worker.start()
    try:
        assert gate.entered.wait(10)
        clock.now = clock.now + timedelta(seconds=20)
        consumer.heartbeat_once()
        assert world.item()["heartbeat_at"] == pytest.approx(clock.now.timestamp())

        world.store.start_command(
            command(), "agent-b:2", stale_after_seconds=1, ttl_seconds=3600, now=clock.now + timedelta(seconds=5)
        )
        with caplog.at_level(logging.WARNING, logger="agent.consumer"):
            consumer.heartbeat_once()
        assert "command taken over by another worker" in caplog.text
    finally:
        gate.release.set()
        worker.join(10)
    assert world.item()["worker"] == "agent-b:2" and world.item()["status"] == "running"
    assert world.observed() == []


def test_shutdown_hands_in_flight_commands_back_to_another_agent(world: World) -> None:
    gate = Gate()
    consumer = world.consumer(ScriptedEngine(gate))
    world.send(command())
    worker = threading.Thread(target=consumer.handle, args=(world.receive(),))
    worker.start()
    try:
        assert gate.entered.wait(10)
        consumer.shutdown(grace_seconds=0)
        item = world.item()
        assert item["status"] == "queued" and "worker" not in item
        message = world.receive()  # visible again at once
        assert message is not None
    finally:
        gate.release.set()
        worker.join(10)
    assert world.item()["status"] == "queued"  # the first agent's late result was dropped
    assert world.observed() == []

    world.consumer(ScriptedEngine(), worker="agent-b:2").handle(message)
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 2 and item["worker"] == "agent-b:2"
    assert len(world.observed()) == 1


def test_the_poll_loop_runs_every_command_once_within_its_concurrency(world: World) -> None:
    def slow(cmd: Command) -> NodeCommandResult:
        time.sleep(0.3)
        return succeed(cmd)

    engine = ScriptedEngine(slow)
    consumer = world.consumer(engine, concurrency=2, wait_seconds=1)
    ids = [f"spot-{i}" for i in range(5)]
    for command_id in ids:
        world.send(command(command_id))
    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody="garbage")
    stop = threading.Event()
    loop = threading.Thread(target=consumer.run, args=(stop,))
    loop.start()
    try:
        wait_until(
            lambda: all(world.item(i)["status"] == "succeeded" for i in ids) and world.in_queue() == 0, timeout=20
        )
    finally:
        stop.set()
        loop.join(10)
        consumer.shutdown(grace_seconds=5)
    assert not loop.is_alive()
    assert sorted(engine.ran) == ids
    assert 1 <= engine.max_active <= 2
    assert sorted(d["command_id"] for _, d in world.observed()) == ids
    assert world.receive(world.info.dlq_url)["Body"] == "garbage"


def test_the_poll_loop_survives_sqs_errors_and_still_stops(world: World, caplog: pytest.LogCaptureFixture) -> None:
    consumer = world.consumer(ScriptedEngine(), queue_url=world.info.queue_url + "-deleted")
    stop = threading.Event()
    loop = threading.Thread(target=consumer.run, args=(stop,))
    with caplog.at_level(logging.ERROR, logger="agent.consumer"):
        loop.start()
        try:
            wait_until(lambda: "consecutive_failures=2" in caplog.text)
        finally:
            stop.set()
            loop.join(10)
    assert not loop.is_alive()
    assert "receive failed, backing off seconds=1.0 consecutive_failures=1" in caplog.text
    assert "NonExistentQueue" in caplog.text or "does not exist" in caplog.text
