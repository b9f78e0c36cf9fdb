"""The scheduler's placement: least loaded fitting node, a preferred node first, live pods bound once."""

from __future__ import annotations

from localworld.simulator.base import Action
from localworld.simulator.scheduler import Scheduler, node_load, pick_node

from .helpers import node, pod, shared, view


def test_load_counts_live_pods_per_node() -> None:
    done = pod("done", node_name="a")
    done["status"]["phase"] = "Succeeded"
    pods = {p["metadata"]["name"]: p for p in (pod("p1", node_name="a"), pod("p2", node_name="b"), done)}
    assert node_load(pods, {"a": node("a"), "b": node("b"), "c": node("c")}) == {"a": 1, "b": 1, "c": 0}


def test_pick_node_takes_the_least_loaded_fitting_node_and_counts_the_choice() -> None:
    nodes = {"a": node("a"), "b": node("b"), "c": node("c", ready=False)}
    load = {"a": 2, "b": 1, "c": 0}
    assert pick_node({}, nodes, load) == "b"
    assert load["b"] == 2
    assert pick_node({}, nodes, load) == "a"  # tie on load: the name that sorts first
    assert pick_node({}, nodes, load, prefer="b") == "b"
    assert pick_node({}, nodes, load, prefer="c") in ("a", "b")  # a preferred node that does not fit is ignored
    assert pick_node({"nodeSelector": {"zone": "x"}}, nodes, load) is None


def test_unbound_pods_are_bound_once_while_the_binding_is_held() -> None:
    sched = Scheduler(shared())
    v = view([node("a"), node("b")], [pod("p"), pod("bound", node_name="a"), pod("other")])
    v.pods["ns/other"]["spec"]["schedulerName"] = "custom"
    v.load.update({"a": 1, "b": 0})
    actions: list[Action] = []
    sched.plan(v, actions)
    assert [what for what, _ in actions] == ["bind ns/p to b"]
    again: list[Action] = []
    sched.plan(v, again)
    assert again == []
