"""The instance id -> node name index fed by node lists and the node watch."""

from __future__ import annotations

from agent.kube.nodeindex import NodeIndex
from agent.kube.views import NodeEvent, NodeView


def aws_node(name: str, instance_id: str) -> NodeView:
    return NodeView(name=name, provider_id=f"aws:///us-east-1a/{instance_id}")


def test_nodes_are_indexed_by_the_instance_of_their_provider_id() -> None:
    index = NodeIndex()
    index.saw(aws_node("ip-10-0-0-1.ec2.internal", "i-0aaaaaaaaaaaaaaa1"))
    index.saw(NodeView(name="kind-worker", provider_id="kind://docker/kind/kind-worker"))
    assert index.name("i-0aaaaaaaaaaaaaaa1") == "ip-10-0-0-1.ec2.internal"
    assert len(index) == 1


def test_a_deleted_node_is_forgotten_unless_its_instance_has_a_newer_node() -> None:
    index = NodeIndex()
    old = aws_node("old-name", "i-0aaaaaaaaaaaaaaa1")
    index.saw_event(NodeEvent(type="ADDED", node=old))
    index.saw_event(NodeEvent(type="MODIFIED", node=aws_node("new-name", "i-0aaaaaaaaaaaaaaa1")))
    index.saw_event(NodeEvent(type="DELETED", node=old))  # the old name's deletion arrives late
    assert index.name("i-0aaaaaaaaaaaaaaa1") == "new-name"
    index.saw_event(NodeEvent(type="DELETED", node=aws_node("new-name", "i-0aaaaaaaaaaaaaaa1")))
    assert index.name("i-0aaaaaaaaaaaaaaa1") is None
    index.saw_event(NodeEvent(type="BOOKMARK", resource_version="9"))
    assert len(index) == 0
