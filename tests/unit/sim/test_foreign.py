"""Another tool or a person terminating an instance of a worker group (``sim.foreign``, ``storm`` only): drawn after
every other entry, applied through the simulated Auto Scaling's port (refused at MinSize) without the product's
tripwire or a drain, and judged so that the checker blames the product only for its own answer."""

from __future__ import annotations

import random

from sim.foreign import Foreign
from sim.run import run_seed
from sim.schedules import STORM, generate
from sim.world import World
from tests.unit.sim.fault_entry import entry
from tests.unit.sim.storm_profiles import STORM_BEFORE_FOREIGN

GROUP = "nodes-us-east-1a"


def test_storm_draws_them_after_every_other_entry_and_the_default_profile_none() -> None:
    drawn = []
    for seed in range(10):
        assert not any(f.kind == "foreign_terminate" for f in generate(random.Random(seed), 30, 2))
        storm = generate(random.Random(seed), 30, 2, STORM)
        before = generate(random.Random(seed), 30, 2, STORM_BEFORE_FOREIGN)
        assert tuple(f for f in storm if f.kind != "foreign_terminate") == before
        drawn += [f for f in storm if f.kind == "foreign_terminate"]
    assert {str(f.param("target")) for f in drawn} == {"spare", "any"}
    assert {int(f.param("decrement")) for f in drawn} == {0, 1}
    assert sum(f.param("target") == "spare" for f in drawn) > len(drawn) / 2


def test_the_floor_counts_only_units_taken_below_the_start() -> None:
    foreign = Foreign(decrements={GROUP: 2})
    assert foreign.lowest(GROUP, 10, 0) == 8
    assert foreign.lowest(GROUP, 10, 9) == 9  # never below MinSize
    assert foreign.lowest("nodes-us-east-1b", 10, 0) == 10
    assert [d for d in range(6, 13) if foreign.accepts(GROUP, d, 10, 0)] == [8, 9, 10]  # never above the start


def test_a_decrement_at_min_size_is_refused_as_aws_refuses_it_and_nothing_happens() -> None:
    world = World.build(3)
    group = world.cloud.groups[GROUP]
    before = (group.desired, sorted(group.members))
    world.run(60.0)
    world.apply((entry(100, "foreign_terminate", az="us-east-1a", target="any", decrement=1),))
    world.run(200.0)
    assert (group.desired, sorted(group.members)) == before
    assert world.checker.foreign.terminated == {} and world.checker.foreign.decrements == {}


def test_the_newest_instance_goes_at_once_undrained_and_the_product_s_calls_do_not_count_it() -> None:
    world = World.build(3)
    world.apply((entry(0, "kops_spec", az="us-east-1a", below=1, above=1),))
    world.run(60.0)
    group = world.cloud.groups[GROUP]
    newest = max(group.active(), key=lambda i: (i.started, i.instance_id))
    node = world.kube.instances[newest.instance_id]
    start, calls = group.desired, world.checker.checks
    world.apply((entry(100, "foreign_terminate", az="us-east-1a", target="spare", decrement=1),))
    world.run(101.0)
    assert not newest.alive and node not in world.kube.nodes  # no drain: the node went with it
    assert group.desired == start - 1 and world.checker.foreign.decrements == {GROUP: 1}
    assert newest.instance_id in world.checker.foreign.terminated
    assert newest.instance_id not in world.checker.refreshed
    assert world.checker.checks - calls < 2  # a scan at most: no call of a Lambda was judged


def test_a_unit_taken_above_the_start_does_not_lower_the_floor() -> None:
    """A decrement while a raise of ours holds the group above its start takes our unit: the group must still end
    at its start (the refresher's ``unit_taken``, the replenisher's give-back of a donor resized by someone else)."""
    world = World.build(3)
    world.apply((entry(0, "kops_spec", az="us-east-1a", below=1, above=1),))
    world.run(60.0)
    group = world.cloud.groups[GROUP]
    start = group.desired
    world.cloud.set_sizes(GROUP, group.min_size, group.max_size, start + 1)  # a surge unit (no checker involved)
    world.run(300.0)
    world.apply((entry(300, "foreign_terminate", az="us-east-1a", target="spare", decrement=1),))
    world.run(301.0)
    assert group.desired == start and world.checker.foreign.decrements == {}


def test_a_refresh_whose_spare_another_tool_takes_holds_every_invariant() -> None:
    """A spare taken while its old node drains (with and without the decrement): the refresher waits for its Ready
    nodes and gives the surge back at the deadline, or Auto Scaling's replacement stands in; a spare taken while it
    surges is raised again."""
    for at, decrement in ((250, 1), (270, 0), (300, 1), (400, 0)):
        schedule = (
            entry(100, "manual_refresh", az="us-east-1a"),
            entry(at, "foreign_terminate", az="us-east-1a", target="spare", decrement=decrement),
        )
        result = run_seed(5, nodes=9, days=0.5, schedule=schedule, trace=True)
        assert result.violation is None, result.summary()
        assert any("foreign terminate" in line for line in result.trace)


def test_a_compensation_whose_instance_another_tool_takes_with_decrement_moves_to_another_sibling() -> None:
    """An outage in 1a and a reclaim there: the replenisher raises 1b; another tool takes 1b's newest instance (the
    compensating one) with decrement. The replenisher reads the donor reset by someone else, covers the shortfall
    with 1c, and every group ends at its start (the decrement took our unit: it lowers no floor)."""
    schedule = (
        entry(60, "outage", 3 * 3600, az="us-east-1a"),
        entry(300, "spot", az="us-east-1a", count=1),
        entry(1500, "foreign_terminate", az="us-east-1b", target="spare", decrement=1),
    )
    result = run_seed(3, nodes=9, days=0.5, schedule=schedule, trace=True)
    assert result.violation is None, result.summary()
    trace = "\n".join(result.trace)
    assert "foreign terminate nodes-us-east-1b" in trace and "desired 4 -> 3" in trace
    assert "size_reset: nodes-us-east-1b" in trace and "set nodes-us-east-1c desired 4" in trace
