"""A burst of retryable errors during a drain, at the level of the whole simulated world (issue 11: "nothing is lost
to transient faults"): a Spot warning reaches the real interruption Lambda through the simulated EventBridge, its
drain command reaches the real agent through the simulated SQS queue (with its dead-letter queue, maxReceiveCount 3),
and while the agent drains, most DynamoDB and Kubernetes calls fail with retryable errors for 30 s. The command
still finishes ``succeeded`` before the instance is reclaimed and nothing is dead-lettered."""

from __future__ import annotations

from sim.faults import FaultWindow
from sim.world import AZS, Shape, World


def test_a_burst_of_retryable_errors_during_a_drain_ends_succeeded_and_dead_letters_nothing() -> None:
    world = World.build(3, Shape(nodes=6, masters=1, pods_per_node=3, replicas=3))
    world.run(300.0)  # steady: pods Ready, membership reported
    instance = world.pick_instance(AZS[0])
    assert instance is not None
    start = world.kernel.t
    with world.kernel.installed():
        assert world.aws.interrupt(instance)
    for service, code in (("dynamodb", "ThrottlingException"), ("kube", "InternalError")):
        world.add_fault_window(FaultWindow(service, "", start + 3, start + 33, code, probability=0.6))
    world.run(start + 115.0)  # before the reclaim at 120 s

    commands = [i for i in world.view.table_items() if str(i["sk"]).startswith("CMD#spot-")]
    assert [c["instance_id"] for c in commands] == [instance]
    (command,) = commands
    assert command["status"] == "succeeded", command.get("result")
    assert world.aws.queue.dead_letters == []
    injected = world.faults.injected
    assert sum(n for key, n in injected.items() if key.startswith("dynamodb:")) > 0, injected
    assert sum(n for key, n in injected.items() if key.startswith("kube:")) > 0, injected
