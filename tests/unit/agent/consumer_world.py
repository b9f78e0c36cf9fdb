"""A consumer's world on moto's SQS, DynamoDB and EventBridge, with a scripted engine in place of the drain; the
``session`` and ``world`` fixtures (tests/unit/agent/conftest.py) build it.

The queue, dead-letter queue, state table and the EventBridge rule to an observer queue are made by
``localworld.cluster.create_kops_cluster`` as in the local world. The end-to-end run with the real drain engine and
a real kube-apiserver is in tests/integration/agent/.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from adapters.aws.sqs import CommandQueue
from adapters.dynamo.store import Store
from agent.consumer.config import ConsumerConfig
from agent.consumer.loop import CommandConsumer
from agent.drain.results import NodeCommandResult, PodOutcome
from agent.metrics import AgentMetrics
from agent.report import Reporter
from core.model import Command, CommandStatus, utcnow
from localworld.cluster import ClusterInfo

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
    """Answers each command with ``answer(command)`` (or raises what it raises); records what it ran (``ran``: the
    ids, ``commands``: the commands as given) and what it cordoned first (``cordoned``; ``cordon_answer`` may raise
    instead)."""

    def __init__(
        self,
        answer: Callable[[Command], NodeCommandResult] = succeed,
        cordon_answer: Callable[[Command], None] | None = None,
    ) -> None:
        self.answer = answer
        self.cordon_answer = cordon_answer
        self.cordoned: list[str] = []
        self.ran: list[str] = []
        self.commands: list[Command] = []
        self._lock = threading.Lock()
        self.active = 0
        self.max_active = 0

    def cordon(self, command: Command, scan: bool = True) -> None:
        with self._lock:
            self.cordoned.append(command.command_id)
        if self.cordon_answer is not None:
            self.cordon_answer(command)

    def run(self, command: Command) -> NodeCommandResult:
        with self._lock:
            self.ran.append(command.command_id)
            self.commands.append(command)
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


class Gate:
    """An engine answer that blocks until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, cmd: Command) -> NodeCommandResult:
        self.entered.set()
        assert self.release.wait(10)
        return succeed(cmd)


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
        metrics: AgentMetrics | None = None,
        hooks: Any = None,
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
                "command_retry_seconds": 0,  # one try a step unless a test retries (tests/unit/agent/consumer)
                **config,
            }
        )
        return CommandConsumer(
            CommandQueue(self.sqs, cfg.queue_url),
            self.store,
            engine,
            reporter,
            cfg,
            clock=clock,
            metrics=metrics,
            hooks=hooks,
        )

    def send(self, command: Command, record: bool = True) -> None:
        """What the interruption Lambda does: record the command, then send it (``record=False``: only send it,
        as SQS redelivering it or a forger would)."""
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
