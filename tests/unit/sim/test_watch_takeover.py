"""The watch's wait for a dead agent life's drain to be taken over (``sim.watch.TAKEOVER_SLACK``, resize seed 350004)
excuses a node that life never cordoned, not one it did: a node seen cordoned under the drain and then schedulable
again while the drain still runs was uncordoned by something, whoever holds the command (docs/SIMULATION.md,
"Findings").

Seed 7 of the ``resize`` profile (30 nodes x 0.5 days) with two faults: a Spot warning in ``us-east-1a`` (the agent
starts the drain of ``i-ee569e40683784565`` at 20,114.8 s and cordons its node at once) and an agent crash 10 s
later (20,125 s; its last heartbeat 20,120 s). At 20,135 s the node is uncordoned, as a product bug would (not an
operator: ``World.operator_cordon`` is not told). The new life takes the command over only once the heartbeat is
stale (20,181 s) and cordons again; until then the node is schedulable under a drain, and with the excuse applied to
any node of a dead life's drain the watch saw nothing.
"""

from __future__ import annotations

from sim.run import run_seed
from sim.schedules import RESIZE, Fault
from sim.world import World

SCHEDULE = (
    Fault(20000.0, "spot_burst", 200.0, (("az", "us-east-1a"), ("count", 1))),
    Fault(20125.0, "agent_restart", params=(("leader", 0),)),
)
INSTANCE, NODE = "i-ee569e40683784565", "ip-10-0-0-7.ec2.internal"
UNCORDON_AT = 20135.0


def uncordon_under_a_dead_life(world: World) -> None:
    """At 20,135 s, uncordon the drained node (asserting it is cordoned and its drain held by the dead life)."""

    def uncordon() -> None:
        (item,) = [
            i
            for i in world.view.table_prefix("CMD#")
            if i.get("kind") == "drain" and i.get("status") == "running" and i.get("instance_id") == INSTANCE
        ]
        assert item.get("worker") != world.agent.worker_id  # the life that started it died
        (node,) = world.view.nodes_of([INSTANCE])
        assert node.name == NODE and node.unschedulable  # that life cordoned it
        world.kube.patch_node(NODE, {"spec": {"unschedulable": False}})

    world.kernel.at(UNCORDON_AT, "test:uncordon", uncordon)


def test_a_dead_lifes_drain_without_an_uncordon_holds() -> None:
    assert run_seed(7, 30, 0.5, schedule=SCHEDULE, profile=RESIZE).violation is None


def test_a_node_uncordoned_under_a_dead_lifes_drain_breaks_invariant_5() -> None:
    result = run_seed(7, 30, 0.5, schedule=SCHEDULE, profile=RESIZE, mutate=uncordon_under_a_dead_life)
    assert result.violation is not None, result.summary()
    assert result.violation.invariant == "5 a drained node is cordoned at once"
    assert f"{NODE} ({INSTANCE})" in result.violation.detail
    assert UNCORDON_AT <= result.violation.at <= UNCORDON_AT + 5.0  # the watch's next look (every 5 s)
