"""The membership reporter on moto's DynamoDB and Auto Scaling with nodes given in memory: a resync writes every node
and forgets instances without one, watch events write changes and delete gone nodes, the loop lists again after a 410
(the watch against a real apiserver is in tests/integration/agent/test_agent.py)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from adapters.aws.autoscaling import AutoScaling
from agent.asglookup import AsgLookup
from agent.kube.views import NodeEvent, NodeView
from agent.membership import MembershipReporter
from core.model import NodeRecord, utcnow
from tests.unit.agent.membership_world import NOW, Aws, MemoryNodes, cluster_nodes, node_items


@pytest.mark.parametrize("by_instance_id", [False, True])
def test_resync_writes_every_node_and_forgets_instances_without_one(aws: Aws, by_instance_id: bool) -> None:
    aws.store.put_node(
        NodeRecord(instance_id="i-0deadbeefdeadbeef", node_name="gone", reported_at=utcnow() - timedelta(minutes=1)),
        600,
    )
    nodes = cluster_nodes(aws, by_instance_id)
    reporter = MembershipReporter(MemoryNodes(nodes), aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 60, 600)
    assert reporter.resync() == "101"

    items = node_items(aws.store)
    assert set(items) == set(aws.instances)
    for instance_id, (az, asg) in aws.instances.items():
        assert items[instance_id]["asg_name"] == asg and items[instance_id]["availability_zone"] == az
        assert items[instance_id]["expires_at"] >= int(utcnow().timestamp()) + 590
    names = {items[i]["node_name"] for i in items}
    assert names == {n.name for n in nodes}


def test_watch_events_write_changes_and_delete_gone_nodes(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    source = MemoryNodes(nodes)
    clock_now = [NOW]
    reporter = MembershipReporter(
        source, aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 60, 600, clock=lambda: clock_now[0]
    )
    reporter.resync()
    first, second = nodes[0], nodes[1]
    before = node_items(aws.store)[second.instance_id]["reported_at"]

    clock_now[0] = NOW + timedelta(seconds=5)
    reporter.apply("MODIFIED", second)  # nothing changed but the heartbeat: no write
    assert node_items(aws.store)[second.instance_id]["reported_at"] == before
    cordoned = NodeView(**{**second.__dict__, "unschedulable": True, "ready": False})
    reporter.apply("MODIFIED", cordoned)
    item = node_items(aws.store)[second.instance_id]
    assert item["unschedulable"] is True and item["ready"] is False and item["reported_at"] != before

    reporter.apply("DELETED", first)
    assert first.instance_id not in node_items(aws.store)
    calls = len(aws.autoscaling.calls)
    reporter.apply("ADDED", first)  # back (a known instance: its ASG comes from the cache)
    assert node_items(aws.store)[first.instance_id]["asg_name"] == aws.instances[first.instance_id][1]
    assert len(aws.autoscaling.calls) == calls


def test_the_loop_lists_again_after_a_410_and_keeps_going(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    source = MemoryNodes(nodes)
    gone = nodes[0]
    source.watches = [
        [NodeEvent(type="ERROR", code=410)],
        [NodeEvent(type="DELETED", node=gone, resource_version="200")],
    ]
    source.nodes = nodes[1:]  # the node is gone by the time of the re-list too
    reporter = MembershipReporter(source, aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 3600, 7200)
    stop = threading.Event()
    loop = threading.Thread(target=reporter.run, args=(stop,))
    loop.start()
    try:
        assert source.done.wait(10)
    finally:
        stop.set()
        loop.join(10)
    assert not loop.is_alive()
    assert source.lists == 2  # the first list, and again after the 410
    assert set(node_items(aws.store)) == {n.instance_id for n in nodes[1:]}
