"""The invariant checker's reads of the table (``sim.view.View``): each kind from its own partition
(``core.schema.partition_for``). A prefix read from the wrong partition answers nothing, and every check over
``CMD#`` or ``RUN#`` items would hold vacuously."""

from __future__ import annotations

from core.schema import agent_partition_of
from sim.world import AZS, CLUSTER, Shape, World


def test_the_checker_reads_commands_from_the_agent_partition_and_the_lock_from_the_cluster_one() -> None:
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    world.run(120.0)
    instance = world.pick_instance(AZS[0])
    assert instance is not None
    with world.kernel.installed():
        assert world.aws.interrupt(instance)
    world.run(world.kernel.t + 30.0)

    commands = world.view.table_prefix("CMD#")
    assert [c["instance_id"] for c in commands if str(c["sk"]).startswith("CMD#spot-")] == [instance]
    assert all(c["pk"] == agent_partition_of(CLUSTER) for c in commands)
    assert world.view.table_item(str(commands[0]["sk"])) == commands[0]
    lock = world.view.table_item("LOCK")
    assert lock is None or lock["pk"] != agent_partition_of(CLUSTER)
