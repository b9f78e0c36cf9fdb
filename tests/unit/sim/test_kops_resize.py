"""kOps resizes in the simulation (the ``resize`` profile: ``kops_spec`` entries with ``grow``, ``sim.actors
._kops_spec``): a worker group's spec MinSize and MaxSize moved together, its size clamped into them by Auto
Scaling, and what the end check and the shortfall bound compare with following it."""

from __future__ import annotations

import random

from sim.run import run_seed
from sim.schedules import RESIZE, STORM, Fault, Profile, generate
from sim.world import World
from tests.unit.sim.fault_entry import entry


def test_the_resize_profile_is_the_storm_plus_resizes() -> None:
    for seed in range(5):
        storm = generate(random.Random(seed), 30, 2, STORM)
        resize = generate(random.Random(seed), 30, 2, RESIZE)
        added = [f for f in resize if f.param("grow")]
        assert tuple(f for f in resize if not f.param("grow")) == storm
        assert added and {int(f.param("grow")) for f in added} <= {-2, -1, 1, 2}
    assert not any(f.param("grow") for seed in range(20) for f in generate(random.Random(seed), 30, 2, STORM))


def test_resizes_are_drawn_inside_outages() -> None:
    inside = 0
    for seed in range(20):
        schedule = generate(random.Random(seed), 30, 2, RESIZE)
        outages = [(f.at, f.at + f.duration) for f in schedule if f.kind == "outage"]
        resizes = [f.at for f in schedule if f.param("grow")]
        inside += sum(any(start <= at <= end for start, end in outages) for at in resizes)
    assert inside >= 10  # 4 outages a seed, half with one; the random ones fall in some too


def _run(*schedule: Fault, days: float = 0.1) -> tuple[World, str | None, str]:
    """The world after ``schedule`` on 9 nodes, the failure (None when every check held) and the trace."""
    worlds: list[World] = []
    result = run_seed(3, nodes=9, days=days, schedule=schedule, profile=Profile(), mutate=worlds.append, trace=True)
    return worlds[0], None if result.violation is None else result.summary(), "\n".join(result.trace)


def test_a_resize_up_raises_the_group_to_its_new_min_size_and_the_end_check_follows() -> None:
    world, failed, _ = _run(entry(600, "kops_spec", az="us-east-1a", below=0, above=1, grow=2))
    assert failed is None, failed
    group = world.cloud.groups["nodes-us-east-1a"]
    assert (group.min_size, group.max_size, group.desired) == (5, 6, 5)
    assert world.sizes["nodes-us-east-1a"] == (5, 6, 5)
    assert world.sizes_at_start["nodes-us-east-1a"] == (5, 6)
    assert len([i for i in world.cloud.instances.values() if i.group == "nodes-us-east-1a" and i.alive]) == 5


def test_a_resize_down_clamps_the_group_and_counts_what_kops_took() -> None:
    world, failed, _ = _run(entry(600, "kops_spec", az="us-east-1b", below=1, above=0, grow=-1))
    assert failed is None, failed
    group = world.cloud.groups["nodes-us-east-1b"]
    assert (group.min_size, group.max_size, group.desired) == (1, 2, 2)
    assert world.sizes_at_start["nodes-us-east-1b"] == (2, 2)
    assert world.kops_taken == 1


def test_a_group_resized_up_where_nothing_launches_is_covered_by_its_siblings() -> None:
    world, failed, trace = _run(
        entry(600, "outage", duration=4 * 3600, az="us-east-1a"),
        entry(1200, "kops_spec", az="us-east-1a", below=0, above=0, grow=2),
        days=0.4,
    )
    assert failed is None, failed
    assert "cover 2 of nodes-us-east-1a's shortfall with nodes-us-east-1b +1, nodes-us-east-1c +1" in trace
    assert world.sizes_at_start["nodes-us-east-1a"] == (5, 5)
