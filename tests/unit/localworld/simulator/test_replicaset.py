"""The ReplicaSet controller's planning: create the missing pods, delete the surplus unbound and not-ready first."""

from __future__ import annotations

from typing import Any

from localworld.simulator.base import Action
from localworld.simulator.replicaset import PREFER_NODE_ANNOTATION, ReplicaSetController

from .helpers import node, pod, shared, view


def rset(replicas: int, **annotations: str) -> dict[str, Any]:
    meta = {"name": "rs", "namespace": "ns", "uid": "rs-uid", "annotations": annotations}
    return {"metadata": meta, "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c"}]}}}}


def test_missing_pods_are_created_on_the_least_loaded_or_preferred_node() -> None:
    v = view([node("a"), node("b")], [pod("p1", node_name="a", owner="rs-uid")], rsets={"ns/rs": rset(3)})
    v.load.update({"a": 1, "b": 0})
    actions: list[Action] = []
    ReplicaSetController(shared()).plan(v, actions)
    assert [what for what, _ in actions] == ["create pod for ns/rs"] * 2
    assert v.load == {"a": 2, "b": 1}
    preferred = view([node("a"), node("b")], [], rsets={"ns/rs": rset(2, **{PREFER_NODE_ANNOTATION: "a"})})
    ReplicaSetController(shared()).plan(preferred, [])
    assert preferred.load == {"a": 2}


def test_surplus_goes_unbound_first_then_not_ready() -> None:
    bound_ready = pod("ready", node_name="a", owner="rs-uid")
    bound_ready["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pods = [bound_ready, pod("unbound", owner="rs-uid"), pod("starting", node_name="a", owner="rs-uid")]
    actions: list[Action] = []
    ReplicaSetController(shared()).plan(view([node("a")], pods, rsets={"ns/rs": rset(1)}), actions)
    assert [what for what, _ in actions] == ["scale down ns/rs"] * 2
