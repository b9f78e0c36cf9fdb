"""A termination lifecycle action of the consumer world's instance (``HOOK``, and the parameters Auto Scaling's
CompleteLifecycleAction and RecordLifecycleActionHeartbeat take for it, ``HOOK_PARAMS``) and a command consumer with a
hook finisher on a given Auto Scaling client (``consumer``): shared by the hook and partition tests."""

from __future__ import annotations

from typing import Any

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.sqs import CommandQueue
from agent.consumer.config import ConsumerConfig
from agent.consumer.loop import CommandConsumer
from agent.hooks import HookFinisher
from agent.metrics import AgentMetrics
from agent.report import Reporter
from core.lifecycle import LifecycleAction
from tests.unit.agent.consumer_world import INSTANCE, ScriptedEngine, World

HOOK = LifecycleAction(
    instance_id=INSTANCE,
    asg_name="nodes-us-east-1a.demo.k8s.local",
    hook_name="node-manager-drain",
    token="3f2a9c1e-0000-4000-8000-000000000001",
    event_id="ev-1",
)
HOOK_PARAMS = {
    "LifecycleHookName": HOOK.hook_name,
    "AutoScalingGroupName": HOOK.asg_name,
    "LifecycleActionToken": HOOK.token,
    "InstanceId": INSTANCE,
}


def consumer(
    world: World, engine: ScriptedEngine, autoscaling: Any, metrics: AgentMetrics | None = None, **config: Any
) -> CommandConsumer:
    reporter = Reporter(world.store, world.events, world.info.event_bus_name)
    cfg = ConsumerConfig(
        **{
            "cluster": "demo.k8s.local",
            "queue_url": world.info.queue_url,
            "worker_id": "agent-a:1",
            "wait_seconds": 0,
            **config,
        }
    )
    hooks = HookFinisher(world.store, AutoScaling(autoscaling), "agent-a:1", metrics)
    return CommandConsumer(
        CommandQueue(world.sqs, cfg.queue_url), world.store, engine, reporter, cfg, metrics=metrics, hooks=hooks
    )
