"""The simulated account's physics: launches toward desired, capacity outages, Spot interruptions, lifecycle hooks,
kOps resets, and events that the product's own parsers accept."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from lambdas.events.dispatch import parse_event
from lambdas.events.event import EventKind
from sim.aws import SimAws, as_ports
from sim.aws_state import Instance, TerminationHook
from sim.faults import Faults
from sim.kernel import Kernel

CLUSTER = "demo"
HOOK = TerminationHook("node-manager-drain", heartbeat_timeout=300)


class World:
    def __init__(self, seed: int = 1, hooks: tuple[TerminationHook, ...] = ()) -> None:
        self.kernel = Kernel(seed)
        self.events: list[dict[str, Any]] = []
        self.running: list[str] = []
        self.terminated: list[str] = []
        self.aws = SimAws(
            self.kernel,
            Faults(self.kernel),
            self.events.append,
            on_running=lambda i: self.running.append(i.instance_id),
            on_terminated=lambda i: self.terminated.append(i.instance_id),
        )
        self.spot = self.aws.cloud.add_group(
            "nodes-us-east-1a.demo",
            cluster=CLUSTER,
            instance_group="nodes-us-east-1a",
            zones=("us-east-1a",),
            min_size=1,
            max_size=10,
            desired=3,
            hooks=hooks,
        )
        self.aws.start()

    def types(self) -> list[str]:
        return [e["detail-type"] for e in self.events]

    def members(self) -> list[Instance]:
        return list(self.spot.members.values())


def test_instances_of_a_prelaunched_group_run_and_are_in_service():
    world = World()
    assert [(i.state, i.lifecycle_state, i.lifecycle) for i in world.members()] == [
        ("running", "InService", "spot")
    ] * 3
    assert world.running == [i.instance_id for i in world.members()]
    assert world.events == []


def test_a_raised_desired_capacity_launches_pending_then_running():
    world = World()
    world.aws.autoscaling.set_capacity(world.spot.name, 5, None)
    world.kernel.run(10)
    pending = [i for i in world.members() if i.state == "pending"]
    assert len(pending) == 2 and {i.lifecycle_state for i in pending} == {"Pending"}
    world.kernel.run(80)
    assert Counter(i.lifecycle_state for i in world.members()) == {"InService": 5}
    assert world.types().count("EC2 Instance Launch Successful") == 2
    assert len(world.running) == 5


def test_a_capacity_outage_fails_launches_with_backoff_then_recovers():
    world = World()
    world.aws.capacity_outage(("m5.large", "us-east-1a"), 0, 600)
    world.aws.autoscaling.set_capacity(world.spot.name, 4, None)
    world.kernel.run(590)
    failures = [e for e in world.events if e["detail-type"] == "EC2 Instance Launch Unsuccessful"]
    times = [datetime.fromisoformat(e["time"]).timestamp() for e in failures]
    gaps = [b - a for a, b in pairwise(times)]
    assert gaps == sorted(gaps) and gaps[0] >= 10 and len(failures) < 10  # backing off, not every 10 s
    assert failures[0]["detail"]["StatusMessage"] == "There is no Spot capacity available that matches your request."
    assert len(world.members()) == 3
    world.kernel.run(1000)
    assert len([i for i in world.members() if i.state == "running"]) == 4


def test_a_multi_az_group_launches_in_an_az_with_capacity():
    world = World()
    group = world.aws.cloud.add_group(
        "nodes.demo",
        cluster=CLUSTER,
        instance_group="nodes",
        zones=("us-east-1a", "us-east-1b"),
        min_size=0,
        max_size=10,
        desired=2,
    )
    assert sorted(i.zone for i in group.members.values()) == ["us-east-1a", "us-east-1b"]
    world.aws.capacity_outage("us-east-1a", 0, 3600)
    world.aws.autoscaling.set_capacity("nodes.demo", 4, None)
    world.kernel.run(100)
    assert Counter(i.zone for i in group.members.values()) == {"us-east-1a": 1, "us-east-1b": 3}
    assert "EC2 Instance Launch Unsuccessful" not in world.types()


def test_a_spot_interruption_warns_terminates_after_two_minutes_and_is_replaced():
    world = World()
    victim = world.members()[0].instance_id
    assert world.aws.interrupt(victim) is True
    assert world.aws.interrupt(victim) is False  # announced already
    world.kernel.run(119)
    assert world.terminated == []
    world.kernel.run(121)
    assert world.terminated == [victim]
    world.kernel.run(300)
    assert victim not in world.spot.members
    assert len([i for i in world.members() if i.state == "running"]) == 3
    warning = world.events[0]
    assert warning["detail-type"] == "EC2 Spot Instance Interruption Warning"
    assert warning["resources"] == [f"arn:aws:ec2:us-east-1a:instance/{victim}"]


def test_an_interruption_of_a_group_with_a_hook_waits_on_the_hook_after_the_instance_is_gone():
    world = World(hooks=(HOOK,))
    victim = world.members()[0].instance_id
    world.aws.interrupt(victim)
    world.kernel.run(200)
    assert world.aws.autoscaling.membership(victim).lifecycle_state == "Terminating:Wait"  # until the hook ends
    assert world.aws.ec2.describe_instance(victim).state == "terminated"  # known for an hour
    assert len([i for i in world.members() if i.lifecycle_state == "InService"]) == 3  # replaced meanwhile
    world.kernel.run(600)
    assert world.aws.autoscaling.membership(victim) is None


def test_a_rebalance_recommendation_is_only_a_signal():
    world = World()
    target = world.members()[1].instance_id
    assert world.aws.rebalance(target) is True
    world.kernel.run(3600)
    assert world.types() == ["EC2 Instance Rebalance Recommendation"]
    assert world.members()[1].state == "running"


def test_a_scale_in_terminates_through_the_hook():
    world = World(hooks=(HOOK,))
    world.aws.autoscaling.set_capacity(world.spot.name, 2, None)
    world.kernel.run(10)
    [waiting] = [i for i in world.members() if i.lifecycle_state == "Terminating:Wait"]
    assert world.types() == ["EC2 Instance-terminate Lifecycle Action"]
    assert world.events[0]["detail"]["EC2InstanceId"] == waiting.instance_id
    world.kernel.run(400)  # heartbeat timeout, default result
    assert waiting.instance_id not in world.spot.members and waiting.state == "terminated"


def test_a_kops_reset_writes_the_sizes_back_and_the_group_follows():
    world = World()
    world.aws.kops_reset(world.spot.name, 1, 3, 1)
    world.kernel.run(100)
    assert (world.spot.min_size, world.spot.max_size, world.spot.desired) == (1, 3, 1)
    assert len(world.members()) == 1 and len(world.terminated) == 2


def test_a_new_template_version_is_what_new_instances_launch_with_and_what_scale_in_takes_first():
    world = World()
    world.aws.cloud.new_template_version(world.spot.template.template_id)
    world.aws.autoscaling.set_capacity(world.spot.name, 4, None)
    world.kernel.run(100)
    assert sorted(i.template_version for i in world.members()) == ["1", "1", "1", "2"]
    world.aws.autoscaling.set_capacity(world.spot.name, 1, None)
    world.kernel.run(200)
    assert [i.template_version for i in world.members()] == ["2"]


def test_every_event_is_accepted_by_the_products_parsers():
    world = World(hooks=(HOOK,))
    first, second, third = (i.instance_id for i in world.members())
    world.aws.interrupt(first)
    world.aws.rebalance(second)
    world.aws.autoscaling.terminate_in_group(third, decrement=False)
    world.aws.capacity_outage("us-east-1a", 0, 300)
    world.kernel.run(1200)
    kinds = Counter(
        parse_event(event, set(EventKind), datetime(2026, 1, 5, 1, tzinfo=UTC)).kind for event in world.events
    )
    assert set(kinds) == {
        EventKind.SPOT_INTERRUPTION,
        EventKind.REBALANCE_RECOMMENDATION,
        EventKind.TERMINATE_LIFECYCLE_ACTION,
        EventKind.INSTANCE_STATE_CHANGE,
        EventKind.LAUNCH_SUCCEEDED,
        EventKind.LAUNCH_FAILED,
    }
    assert len({e["id"] for e in world.events}) == len(world.events)


def test_one_seed_one_run():
    def run(seed: int) -> list[tuple[str, str, str]]:
        world = World(seed, hooks=(HOOK,))
        rng = world.kernel.stream("test:chaos")

        def chaos() -> None:
            live = sorted(i.instance_id for i in world.members() if i.state == "running")
            if live:
                world.aws.interrupt(rng.choice(live))

        world.kernel.every(300, "test:chaos", chaos)
        world.kernel.run(7200)
        return [(e["time"], e["detail-type"], e["id"]) for e in world.events]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_the_group_description_follows_every_change():
    world = World(hooks=(HOOK,))
    name = world.spot.name

    def states() -> list[str]:
        group = world.aws.autoscaling.describe_group(name)
        assert group is not None
        return sorted(i["LifecycleState"] for i in group["Instances"])

    assert states() == ["InService"] * 3
    first = world.members()[0].instance_id
    world.aws.autoscaling.terminate_in_group(first, decrement=True)
    assert states() == ["InService", "InService", "Terminating:Wait"]
    assert world.aws.autoscaling.describe_group(name)["DesiredCapacity"] == 2
    world.aws.autoscaling.set_capacity(name, 3, None)
    world.kernel.run(10)
    assert states() == ["InService", "InService", "Pending", "Terminating:Wait"]
    world.kernel.run(400)
    assert states() == ["InService"] * 3


def test_a_reclaim_without_a_notice():
    world = World()
    victim = world.members()[0].instance_id
    assert world.aws.interrupt(victim, warn=False) is True
    world.kernel.run(130)
    assert world.terminated == [victim]
    assert "EC2 Spot Instance Interruption Warning" not in world.types()


def test_only_live_spot_instances_are_interrupted_or_warned():
    world = World()
    on_demand = world.aws.cloud.add_group(
        "masters.demo",
        cluster=CLUSTER,
        instance_group="master-us-east-1a",
        zones=("us-east-1a",),
        min_size=1,
        max_size=1,
        desired=1,
        spot=False,
        control_plane=True,
    )
    [master] = list(on_demand.members)
    assert world.aws.interrupt(master) is False and world.aws.rebalance(master) is False
    assert world.aws.interrupt("i-0123456789abcdef0") is False
    assert world.aws.cloud.instances[master].tags["k8s.io/role/control-plane"] == "1"
    assert world.events == []


def test_prelaunched_instances_can_be_of_different_ages():
    world = World()
    group = world.aws.cloud.add_group(
        "old.demo",
        cluster=CLUSTER,
        instance_group="old",
        zones=("us-east-1a",),
        min_size=0,
        max_size=5,
        desired=5,
        prelaunch_age=7 * 86400,
    )
    ages = sorted((world.kernel.now() - i.launch_time).total_seconds() for i in group.members.values())
    assert len(set(ages)) == 5 and ages[0] >= 0 and ages[-1] <= 7 * 86400


def test_instance_seconds_and_detached_instances():
    world = World()
    assert world.aws.instance_seconds() == 0
    world.kernel.run(100)
    assert world.aws.instance_seconds() == 300
    first = world.members()[0].instance_id
    world.aws.autoscaling.detach_instance(first, world.spot.name)
    assert [i.instance_id for i in world.aws.detached_alive()] == [first]
    world.aws.ec2.terminate([first])
    assert world.aws.detached_alive() == []
    world.kernel.run(200)  # the replacement launched at 110 runs too
    assert 3 * 200 + 100 - 110 <= world.aws.instance_seconds() <= 3 * 200 + 100


def test_simaws_is_the_ports():
    world = World()
    aws, queue = as_ports(world.aws)
    assert aws.queue is queue is world.aws.queue
