"""Drains in flight are capped per cluster (issue 11, ``AGENT_CONCURRENCY``): with a leader and a standby replica of
the simulated agent sharing one queue and one table, a wave of drains is cordoned at once, but at no step of the
simulation do more than ``AGENT_CONCURRENCY`` of them evict, counted over both replicas; the standby runs none."""

from __future__ import annotations

from sim.agent import SimAgent
from sim.kernel import Step
from tests.unit.sim.agent_world import drain
from tests.unit.sim.test_agent import World


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
