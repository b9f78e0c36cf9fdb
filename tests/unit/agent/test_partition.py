"""The agent's table calls address only its own partition (``CLUSTER#<cluster>#AGENT``, ``core.schema``), the one its
IAM role may write (``infra/state.py``, ``StateStore.grant_agent_access``; the policy itself is evaluated in
tests/infra/stack/test_agent_role.py): every request the agent's parts send to moto's DynamoDB is recorded as it goes
on the wire and its partition key values are checked: none names the cluster partition (``CLUSTER#<cluster>``), which
the role may neither read nor write (the lock's age, ``LockHeldSeconds``, is the replenisher's metric)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from botocore.stub import Stubber

from adapters.aws.autoscaling import AutoScaling
from adapters.dynamo.controlplane import ControlPlaneSlots
from adapters.dynamo.hooks import record_hook
from adapters.dynamo.lock import LeaseLock
from agent.asglookup import AsgLookup
from agent.cloudwatch import CloudWatchPublisher
from agent.cordons.releaser import CordonReleaser
from agent.membership import MembershipReporter
from core.model import Command, CommandStatus, DrainOptions, NodeRecord, utcnow
from core.schema import agent_partition_of, partition_of
from tests.unit.agent.consumer_world import CLUSTER, INSTANCE, ScriptedEngine, World, command
from tests.unit.agent.cordons.one_node import OneNode
from tests.unit.agent.hook_world import HOOK, HOOK_PARAMS, consumer
from tests.unit.agent.membership_world import MemoryNodes, node


class Wire:
    """Every DynamoDB request of a client: (operation, partition key values it names)."""

    def __init__(self, client: Any) -> None:
        self.calls: list[tuple[str, set[str], str]] = []
        client.meta.events.register("before-call.dynamodb", self.record)

    def record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or b"{}"
        request = json.loads(body.decode() if isinstance(body, bytes) else body)
        self.calls.append((model.name, partitions(request), json.dumps(request.get("Key", {}).get("sk", {}))))


def partitions(request: Any) -> set[str]:
    """The partition key values a request names: ``pk`` of every Key/Item, and every ``CLUSTER#`` value of its
    expressions (a Query's ``pk = :v``), anywhere in it (transactions included)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if (key == "pk" and isinstance(inner, dict) and "S" in inner) or (
                    isinstance(inner, dict) and isinstance(inner.get("S"), str) and inner["S"].startswith("CLUSTER#")
                ):
                    found.add(inner["S"])
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(request)
    return found


class Sink:
    def put(self, name: str, value: float, unit: str, dimensions: dict[str, str]) -> None:
        pass


@pytest.fixture
def stubbed(session: Any) -> Any:
    autoscaling = session.client("autoscaling")
    with Stubber(autoscaling) as stub:
        yield autoscaling, stub


def test_every_table_call_of_the_agent_names_only_its_partition(world: World, stubbed: Any) -> None:
    autoscaling, stub = stubbed
    # what the Lambdas write (their calls are not the agent's): a lifecycle action, two commands, the lock
    record_hook(world.store, HOOK, ttl_seconds=3600)
    world.send(command("lifecycle-ev-1"))
    rebalance = Command(
        command_id="rebalance-1",
        cluster=CLUSTER,
        kind="cordon",
        instance_id=INSTANCE,
        reason="rebalance-recommendation",
        deadline=utcnow() + timedelta(seconds=600),
        options=DrainOptions(uncordon_after_seconds=1),
    )
    world.store.record_command(rebalance, ttl_seconds=3600)
    LeaseLock(world.store).acquire("replenisher:r", "replenish", 60)
    wire = Wire(world.store.table.meta.client)

    # the consumer: read, start, heartbeat, finish, report the drain, complete the lifecycle action
    stub.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})
    consumer(world, ScriptedEngine(), autoscaling).handle(world.receive())
    assert world.item("lifecycle-ev-1")["status"] == "succeeded"
    # a command handed back, and the rebalance cordon finished, then given back by the releaser
    attempt = world.store.start_command(rebalance, "agent-a:1", stale_after_seconds=60, ttl_seconds=3600)
    world.store.heartbeat_command("rebalance-1", "agent-a:1", attempt, {"phase": "cordon"})
    world.store.release_command("rebalance-1", "agent-a:1", attempt)
    attempt = world.store.start_command(rebalance, "agent-a:1", stale_after_seconds=60, ttl_seconds=3600)
    result = {"status": "succeeded", "node_name": "n1", "cordoned_by_us": True}
    world.store.finish_command("rebalance-1", "agent-a:1", attempt, CommandStatus.SUCCEEDED, result)
    world.store.mark_reported("rebalance-1", CommandStatus.SUCCEEDED)
    later = CordonReleaser(world.store, OneNode(True, "rebalance-1"), 60, clock=lambda: utcnow() + timedelta(hours=1))
    assert later.check_once()["released"] == 1
    # membership: a resync writes the nodes and the mark, a node gone is forgotten
    world.store.put_node(NodeRecord(instance_id="i-0deadbeefdeadbeef", node_name="gone", reported_at=utcnow()), 600)
    nodes = MemoryNodes([node("n1", INSTANCE)])
    MembershipReporter(
        nodes, world.store, AsgLookup(AutoScaling(world.session.client("autoscaling"))), 60, 600
    ).resync()
    # a control-plane drain slot taken and given back
    slots = ControlPlaneSlots(world.store)
    assert slots.claim("refresh-1", INSTANCE, "agent-a:1", 1, utcnow() + timedelta(minutes=5), utcnow()).slot == 0
    slots.release("refresh-1")
    # the alarm metrics of a resync (no table call any more: the lock's age is the replenisher's)
    CloudWatchPublisher(Sink(), CLUSTER).membership_reported(1)

    agent_pk = agent_partition_of(CLUSTER)
    operations = {operation for operation, _, _ in wire.calls}
    assert {"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"} <= operations
    outside = [(op, pks, sk) for op, pks, sk in wire.calls if pks != {agent_pk}]
    assert outside == []
    assert all(partition_of(CLUSTER) not in pks for _, pks, _ in wire.calls)
