"""A burst of retryable errors during a drain, at the level of the whole simulated world (issue 11: "nothing is lost
to transient faults"): a Spot warning reaches the real interruption Lambda through the simulated EventBridge, its
drain command reaches the real agent through the simulated SQS queue (with its dead-letter queue, maxReceiveCount 3),
and while the agent drains, most DynamoDB and Kubernetes calls fail with retryable errors for 30 s. The command
still finishes ``succeeded`` before the instance is reclaimed and nothing is dead-lettered."""

from __future__ import annotations

import pytest

from sim.faults import FaultWindow
from sim.world import AZS, Shape, World


@pytest.mark.xfail(
    strict=True,
    reason="open finding (2026-12-02): with every Kubernetes call refused for the drain's first 20 s and DynamoDB "
    "throttling 60 % of calls, the agent's handback of the Spot command is itself throttled and the message comes "
    "back only when the command's heartbeat is stale (minutes): the command is still running, its node not even "
    "cordoned, at 115 s; a handback of a deadline-bound command must come back within its deadline",
)
def test_a_burst_of_retryable_errors_during_a_drain_ends_succeeded_and_dead_letters_nothing() -> None:
    world = World.build(3, Shape(nodes=6, masters=1, pods_per_node=3, replicas=3))
    world.run(300.0)  # steady: pods Ready, membership reported
    instance = world.pick_instance(AZS[0])
    assert instance is not None
    start = world.kernel.t
    with world.kernel.installed():
        assert world.aws.interrupt(instance)
    # from the moment the agent receives the command, 2 s after the warning (the Lambda's own calls, at 1.8 s, are
    # left alone: a refused one fails the invocation, which EventBridge retries a minute later): DynamoDB refuses
    # most calls for 30 s, Kubernetes every call for 20 s (the node's reads, the cordon, the evictions)
    world.add_fault_window(FaultWindow("dynamodb", "", start + 2, start + 32, "ThrottlingException", probability=0.6))
    world.add_fault_window(FaultWindow("kube", "", start + 2, start + 22, "InternalError", probability=1.0))
    world.run(start + 115.0)  # before the reclaim at 120 s

    commands = [i for i in world.view.table_items() if str(i["sk"]).startswith("CMD#spot-")]
    assert [c["instance_id"] for c in commands] == [instance]
    (command,) = commands
    assert command["status"] == "succeeded", command.get("result")
    assert world.aws.queue.dead_letters == []
    injected = world.faults.injected
    assert sum(n for key, n in injected.items() if key.startswith("dynamodb:")) > 0, injected
    assert sum(n for key, n in injected.items() if key.startswith("kube:")) > 0, injected
