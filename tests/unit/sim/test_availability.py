"""bench.availability and its meter (bench.availability_meter): what the meter counts as capacity and why a
node-minute is missing.

A node whose instance the product detached for an early replacement runs, Ready, until EC2 reclaims it: it is
capacity exactly as the same node under the ASG alone is until the reclaim. The first version of the benchmark
counted only instances a group holds, so the product's early replacement showed no gain (issue 12, item 6).
"""

from __future__ import annotations

from bench.availability import _no_invoke, outage_burst, run_policy
from bench.availability_meter import LOSS_DETACH, LOSS_RECLAIM, Causes, Meter
from sim.schedules import Fault
from sim.world import NoAgent, Shape, World

DETACHED = "measure: detached instance still running, node Ready"


def _asg_world(nodes: int) -> World:
    world = World(5, Shape(nodes=nodes, masters=1), agent=lambda _world: NoAgent())
    world._populate()
    for group in world.cloud.groups.values():
        group.hooks = ()
    world.bus.invoke = _no_invoke  # type: ignore[method-assign]  # the ASG alone: no Lambda
    return world


def test_a_detached_running_node_is_capacity_and_its_replacement_is_attributed() -> None:
    world = _asg_world(6)
    meter = Meter("t", sample_seconds=10.0, causes=Causes(world))
    world.run(1000.0)
    victim = sorted(i.instance_id for i in world.cloud.groups["nodes-us-east-1a"].active())[0]
    with world.kernel.installed():
        world.cloud.detach(victim, decrement=False)
    meter.sample(world, 1000.0)
    assert meter.below["nodes-us-east-1a"] == 0.0  # the detached node still runs, Ready
    assert meter.below_member["nodes-us-east-1a"] == 10.0 / 60  # the first version's count lost it
    assert meter.why == {DETACHED: 10.0 / 60}
    world.run(1011.0)  # the group's next reconcile (every 10 s) launched the replacement
    assert meter.causes is not None
    replacement = [c for i, c in meter.causes.launched.items() if i != victim]
    assert [cause for cause, _at in replacement] == [LOSS_DETACH]


def test_the_asg_loses_each_reclaim_until_its_replacement_is_ready_and_early_replacement_does_not() -> None:
    schedule = tuple(
        Fault(at, "spot", 0.0, (("az", az), ("count", 1)))
        for at, az in ((1200.0, "us-east-1a"), (2400.0, "us-east-1b"), (3000.0, "us-east-1c"))
    )
    days = 4200.0 / 86400
    asg = run_policy("asg", 3, 12, days, schedule, sample=5.0)
    product = run_policy("product", 3, 12, days, schedule, sample=5.0)
    assert "violation" not in product.counters
    lost = sum(asg.below.values())
    # each reclaim: the group's next reconcile (<= 10 s), a boot (30-60 s) and the kubelet's registration (30-60 s)
    assert 3 * 55 / 60 <= lost <= 3 * 135 / 60
    assert set(asg.why) <= {
        "reclaimed, awaiting the group's health check",
        f"{LOSS_RECLAIM}: booting",
        f"{LOSS_RECLAIM}: node not registered yet",
    }
    assert asg.counters["killed_by_reclaim"] > 0 and product.counters["killed_by_reclaim"] == 0
    # the product detached each doomed instance at the warning: its replacement was launched two minutes earlier
    assert sum(product.below.values()) <= lost / 5
    assert product.why.get(DETACHED, 0.0) > 0


def test_a_reclaim_during_an_outage_is_compensated_in_the_pool_and_the_asg_run_is_not_cut_short() -> None:
    days = 6 * 3600.0 / 86400
    schedule = outage_burst(1, 30, days)  # us-east-1a: no launch from 2 h to 5 h; 2 reclaimed from 2.5 h
    asg = run_policy("asg", 1, 30, days, schedule)
    product = run_policy("product", 1, 30, days, schedule)
    assert "violation" not in asg.counters and "violation" not in product.counters
    # the ASG alone replaces both only once the outage is over: more than 2 x 2h20 (its run is not ended by the
    # product's liveness invariant, "every shortfall covered within a bound")
    assert asg.below_pool["nodes"] >= 2 * 140
    assert asg.below["nodes-us-east-1a"] == asg.below_pool["nodes"]
    # the product's replenisher launches them in a sibling AZ: the pool is whole, the AZ is not
    assert product.below_pool["nodes"] <= asg.below_pool["nodes"] / 10
    assert product.below["nodes-us-east-1a"] >= 2 * 140
