"""A Spot warning for an instance whose node has not registered yet (an early replacement launched seconds before,
warned in the same wave): the agent waits for the node (``agent.consumer.steps.NodeWait``) instead of skipping the
drain, cordons it once it registers and drains what was placed on it. Before, the drain was skipped; the node
registered a minute later, took pods evicted from the other warned nodes and was reclaimed with them
(``bench/wave_slots.py``: 13 to 28 pods killed in a wave of 180 on 300 nodes)."""

from __future__ import annotations

from tests.unit.sim.agent_world import World, drain

LATE = "i-000000000000000a1"


def test_a_spot_drain_waits_for_its_node_to_register_then_cordons_and_drains_it() -> None:
    w = World("memory")
    w.send(drain(w.kernel, "spot-late", LATE, 120, reason="spot-interruption:terminate"))
    w.run(20)  # received, started, no node: waiting, not skipped
    assert w.item("spot-late")["status"] == "running"
    w.kube.add_node("n-late", LATE, "us-east-1a")  # the kubelet registers; the scheduler may place pods on it
    w.run(3)
    node = w.kube.node_view("n-late")
    assert node is not None and node.unschedulable and node.cordoned_by == "spot-late"  # within a probe (2 s)
    w.run(100)
    item = w.item("spot-late")
    assert item["status"] == "succeeded", item["result"]["message"]
    assert [k for k in w.kube.by_node["n-late"] if not k.startswith("kube-system/")] == []
    assert w.agent.worker.counters.snapshot().get("node_wait") == 1


def test_a_drain_whose_instance_stays_is_skipped_at_once_and_a_spot_drain_when_its_wait_ends() -> None:
    w = World("memory", node_registration_wait_seconds=30)
    w.send(drain(w.kernel, "refresh-late", LATE, 900, reason="refresh r1 step 0"))
    w.send(drain(w.kernel, "spot-never", "i-000000000000000b2", 120, reason="spot-interruption:terminate"))
    w.run(5)
    assert w.item("refresh-late")["status"] == "skipped"  # its instance stays: no node, nothing to drain
    assert w.item("spot-never")["status"] == "running"
    w.run(40)
    item = w.item("spot-never")
    assert item["status"] == "skipped" and "none registered within 30 s" in item["result"]["message"]
