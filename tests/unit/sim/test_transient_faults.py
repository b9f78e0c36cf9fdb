"""A burst of retryable errors during a drain, at the level of the whole simulated world (issue 11: "nothing is lost
to transient faults"): a Spot warning reaches the real interruption Lambda through the simulated EventBridge, its
drain command reaches the real agent through the simulated SQS queue (with its dead-letter queue, maxReceiveCount 3),
and while the agent drains, most DynamoDB and Kubernetes calls fail with retryable errors for 30 s. The command
still finishes ``succeeded`` before the instance is reclaimed and nothing is dead-lettered."""

from __future__ import annotations

import pytest

from sim.faults import FaultWindow
from sim.world import AZS, Shape, World

# (DynamoDB window's start after the warning, Kubernetes window's length, its probability): the agent receives the
# command at 1.8 s, when the Lambda sends it (a long poll; at 2 s under the former 2 s poll); the first is the schedule
# that found the bug (2026-12-02: a throttled handback left the command running under its worker, its node
# uncordoned, until its heartbeat went stale, minutes past the Spot deadline)
WINDOWS = [(2.0, 20.0, 1.0), (3.0, 20.0, 1.0), (25.0, 20.0, 1.0), (2.0, 60.0, 0.6), (10.0, 60.0, 0.6)]


@pytest.mark.parametrize(("dynamo_from", "kube_for", "kube_p"), WINDOWS)
def test_a_burst_of_retryable_errors_during_a_drain_ends_succeeded_and_dead_letters_nothing(
    dynamo_from: float, kube_for: float, kube_p: float
) -> None:
    world = World.build(3, Shape(nodes=6, masters=1, pods_per_node=3, replicas=3))
    world.run(300.0)  # steady: pods Ready, membership reported
    instance = world.pick_instance(AZS[0])
    assert instance is not None
    start = world.kernel.t
    with world.kernel.installed():
        assert world.aws.interrupt(instance)
    # around the moment the agent receives the command, 1.8 s after the warning as the Lambda sends it (the Lambda's
    # own DynamoDB calls, at 1.8 s, are left alone: a refused one fails the invocation, which EventBridge retries a
    # minute later; it makes no Kubernetes call): DynamoDB refuses most calls for 30 s, Kubernetes every call (or
    # most) for a while from 1 s (the node's reads, the cordon, the evictions)
    dynamo = FaultWindow("dynamodb", "", start + dynamo_from, start + dynamo_from + 30, "ThrottlingException", 0.6)
    world.add_fault_window(dynamo)
    world.add_fault_window(
        FaultWindow("kube", "", start + 1, start + 1 + kube_for, "InternalError", probability=kube_p)
    )
    world.run(start + 115.0)  # before the reclaim at 120 s

    commands = [i for i in world.view.table_items() if str(i["sk"]).startswith("CMD#spot-")]
    assert [c["instance_id"] for c in commands] == [instance]
    (command,) = commands
    assert command["status"] == "succeeded", command.get("result")
    assert world.aws.queue.dead_letters == []
    injected = world.faults.injected
    assert sum(n for key, n in injected.items() if key.startswith("dynamodb:")) > 0, injected
    assert sum(n for key, n in injected.items() if key.startswith("kube:")) > 0, injected
