"""The local world's event pump and capacity-outage fault, against moto (no Kubernetes needed)."""

from __future__ import annotations

import json

from localworld.cluster import create_kops_cluster
from localworld.eventbus import LAUNCH_SUCCESSFUL, LAUNCH_UNSUCCESSFUL, EventBus
from localworld.faults import NO_SPOT_CAPACITY, CapacityOutage
from localworld.world import LocalWorld


def test_outage_fails_launches_and_recovery_announces_them(world: LocalWorld) -> None:
    info = create_kops_cluster(world.session, nodes_per_az=2)
    asg = info.worker_asgs["us-east-1a"]
    bus = EventBus(world.session)
    seen: list[dict] = []
    bus.subscribe("aws.autoscaling", LAUNCH_UNSUCCESSFUL, seen.append)
    bus.subscribe("aws.autoscaling", LAUNCH_SUCCESSFUL, seen.append)
    bus.pump()  # baseline: nothing for the instances already running
    assert seen == []

    outage = CapacityOutage(bus)
    outage.fail(asg)
    autoscaling = world.client("autoscaling")
    autoscaling.set_desired_capacity(AutoScalingGroupName=asg, DesiredCapacity=3)
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg])["AutoScalingGroups"][0]
    assert group["DesiredCapacity"] == 3 and len(group["Instances"]) == 2
    outage.retry()
    bus.pump()
    failures = [e for e in seen if e["detail-type"] == LAUNCH_UNSUCCESSFUL]
    assert len(failures) == 2
    assert failures[0]["detail"]["StatusCode"] == "Failed"
    assert failures[0]["detail"]["StatusMessage"] == NO_SPOT_CAPACITY
    assert failures[0]["detail"]["AutoScalingGroupName"] == asg
    assert failures[0]["detail"]["Details"]["Availability Zone"] == "us-east-1a"
    json.dumps(failures[0])

    new = outage.recover(asg)
    assert len(new) == 1
    bus.pump()
    launched = [e for e in seen if e["detail-type"] == LAUNCH_SUCCESSFUL]
    assert [e["detail"]["EC2InstanceId"] for e in launched] == new
    assert launched[0]["detail"]["StatusCode"] == "InProgress"
    assert outage.retry() == []  # recovered: no more failures


def test_handler_errors_are_kept_and_agent_events_are_pumped(world: LocalWorld) -> None:
    info = create_kops_cluster(world.session, nodes_per_az=1)
    bus = EventBus(world.session, observer_queue_url=info.observer_queue_url)

    def broken(event: dict) -> None:
        raise RuntimeError("boom")

    got: list[dict] = []
    bus.subscribe("node-manager.agent", "Node Drain Succeeded", broken)
    bus.subscribe("node-manager.agent", "Node Drain Succeeded", got.append)
    world.client("events").put_events(
        Entries=[
            {
                "Source": "node-manager.agent",
                "DetailType": "Node Drain Succeeded",
                "Detail": json.dumps({"command_id": "c1"}),
                "EventBusName": "default",
            }
        ]
    )
    deliveries = bus.pump()
    assert [d.error for d in deliveries] == ["RuntimeError: boom", None]
    assert got and got[0]["detail"]["command_id"] == "c1"
    assert bus.events(source="node-manager.agent")
