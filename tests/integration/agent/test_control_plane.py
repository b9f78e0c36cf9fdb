"""Control-plane drains on the local world (a real kube-apiserver with the agent's RBAC, moto server's SQS and
DynamoDB): the agent's consumer as ``agent.app.build_agent`` wires it, fed as the Lambdas feed it (a ``CMD#``
record, a ``HOOK#`` record, an SQS message). Auto Scaling's lifecycle calls are not in moto: a recorder answers them.

A master whose termination lifecycle hook asks for its drain while another master's drain holds the cluster's one
control-plane slot must not be cordoned, failed and CONTINUEd (Auto Scaling would terminate it undrained): it waits
uncordoned, its action heartbeated, and is drained, then completed, once the slot is free.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from adapters.dynamo.hooks import get_hook, record_hook
from adapters.dynamo.store import Store
from agent.app import Agent, build_agent
from core.lifecycle import LifecycleAction
from core.model import Command, CommandKind, parse_provider_id, utcnow
from core.settings import AgentSettings
from localworld.cluster import cluster_instances
from localworld.rest import q
from localworld.simulator.objects import is_live, pod_ready
from localworld.simulator.replicaset import PREFER_NODE_ANNOTATION
from localworld.workloads import block_with_pdb, create_replicaset, ensure_namespace, pod_template
from localworld.world import LocalWorld
from tests.integration.agent.harness import AGENT_ENV, wait_for

pytestmark = pytest.mark.world

ASG_TAG = "aws:autoscaling:groupName"


class LifecycleCalls:
    """Auto Scaling's lifecycle-action calls, recorded and accepted (``adapters.aws.ports.LifecycleActions``)."""

    def __init__(self) -> None:
        self.heartbeats: list[str] = []
        self.completed: list[str] = []

    def record_heartbeat(self, action: LifecycleAction) -> bool:
        self.heartbeats.append(action.instance_id)
        return True

    def complete_lifecycle_action(self, action: LifecycleAction) -> bool:
        self.completed.append(action.instance_id)
        return True


@dataclass
class Master:
    node: str
    instance_id: str
    asg: str


@dataclass
class Running:
    world: LocalWorld
    agent: Agent
    store: Store
    calls: LifecycleCalls
    queue_url: str

    def send(self, command: Command) -> None:
        self.store.record_command(command, ttl_seconds=3600)
        self.world.client("sqs").send_message(QueueUrl=self.queue_url, MessageBody=command.model_dump_json())

    def status(self, command_id: str) -> str | None:
        item = self.store.get_command(command_id)
        return None if item is None else str(item["status"])

    def cordoned(self, node: str) -> bool:
        return bool(self.world.core.read_node(node).spec.unschedulable)


def masters(world: LocalWorld, cluster: str) -> list[Master]:
    groups = {
        inst["InstanceId"]: next(t["Value"] for t in inst.get("Tags", []) if t["Key"] == ASG_TAG)
        for inst in cluster_instances(world.client("ec2"), cluster)
    }
    found = []
    for node in world.core.list_node().items:
        if "node-role.kubernetes.io/control-plane" in (node.metadata.labels or {}):
            parsed = parse_provider_id(node.spec.provider_id)
            assert parsed is not None
            found.append(Master(node.metadata.name, parsed[1], groups[parsed[1]]))
    return sorted(found, key=lambda m: m.node)


def drain(command_id: str, master: Master, reason: str, seconds: float = 120) -> Command:
    return Command(
        command_id=command_id,
        cluster="demo.k8s.local",
        kind=CommandKind.DRAIN,
        instance_id=master.instance_id,
        node_name=master.node,
        reason=reason,
        deadline=utcnow() + timedelta(seconds=seconds),
    )


def hold_a_pod_on(world: LocalWorld, node: str) -> str:
    """One pod on ``node`` (a master: it tolerates the taint) that a PodDisruptionBudget allows no eviction of."""
    ensure_namespace(world.rest, "bench")
    app = "held-on-master"
    create_replicaset(
        world.rest,
        "bench",
        app,
        1,
        pod_template(app, tolerate_all=True),
        annotations={PREFER_NODE_ANNOTATION: node},
    )

    def running() -> bool:
        pods = world.rest.get(f"/api/v1/namespaces/{q('bench')}/pods", labelSelector=f"app={app}")["items"]
        return any(p["spec"].get("nodeName") == node and is_live(p) and pod_ready(p) for p in pods)

    wait_for(running, 30, "the held pod to run on the master")
    return block_with_pdb(world.rest, "bench", app)


@pytest.fixture
def running(world: LocalWorld) -> Iterator[Running]:
    info = world.setup_cluster(nodes_per_az=1)
    env = world.env(
        {
            **AGENT_ENV,
            "LEADER_ELECTION": "false",
            "AGENT_CLOUDWATCH_METRICS": "false",
            "LIFECYCLE_HEARTBEAT_SECONDS": "5",
            "MAX_CONTROL_PLANE_DRAINS": "1",
        }
    )
    agent = build_agent(AgentSettings.from_env(env), env, session=world.session)
    hooks: Any = agent.consumer.worker.hooks
    calls = LifecycleCalls()
    hooks.autoscaling = calls  # the agent's own HookFinisher, its Auto Scaling calls recorded
    store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
    stop = threading.Event()
    thread = threading.Thread(target=agent.consumer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield Running(world, agent, store, calls, info.queue_url)
    finally:
        stop.set()
        thread.join(15)
        agent.consumer.shutdown(0)


def test_a_master_hook_drain_waiting_for_the_slot_is_left_uncordoned_heartbeated_then_drained_and_completed(
    running: Running,
) -> None:
    first, second = masters(running.world, "demo.k8s.local")[:2]
    pdb = hold_a_pod_on(running.world, first.node)
    step = drain("refresh-r1-0", first, "refresh r1 step 0")  # a refresher master step: it holds the slot
    running.send(step)
    wait_for(lambda: running.cordoned(first.node), 20, "the first master to be cordoned")
    assert running.status(step.command_id) == "running"

    action = LifecycleAction(
        instance_id=second.instance_id,
        asg_name=second.asg,
        hook_name="node-manager-drain",
        token="87654321-4321-4321-4321-210987654321",
        event_id="ev-hook-1",
    )
    record_hook(running.store, action, ttl_seconds=3600)  # what the interruption Lambda records, then it sends:
    hooked = drain("lifecycle-ev-hook-1", second, f"asg-lifecycle:{second.asg}")
    running.send(hooked)
    wait_for(lambda: running.status(hooked.command_id) != "queued", 20, "the agent to take the hook's drain")
    time.sleep(2.0)  # before: cordoned at once, failed by the cap and CONTINUEd within a second
    assert not running.cordoned(second.node)  # only one master out of service at a time
    assert running.calls.completed == []  # CONTINUE now would terminate a master that was not drained
    assert running.status(hooked.command_id) == "running"  # waiting, not failed
    wait_for(lambda: second.instance_id in running.calls.heartbeats, 20, "a lifecycle heartbeat while it waits")
    assert not running.cordoned(second.node) and running.calls.completed == []
    hook = get_hook(running.store, second.instance_id)
    assert hook is not None and hook["state"] == "pending"

    running.world.rest.delete(f"/apis/policy/v1beta1/namespaces/bench/poddisruptionbudgets/{pdb}")
    wait_for(lambda: running.status(step.command_id) == "succeeded", 30, "the first master's drain")
    wait_for(lambda: running.status(hooked.command_id) == "succeeded", 30, "the second master's drain")
    assert running.cordoned(second.node)
    wait_for(lambda: running.calls.completed == [second.instance_id], 10, "the action completed after the drain")
    time.sleep(0.5)
    assert list(running.store.query_prefix("CPDRAIN#", consistent=True)) == []  # the slot given back


def test_a_master_drain_for_another_reason_is_refused_untouched_and_its_hook_is_not_completed(
    running: Running,
) -> None:
    target = masters(running.world, "demo.k8s.local")[0]
    action = LifecycleAction(
        instance_id=target.instance_id,
        asg_name=target.asg,
        hook_name="node-manager-drain",
        token="87654321-4321-4321-4321-210987654321",
        event_id="ev-hook-2",
    )
    record_hook(running.store, action, ttl_seconds=3600)
    rebalance = drain("rebalance-1", target, "rebalance-recommendation")
    running.send(rebalance)
    wait_for(lambda: running.status(rebalance.command_id) == "failed", 20, "the refusal")
    item = running.store.get_command(rebalance.command_id)
    assert item is not None and item["result"]["control_plane_refused"] is True
    assert not running.cordoned(target.node)
    time.sleep(1.0)
    assert running.calls.completed == []
