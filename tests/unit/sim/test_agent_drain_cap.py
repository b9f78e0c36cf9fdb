"""Drains in flight are capped per cluster (issue 11, ``AGENT_CONCURRENCY``): with a leader and a standby replica of
the simulated agent sharing one queue and one table, a wave of drains is cordoned at once, but at no step of the
simulation do more than ``AGENT_CONCURRENCY`` of them evict, counted over both replicas; the standby runs none."""

from __future__ import annotations

from core.model import CommandKind
from sim.agent import SimAgent
from sim.kernel import Step
from tests.unit.sim.agent_world import World, drain


def test_a_wave_is_cordoned_at_once_and_evicts_at_most_the_cap_across_both_replicas() -> None:
    w = World("memory", concurrency=1, max_in_flight=8)
    with w.kernel.installed():
        standby = SimAgent(
            w.kernel, w.kube, w.queue, w.agent.store.table, w.autoscaling, w.settings, name="standby", leader=False
        )
    ids = [f"wave-{i}" for i in range(3)]
    for i, command_id in enumerate(ids):  # three nodes cordoned leave the pods nowhere to go: each drain times out
        w.send(drain(w.kernel, command_id, f"i-{i:017x}", 60 * (i + 1)))
    most = 0
    ran: set[str] = set()

    def count(_: Step) -> None:
        nonlocal most
        assert not standby.running
        most = max(most, len(w.agent.running) + len(standby.running))
        ran.update(w.agent.running)

    with w.kernel.installed():
        w.kernel.run(w.kernel.t + 5, after_step=count)
    assert all(w.kube.node_view(f"n{i}").unschedulable for i in range(3))  # type: ignore[union-attr]
    with w.kernel.installed():
        w.kernel.run(w.kernel.t + 300, after_step=count)
    assert [w.item(i)["status"] for i in ids] == ["timed_out"] * 3
    assert most == 1 and ran == set(ids)  # each in turn, one at a time


def test_spot_drains_evict_at_once_over_the_cap_held_by_a_refresh_drain() -> None:
    """A drain whose instance is reclaimed in two minutes waits for no slot (``schedule.urgent_drain``, as the
    agent's ``DeadlineGate`` admits it): with the one slot held by a refresh drain whose pods have nowhere to go, two
    Spot drains evict at once beside it (before, they waited behind it past their deadline)."""
    w = World("memory", concurrency=1, max_in_flight=8)
    w.send(drain(w.kernel, "refresh-r1-0", f"i-{2:017x}", 1800, reason="refresh r1 step 0"))
    with w.kernel.installed():
        w.kernel.run(w.kernel.t + 5)
    assert list(w.agent.running) == ["refresh-r1-0"]
    ids = [f"spot-{i}" for i in range(2)]
    for i, command_id in enumerate(ids):
        w.send(drain(w.kernel, command_id, f"i-{i:017x}", 120, reason="spot-interruption:terminate"))
    with w.kernel.installed():
        w.kernel.run(w.kernel.t + 5)
    assert set(w.agent.running) == {"refresh-r1-0", *ids} and not w.agent.waiting
    assert w.agent.counts.get("urgent_over_bound") == 2
    assert [w.item(i)["status"] for i in ids] == ["running"] * 2


def test_an_uncordon_leaves_the_cordon_of_a_drain_waiting_for_its_slot() -> None:
    """An uncordon command for a node whose drain is cordoned and waiting for a slot (the engine does not run it
    yet) leaves the cordon, as it does a running drain's (``WorkerBase.drains_in_flight``): it used to undo it, and
    pods were scheduled onto a node about to be drained."""
    w = World("memory", concurrency=1, max_in_flight=8)
    w.send(drain(w.kernel, "refresh-r1-0", f"i-{0:017x}", 1800, reason="refresh r1 step 0"))
    w.send(drain(w.kernel, "refresh-r1-1", f"i-{1:017x}", 1800, reason="refresh r1 step 1"))
    with w.kernel.installed():
        w.kernel.run(w.kernel.t + 5)
    waiting = [j.command.command_id for _, _, j in w.agent.waiting]
    assert len(w.agent.running) == 1 and len(waiting) == 1
    node = w.kube.node_view(f"n{int(waiting[0][-1])}")
    assert node is not None and node.unschedulable and node.cordoned_by == waiting[0]
    w.send(drain(w.kernel, "giveback-uncordon", node.instance_id or "", 300, kind=CommandKind.UNCORDON))
    with w.kernel.installed():
        w.kernel.run(w.kernel.t + 5)
    uncordon = w.item("giveback-uncordon")
    assert (
        uncordon["status"] == "succeeded" and f"being drained by command {waiting[0]}" in uncordon["result"]["message"]
    )
    after = w.kube.node_view(node.name)
    assert after is not None and after.unschedulable and after.cordoned_by == waiting[0]
