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

How long the wait lasts (``Watch._taken_over_later``) follows the sweep's re-sends (``lambdas.common.sweep``): one
before the heartbeat went stale holds the next back ``COMMAND_SWEEP_SECONDS``; one after it is the retake itself.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.schema import agent_partition_of
from sim.invariants import view_epoch
from sim.run import run_seed
from sim.schedules import RESIZE, Fault
from sim.watch import Watch
from sim.world import CLUSTER, Shape, World

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


@pytest.mark.parametrize(
    ("resent", "due", "started"),
    [
        (None, 1060.0 + 180.0, None),  # never re-sent: the stale heartbeat and TAKEOVER_SLACK
        (700.0, 1060.0 + 180.0, None),  # re-sent 300 s before it went stale: the sweep may send it again from then on
        (
            990.0,
            1290.0 + 180.0,
            None,
        ),  # re-sent 70 s before it went stale: the sweep's next re-send no sooner than +300 s
        (
            1100.0,
            1060.0 + 180.0,
            None,
        ),  # the sweep's retake, 40 s after: its 60 s end before the stale heartbeat's wait
        (
            1200.0,
            1200.0 + 60.0,
            None,
        ),  # a later retake: RETAKE_SLACK past it, no more (a re-send each 300 s excuses no more)
        (990.0, 1060.0 + 180.0, 995.0),  # re-sent while queued, then started (the dead life's start took it): spent
    ],
)
def test_the_takeover_wait_counts_the_sweep_s_re_sends(resent: float | None, due: float, started: float | None) -> None:
    """A dead life's drain (heartbeat 1,000 s, stale after 60 s) waits until ``due`` (simulated seconds)."""
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    watch = Watch(world)
    key = (agent_partition_of(CLUSTER), "CMD#dead")  # the agent's partition (core.schema)
    item = {"pk": key[0], "sk": key[1], "status": "running", "worker": "agent-gone:0", "stale_after_seconds": 60}
    item["heartbeat_at"] = view_epoch(1000.0)
    if resent is not None:
        item["resent_at"] = datetime.fromtimestamp(view_epoch(resent), UTC).isoformat()
    if started is not None:
        item["started_at"] = datetime.fromtimestamp(view_epoch(started), UTC).isoformat()
    world.table.store(key, item, 100)
    assert watch._taken_over_later("CMD#dead", due - 0.5)
    assert not watch._taken_over_later("CMD#dead", due + 0.5)
