"""The kubelet's planning: start pods on Ready nodes, finish graceful deletions, drop pods of deleted nodes."""

from __future__ import annotations

from localworld.simulator.base import Action
from localworld.simulator.kubelet import Kubelet

from .helpers import node, pod, shared, view


def planned(kubelet: Kubelet, nodes: list, pods: list) -> list[str]:
    actions: list[Action] = []
    kubelet.plan(view(nodes, pods), actions)
    return [what for what, _ in actions]


def test_bound_pods_start_only_on_ready_nodes() -> None:
    kubelet = Kubelet(shared())
    pods = [pod("p1", node_name="a"), pod("p2", node_name="b"), pod("p3")]
    assert planned(kubelet, [node("a"), node("b", ready=False)], pods) == ["start pod ns/p1"]


def test_pods_of_a_node_that_went_away_are_deleted_but_not_those_of_a_node_never_seen() -> None:
    kubelet = Kubelet(shared())
    pods = [pod("p1", node_name="a"), pod("p2", node_name="unknown")]
    assert planned(kubelet, [node("a")], pods) == ["start pod ns/p1"]
    assert planned(kubelet, [], pods) == ["delete pod ns/p1 of deleted node"]


def test_graceful_deletion_without_grace_is_left_to_the_api() -> None:
    kubelet = Kubelet(shared())
    terminating = pod("p1", node_name="a", deletionTimestamp="2030-01-01T00:00:00Z", deletionGracePeriodSeconds=0)
    assert planned(kubelet, [node("a")], [terminating]) == []
