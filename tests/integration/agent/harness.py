"""The agent's process tests' view of the local world (``Harness``: the interruption Lambda's side, record and send,
and what the agent leaves behind), the agent's shortened timings (``AGENT_ENV``), its log (``log_of``) and a poll with
a deadline (``wait_for``): shared by the agent's tests on the local world."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from adapters.dynamo.store import Store
from core.model import Command, parse_provider_id, utcnow
from localworld.cluster import ClusterInfo, cluster_instances
from localworld.workloads import pods_on_node
from localworld.world import LocalWorld, Spawned

T = TypeVar("T")

# short timings so a test takes seconds: a dead agent's message comes back after 5 s, its command is stale after 6 s
AGENT_ENV = {
    "SQS_WAIT_SECONDS": "1",
    "SQS_VISIBILITY_TIMEOUT_SECONDS": "5",
    "STALE_RUNNING_SECONDS": "6",
    "MEMBERSHIP_RESYNC_SECONDS": "60",  # longer than any test: membership changes must come from the watch
    "MEMBERSHIP_TTL_SECONDS": "600",
    "EVICTION_BACKOFF_SECONDS": "0.2",
    "EVICTION_BACKOFF_MAX_SECONDS": "0.5",
    "AGENT_SHUTDOWN_GRACE_SECONDS": "2",
}


def log_of(agent: Spawned) -> str:
    """The agent's output so far (read from its log file, which stays readable after the process exited)."""
    return agent.log_path.read_text(errors="replace") if agent.log_path.exists() else ""


def wait_for(predicate: Callable[[], T], timeout: float, what: str, agent: Spawned | None = None) -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds (with the agent log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            log = log_of(agent)[-4000:] if agent is not None else ""
            pytest.fail(f"timed out after {timeout} s waiting for {what}\n--- agent log ---\n{log}")
        time.sleep(0.1)


class Harness:
    """The world seen from the test: the Lambda's side (record + send) and what the agent leaves behind."""

    def __init__(self, world: LocalWorld, info: ClusterInfo, tmp_path: Path) -> None:
        self.world = world
        self.info = info
        self.tmp_path = tmp_path
        self.sqs = world.client("sqs")
        self.store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
        self._observed: list[dict[str, Any]] = []

    def agent(self, name: str = "agent", **env: str) -> Spawned:
        return self.world.spawn("agent", {**AGENT_ENV, **env}, log_path=self.tmp_path / f"{name}.log")

    def command(
        self,
        command_id: str,
        instance_id: str,
        kind: str = "drain",
        deadline_in: float = 60,
        cluster: str | None = None,
    ) -> Command:
        return Command(
            command_id=command_id,
            cluster=cluster or self.info.name,
            kind=kind,
            instance_id=instance_id,
            reason="test",
            deadline=utcnow() + timedelta(seconds=deadline_in),
        )

    def send(self, command: Command, record: bool = True) -> None:
        """What the interruption Lambda does: record the command as queued, then send it."""
        if record:
            self.store.record_command(command, ttl_seconds=3600)
        self.send_body(command.model_dump_json())

    def send_body(self, body: str) -> None:
        self.sqs.send_message(QueueUrl=self.info.queue_url, MessageBody=body)

    def in_queue(self, url: str | None = None) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url or self.info.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def observed(self) -> list[dict[str, Any]]:
        """Every agent event the EventBridge rule delivered to the observer queue so far (accumulated)."""
        while True:
            out = self.sqs.receive_message(
                QueueUrl=self.info.observer_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            )
            if not out.get("Messages"):
                return list(self._observed)
            for message in out["Messages"]:
                self._observed.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.info.observer_queue_url, ReceiptHandle=message["ReceiptHandle"])

    def status(self, command_id: str) -> str | None:
        item = self.store.get_command(command_id)
        return None if item is None else str(item["status"])

    def instances(self) -> dict[str, dict[str, Any]]:
        return {i["InstanceId"]: i for i in cluster_instances(self.world.client("ec2"), self.info.name)}

    def worker_node(self) -> tuple[str, str]:
        """(node name, instance id) of one worker node."""
        for node in self.world.core.list_node().items:
            if "node-role.kubernetes.io/node" in (node.metadata.labels or {}):
                parsed = parse_provider_id(node.spec.provider_id)
                assert parsed is not None
                return node.metadata.name, parsed[1]
        raise AssertionError("no worker node")

    def node_events(self, node_name: str) -> list[str]:
        events = self.world.core.list_namespaced_event("default", field_selector=f"involvedObject.name={node_name}")
        return [e.reason for e in events.items]

    def node_items(self) -> dict[str, dict[str, Any]]:
        return {item["instance_id"]: item for item in self.store.query_prefix("NODE#", consistent=True)}


def bench_pods(harness: Harness, node: str) -> list[dict[str, Any]]:
    """The test's pods (namespace bench) still bound to ``node``."""
    return [p for p in pods_on_node(harness.world.api, node) if p["metadata"]["namespace"] == "bench"]
