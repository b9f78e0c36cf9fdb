"""The watch's look at compensations and refresh waits (``sim.watch.Watch.waits``) reads the ``COMP#`` and ``RUN#``
ranges of the cluster partition, and when one is late names the first late item in the partition's order, as the
walk over the whole partition did (a partition holding a late run before a late compensation names the run)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from sim.invariants import Violation, view_epoch
from sim.watch import Watch
from sim.world import Shape, World


def iso(t: float) -> str:
    return datetime.fromtimestamp(view_epoch(t)).astimezone().isoformat()


def put(world: World, sk: str, **fields: Any) -> None:
    key = (world.view.partition, sk)
    world.table.store(key, {"pk": key[0], "sk": sk, **fields}, 100)


def late_run(world: World, sk: str) -> None:
    put(world, sk, status="running", steps=[{"index": 0, "waiting_since": {"spare_launch": iso(0.0)}}])


def late_comp(world: World, sk: str) -> None:
    put(world, sk, compensation={"healthy_since": iso(0.0)})


@pytest.mark.parametrize("run_first", [True, False])
def test_the_first_late_item_in_the_partition_s_order_is_named(run_first: bool) -> None:
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    watch = Watch(world)
    world.run(86400.0)
    for k in range(30):
        put(world, f"DETACH#i-{k:017x}", instance_id=f"i-{k:017x}")
    put(world, "RUN#quiet", status="succeeded", steps=[{"index": 0, "waiting_since": {"spare_launch": iso(0.0)}}])
    put(world, "COMP#fresh", compensation={"healthy_since": iso(world.kernel.t - 60.0)})
    watch.waits()  # nothing late
    if run_first:  # a late run before a late compensation (which sorts first) in the partition
        late_run(world, "RUN#a")
        late_comp(world, "COMP#z")
    else:
        late_comp(world, "COMP#z")
        late_run(world, "RUN#a")
    with pytest.raises(Violation) as found:
        watch.waits()
    assert found.value.detail.startswith("RUN#a" if run_first else "COMP#z")


def test_an_item_the_checks_cannot_read_fails_where_the_walk_meets_it() -> None:
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    watch = Watch(world)
    world.run(86400.0)
    late_run(world, "RUN#a")
    put(world, "COMP#bad", compensation={"healthy_since": "not a time"})
    with pytest.raises(Violation):  # the late run first: named, the bad item never read
        watch.waits()
    world.table.store((world.view.partition, "RUN#a"), None, 0)
    with pytest.raises(ValueError):
        watch.waits()
