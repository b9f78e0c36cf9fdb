"""The agent as it runs: ``python -m agent`` as a real process against the local world (moto server, a real
kube-apiserver with the agent's own RBAC, the cluster simulator), fed the way the interruption Lambda feeds it
(a ``CMD#`` record, then an SQS message).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from adapters.dynamo.store import Store
from core.kops import INSTANCE_GROUP_TAG
from core.model import Command, parse_provider_id, utcnow
from localworld.cluster import ClusterInfo, cluster_instances
from localworld.workloads import block_with_pdb, deploy_pods_on_node, pods_on_node
from localworld.world import LocalWorld, Spawned

pytestmark = pytest.mark.world

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


@pytest.fixture
def small(world: LocalWorld, tmp_path: Path) -> Harness:
    """3 masters + 3 workers (nodes named by private DNS), simulator running."""
    return Harness(world, world.setup_cluster(nodes_per_az=1), tmp_path)


def bench_pods(harness: Harness, node: str) -> list[dict[str, Any]]:
    """The test's pods (namespace bench) still bound to ``node``."""
    return [p for p in pods_on_node(harness.world.api, node) if p["metadata"]["namespace"] == "bench"]


def drain_events(harness: Harness, command_id: str) -> list[dict[str, Any]]:
    return [e for e in harness.observed() if e["detail"].get("command_id") == command_id]  # not "Node Ready"


def test_a_drain_command_is_executed_reported_and_deleted(small: Harness) -> None:
    node, instance_id = small.worker_node()
    deploy_pods_on_node(small.world.api, node, 3, grace=1)  # the drain waits ~1 s for them to go: running is seen
    command = small.command("spot-drain-1", instance_id)
    small.send(command)
    assert small.status(command.command_id) == "queued"
    agent = small.agent()

    seen = ["queued"]

    def finished() -> bool:
        status = small.status(command.command_id)
        if not seen or seen[-1] != status:
            seen.append(status)
        return status == "succeeded"

    wait_for(finished, 30, "the drain to succeed", agent)
    assert seen == ["queued", "running", "succeeded"]
    item = small.store.get_command(command.command_id)
    assert item is not None and item["attempt"] == 1 and item["result"]["node_name"] == node
    assert wait_for(lambda: small.in_queue() == 0, 10, "the message to be deleted", agent)

    [event] = wait_for(lambda: drain_events(small, command.command_id), 10, "the EventBridge event", agent)
    assert event["source"] == "node-manager.agent" and event["detail-type"] == "Node Drain Succeeded"
    assert event["detail"]["instance_id"] == instance_id and event["detail"]["node_name"] == node
    assert event["detail"]["status"] == "succeeded" and event["detail"]["summary"]["evicted"] == 3
    assert "NodeDrainSucceeded" in small.node_events(node)
    assert bench_pods(small, node) == []
    assert small.world.core.read_node(node).spec.unschedulable is True

    agent.terminate()  # SIGTERM: a clean stop
    assert agent.wait(15) == 0
    assert "agent stopped" in log_of(agent)


def test_a_duplicate_delivery_of_a_finished_command_does_not_drain_again(small: Harness) -> None:
    node, instance_id = small.worker_node()
    agent = small.agent()
    command = small.command("spot-dup-1", instance_id)
    small.send(command)
    wait_for(lambda: small.status(command.command_id) == "succeeded", 30, "the first drain", agent)
    wait_for(lambda: drain_events(small, command.command_id), 10, "the first event", agent)
    # someone uncordons the node; a second drain would cordon it again
    small.world.core.patch_node(
        node, {"spec": {"unschedulable": None}, "metadata": {"annotations": {"node-manager.aws/cordoned-by": None}}}
    )

    small.send(command, record=False)  # SQS delivers the same command again
    wait_for(lambda: "duplicate delivery" in log_of(agent), 15, "the duplicate to be seen", agent)
    wait_for(lambda: small.in_queue() == 0, 10, "the duplicate to be deleted", agent)

    assert small.world.core.read_node(node).spec.unschedulable in (None, False)
    assert len(drain_events(small, command.command_id)) == 1
    assert small.node_events(node).count("NodeDrainSucceeded") == 1
    item = small.store.get_command(command.command_id)
    assert item is not None and item["attempt"] == 1


def start_blocked_drain(harness: Harness, command_id: str, agent_name: str) -> tuple[str, Command, Spawned, str]:
    """A drain that cannot finish: its node's pods are held by a PDB allowing no disruption (evictions get 429).

    Returns (node name, command, the agent running it, the PDB's name) once the agent cordoned the node.
    """
    node, instance_id = harness.worker_node()
    app = deploy_pods_on_node(harness.world.api, node, 2)
    pdb = block_with_pdb(harness.world.api, "bench", app)
    agent = harness.agent(agent_name)
    command = harness.command(command_id, instance_id, deadline_in=90)
    harness.send(command)
    wait_for(lambda: harness.status(command.command_id) == "running", 20, "the agent to start the drain", agent)
    wait_for(lambda: harness.world.core.read_node(node).spec.unschedulable, 10, "the node to be cordoned", agent)
    assert len(bench_pods(harness, node)) == 2  # the PDB holds them
    return node, command, agent, pdb


def unblock(harness: Harness, pdb: str) -> None:
    harness.world.rest.delete(f"/apis/policy/v1beta1/namespaces/bench/poddisruptionbudgets/{pdb}")


def test_an_agent_killed_mid_drain_is_replaced_and_the_command_finishes_once(small: Harness) -> None:
    node, command, first, pdb = start_blocked_drain(small, "spot-kill-1", "agent-1")
    second = small.agent("agent-2")
    # while the first agent lives, its heartbeat keeps the message invisible and the command its own, well past
    # the visibility timeout (5 s) and the staleness limit (6 s)
    time.sleep(8)
    item = small.store.get_command(command.command_id)
    assert item is not None and item["attempt"] == 1 and item["worker"].endswith(f":{first.pid}")
    assert "spot-kill-1" not in log_of(second)

    first.kill()  # SIGKILL: no cleanup, no hand back
    first.wait(10)
    killed_at = time.monotonic()
    unblock(small, pdb)

    wait_for(lambda: small.status(command.command_id) == "succeeded", 30, "the second agent to finish", second)
    item = small.store.get_command(command.command_id)
    assert item is not None
    assert item["attempt"] == 2 and item["worker"].endswith(f":{second.pid}")
    assert time.monotonic() - killed_at >= 5  # not before the first agent's command went stale
    wait_for(lambda: small.in_queue() == 0, 10, "the message to be deleted", second)
    time.sleep(1.0)  # any straggler event would arrive by now
    events = drain_events(small, command.command_id)
    assert [e["detail-type"] for e in events] == ["Node Drain Succeeded"]
    assert events[0]["detail"]["attempt"] == 2
    assert log_of(second).count("command finished command_id=spot-kill-1") == 1
    assert "command finished" not in log_of(first)
    assert bench_pods(small, node) == []


def test_an_agent_stopped_mid_drain_hands_the_command_back_at_once(small: Harness) -> None:
    node, command, first, pdb = start_blocked_drain(small, "spot-term-1", "agent-1")
    first.terminate()  # SIGTERM: 2 s of grace (AGENT_SHUTDOWN_GRACE_SECONDS), then hand back
    assert first.wait(15) == 0
    assert "handing back command command_id=spot-term-1" in log_of(first)
    item = small.store.get_command(command.command_id)
    assert item is not None and item["status"] == "queued" and item["attempt"] == 1

    unblock(small, pdb)
    second = small.agent("agent-2")
    wait_for(lambda: small.status(command.command_id) == "succeeded", 20, "the second agent to finish", second)
    item = small.store.get_command(command.command_id)
    assert item is not None and item["attempt"] == 2
    assert "busy elsewhere" not in log_of(second)  # taken at once, not after the first agent's went stale
    assert [e["detail-type"] for e in drain_events(small, command.command_id)] == ["Node Drain Succeeded"]
    assert bench_pods(small, node) == []


def test_garbage_ends_in_the_dead_letter_queue_and_the_agent_keeps_working(small: Harness) -> None:
    node, instance_id = small.worker_node()
    agent = small.agent()
    small.send_body("this is not a command")
    wait_for(lambda: small.in_queue(small.info.dlq_url) == 1, 30, "the garbage to reach the DLQ", agent)
    assert agent.alive()
    assert log_of(agent).count("malformed message") == 3  # received maxReceiveCount times, then redriven
    assert "'this is not a command'" in log_of(agent)

    command = small.command("cordon-after-garbage", instance_id, kind="cordon")
    small.send(command)
    wait_for(lambda: small.status(command.command_id) == "succeeded", 20, "a later command to run", agent)
    assert small.world.core.read_node(node).spec.unschedulable is True


def test_a_command_for_another_cluster_is_dropped_with_a_log_line(small: Harness) -> None:
    node, instance_id = small.worker_node()
    agent = small.agent()
    foreign = small.command("foreign-1", instance_id, cluster="other.k8s.local")
    small.send_body(foreign.model_dump_json())
    wait_for(lambda: "command for another cluster dropped" in log_of(agent), 20, "the drop to be logged", agent)
    wait_for(lambda: small.in_queue() == 0, 10, "the foreign message to be deleted", agent)
    assert "foreign-1" in log_of(agent) and "other.k8s.local" in log_of(agent)
    assert small.store.get_command("foreign-1") is None
    assert small.world.core.read_node(node).spec.unschedulable in (None, False)
    assert drain_events(small, "foreign-1") == []
    assert agent.alive()


# -- membership (the resync period is longer than each test: additions and deletions prove the watch path) --


def expected_membership(harness: Harness) -> dict[str, dict[str, Any]]:
    """instance id -> what its NODE# item must say, from EC2 (tags) and the apiserver (node names)."""
    names = {}
    for node in harness.world.core.list_node().items:
        names[node.spec.provider_id.rsplit("/", 1)[1]] = node.metadata.name
    expected = {}
    for instance_id, inst in harness.instances().items():
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
        expected[instance_id] = {
            "node_name": names[instance_id],
            "asg_name": tags["aws:autoscaling:groupName"],
            "instance_group": tags[INSTANCE_GROUP_TAG],
            "availability_zone": inst["Placement"]["AvailabilityZone"],
        }
    return expected


def reported(harness: Harness) -> dict[str, dict[str, Any]]:
    keys = ("node_name", "asg_name", "instance_group", "availability_zone")
    return {iid: {k: item.get(k) for k in keys} for iid, item in harness.node_items().items()}


def test_every_node_is_reported_with_its_asg_and_changes_follow_the_watch(world: LocalWorld, tmp_path: Path) -> None:
    harness = Harness(world, world.setup_cluster(nodes_per_az=1), tmp_path)
    agent = harness.agent()
    expected = expected_membership(harness)
    assert len(expected) == 6
    wait_for(lambda: reported(harness) == expected, 20, "NODE# items for all 6 nodes", agent)
    items = harness.node_items()
    masters = [i for i in items.values() if i["asg_name"].startswith("master-")]
    assert len(masters) == 3 and all("master" in m["roles"] or "control-plane" in m["roles"] for m in masters)
    assert all(i["ready"] is True and i["unschedulable"] is False for i in items.values())

    # a worker's instance terminates: the node goes, and so does its item
    gone = next(iid for iid, e in expected.items() if e["asg_name"].startswith("nodes-"))
    harness.world.client("ec2").terminate_instances(InstanceIds=[gone])
    wait_for(lambda: gone not in harness.node_items(), 20, f"the item of {gone} to be deleted", agent)

    # the ASG grows: the new instance's node is reported with its group
    asg = harness.info.worker_asgs[harness.info.azs[1]]
    harness.world.client("autoscaling").set_desired_capacity(AutoScalingGroupName=asg, DesiredCapacity=2)

    def new_item() -> list[dict[str, Any]]:
        return [i for iid, i in harness.node_items().items() if iid not in expected and i["asg_name"] == asg]

    # the node registers NotReady, then turns Ready (two writes): the item follows both
    [item] = wait_for(lambda: [i for i in new_item() if i["ready"]], 20, "the new node's item, Ready", agent)
    assert item["ready"] is True and item["node_name"].startswith("ip-")
    assert len(new_item()) == 1


def test_nodes_named_by_instance_id_are_reported_the_same(world: LocalWorld, tmp_path: Path) -> None:
    harness = Harness(
        world, world.setup_cluster(azs=("us-east-1a", "us-east-1b"), nodes_per_az=1, node_naming="id"), tmp_path
    )
    agent = harness.agent()
    expected = expected_membership(harness)
    assert len(expected) == 4 and all(e["node_name"] == iid for iid, e in expected.items())
    wait_for(lambda: reported(harness) == expected, 20, "NODE# items for nodes named by instance id", agent)
