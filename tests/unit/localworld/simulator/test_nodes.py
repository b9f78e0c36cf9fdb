"""Node lifecycle planning: register instances of the cluster, ready them, delete Nodes of instances gone."""

from __future__ import annotations

from typing import Any

from localworld.simulator.base import Action
from localworld.simulator.nodes import SIMULATED_ANNOTATION, NodeLifecycle

from .helpers import node, shared, view


def instance(iid: str, state: str = "running") -> dict[str, Any]:
    return {"InstanceId": iid, "State": {"Name": state}, "PrivateDnsName": f"ip-{iid}.ec2.internal"}


def lifecycle(**kwargs: Any) -> NodeLifecycle:
    options: dict[str, Any] = {"node_naming": "dns", "ec2_interval": 1.0, "join_delay": 0.0, **kwargs}
    return NodeLifecycle(shared(), None, "c", **options)


def planned(nodes: NodeLifecycle, existing: list[dict[str, Any]]) -> list[str]:
    actions: list[Action] = []
    nodes.plan(view(existing, []), actions)
    return [what for what, _ in actions]


def test_live_instances_without_a_node_register_unless_told_never_to() -> None:
    nodes = lifecycle()
    nodes.instances = {i["InstanceId"]: i for i in (instance("i-1"), instance("i-2"), instance("i-3", "stopped"))}
    nodes.never_join("i-2")
    assert planned(nodes, []) == ["register node for i-1"]
    assert planned(nodes, []) == []  # held while the registration is in flight


def test_join_delay_holds_the_registration() -> None:
    nodes = lifecycle(join_delay=60.0)
    nodes.instances = {"i-1": instance("i-1")}
    assert planned(nodes, []) == []


def test_simulated_nodes_follow_their_instance() -> None:
    nodes = lifecycle()
    gone, not_ready, foreign = node("gone"), node("nr", ready=False), node("foreign")
    gone["spec"]["providerID"] = "aws:///us-east-1a/i-gone"
    not_ready["spec"]["providerID"] = "aws:///us-east-1a/i-nr"
    foreign["spec"]["providerID"] = "aws:///us-east-1a/i-foreign"
    for n in (gone, not_ready):
        n["metadata"]["annotations"] = {SIMULATED_ANNOTATION: "true"}
    nodes.instances = {"i-gone": instance("i-gone", "terminated"), "i-nr": instance("i-nr")}
    assert sorted(planned(nodes, [gone, not_ready, foreign])) == ["delete node gone", "mark node nr Ready"]
