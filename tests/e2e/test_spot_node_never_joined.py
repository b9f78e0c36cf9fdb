"""End to end: a Spot warning for an instance whose node never joined the cluster.

The Lambda still sends the command (membership may lag, so only the agent can say there is no node); the agent finds
no node with the instance's providerID, waits ``NODE_REGISTRATION_WAIT_SECONDS`` for one to register (an instance
warned seconds after its launch registers a minute later: ``agent.consumer.steps.NodeWait``; 5 s here) and finishes
the command ``skipped`` with the reason; the early replacement still happens, since the ASG needs the capacity either
way. Nothing crashes and nothing retries.
"""

from __future__ import annotations

import contextlib
import io
import time
from datetime import UTC, datetime

import boto3

from adapters.dynamo.store import Store
from core.model import parse_provider_id
from core.settings import InterruptionSettings
from lambdas.interruption.handler import Deps, handle
from localworld.aws import aws_env
from localworld.lambda_context import INTERRUPTION_FUNCTION, LocalLambdaContext
from scenarios.spot import spot_warning


def test_a_node_that_never_joined_is_skipped_and_still_replaced(world, tmp_path, monkeypatch):
    info = world.setup_cluster(nodes_per_az=1)
    node = next(n for n in world.core.list_node().items if "node-role.kubernetes.io/node" in n.metadata.labels)
    instance_id = parse_provider_id(node.spec.provider_id)[1]
    # The instance runs, but its kubelet never registers: no Node carries its providerID.
    world.simulator.never_join(instance_id)
    world.core.delete_node(node.metadata.name)
    world.simulator.wait_for(lambda: world.simulator.node_for_instance(instance_id) is None, 10, "node gone")

    autoscaling = world.client("autoscaling")
    asg_name = autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])["AutoScalingInstances"][0][
        "AutoScalingGroupName"
    ]
    desired = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0][
        "DesiredCapacity"
    ]

    agent = world.spawn("agent", {"NODE_REGISTRATION_WAIT_SECONDS": "5"}, log_path=tmp_path / "agent.log")
    for key, value in {
        **aws_env(world.moto.endpoint_url, world.region),
        "POWERTOOLS_SERVICE_NAME": "interruption",
        "POWERTOOLS_METRICS_NAMESPACE": "NodeManager",
    }.items():
        monkeypatch.setenv(key, value)
    deps = Deps.from_session(InterruptionSettings.from_env(info.env()), boto3.session.Session())
    deps.register_context(LocalLambdaContext(30, INTERRUPTION_FUNCTION))
    event = spot_warning(instance_id, world.region, datetime.now(UTC))
    with contextlib.redirect_stdout(io.StringIO()):
        response = handle(event, deps)
    assert response["status"] == "acted"

    store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
    deadline = time.monotonic() + 30
    while (item := store.get_command(f"spot-{event['id']}")) is None or item["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, f"command not finished: {item}"
        time.sleep(0.05)
    assert item["status"] == "skipped", item
    assert instance_id in str(item["result"]), item["result"]
    assert "none registered within 5 s" in item["result"]["message"], item["result"]

    # Early replacement happened anyway: detached, desired capacity kept, a new instance in its place.
    asg = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0]
    members = {i["InstanceId"] for i in asg["Instances"]}
    assert instance_id not in members
    assert asg["DesiredCapacity"] == desired == len(members)
    assert agent.alive()
