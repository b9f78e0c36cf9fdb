"""The agent as it runs: ``python -m agent`` as a real process against the local world (moto server, a real
kube-apiserver with the agent's own RBAC, the cluster simulator), fed the way the interruption Lambda feeds it
(a ``CMD#`` record, then an SQS message).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from core.kops import INSTANCE_GROUP_TAG
from core.model import Command
from localworld.workloads import block_with_pdb, deploy_pods_on_node
from localworld.world import LocalWorld, Spawned
from tests.integration.agent.harness import Harness, bench_pods, log_of, wait_for

pytestmark = pytest.mark.world


@pytest.fixture
def small(world: LocalWorld, tmp_path: Path) -> Harness:
    """3 masters + 3 workers (nodes named by private DNS), simulator running."""
    return Harness(world, world.setup_cluster(nodes_per_az=1), tmp_path)


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
