"""The interruption decision's inputs, built for its tests: settings, the two notices (a Spot warning, a rebalance
recommendation) for one instance, a kOps group, and the world AWS and the table describe (by default a running Spot
Instance InService in the cluster's worker group; ``member`` its membership record, ``recorded`` a command as the
table records it; ``command_item`` a ``CMD#`` item, ``active_run`` a run replacing instances)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, NODE_ROLE_TAG
from core.model import Command, NodeRecord
from core.runs import REBALANCE_TRIGGER, GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState
from core.settings import InterruptionSettings
from lambdas.events.event import Event, EventKind, InstanceAction
from lambdas.interruption.world import InstanceFacts, World

CLUSTER = "demo.k8s.local"
INSTANCE = "i-0a1b2c3d4e5f60718"
T0 = datetime(2024, 3, 5, 10, 15, 30, tzinfo=UTC)
NODES_ASG = "nodes-us-east-1a.demo.k8s.local"
MASTER_ASG = "master-us-east-1a.masters.demo.k8s.local"


def settings(**overrides) -> InterruptionSettings:
    base = {"cluster_name": CLUSTER, "table_name": "state", "queue_url": "https://sqs/q"}
    return InterruptionSettings(**{**base, **overrides})


def spot(action: InstanceAction = InstanceAction.TERMINATE, event_id: str = "ev-1") -> Event:
    return Event(
        kind=EventKind.SPOT_INTERRUPTION,
        event_id=event_id,
        event_time=T0,
        instance_id=INSTANCE,
        instance_action=action,
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
    )


def rebalance(event_id: str = "ev-2") -> Event:
    return Event(
        kind=EventKind.REBALANCE_RECOMMENDATION,
        event_id=event_id,
        event_time=T0,
        instance_id=INSTANCE,
        source="aws.ec2",
        detail_type="EC2 Instance Rebalance Recommendation",
    )


def asg(name: str = NODES_ASG, cluster: str | None = CLUSTER, role_tag: str | None = NODE_ROLE_TAG) -> dict:
    tags = [{"Key": INSTANCE_GROUP_TAG, "Value": name.split(".")[0]}]
    if cluster is not None:
        tags.append({"Key": CLUSTER_TAG, "Value": cluster})
    if role_tag is not None:
        tags.append({"Key": role_tag, "Value": "1"})
    return {
        "AutoScalingGroupName": name,
        "AvailabilityZones": ["us-east-1a"],
        "Tags": tags,
        "MinSize": 1,
        "MaxSize": 4,
        "DesiredCapacity": 2,
    }


def world(
    group: dict | None = None,
    state: str | None = "InService",
    known: bool = True,
    membership=None,
    command=None,
    detach=None,
    ec2_state: str | None = "running",
    market: str = "spot",
) -> World:
    """What AWS says: by default a running Spot Instance InService in the cluster's worker group."""
    group = asg() if group is None and state is not None else group
    return World(
        instance=InstanceFacts(
            INSTANCE, known=known, asg=group, lifecycle_state=state, state=ec2_state if known else None, market=market
        ),
        membership=membership,
        command=command,
        detach=detach,
    )


def member(reported_at: datetime, name: str = "ip-10-0-1-5.ec2.internal") -> NodeRecord:
    return NodeRecord(instance_id=INSTANCE, node_name=name, asg_name=NODES_ASG, ready=True, reported_at=reported_at)


def recorded(command: Command, status: str) -> dict:
    return {"command": command.model_dump(mode="json"), "status": status}


def kinds(plan) -> list[str]:
    return [type(a).__name__ for a in plan.actions]


NOW = T0 + timedelta(seconds=5)
OTHER = "i-0ffffffffffffffff"  # an instance of the worker group other than INSTANCE


def command_item(
    command_id: str, kind: str, status: str, *, quiet: int | None = 1800, reason: str = "", **extra: Any
) -> dict:
    """A ``CMD#`` item as the table holds it."""
    reason = reason or ("rebalance-recommendation" if command_id.startswith("rebalance") else "spot-interruption:x")
    options: dict[str, Any] = {"uncordon_after_seconds": quiet} if quiet is not None else {}
    return {
        "sk": f"CMD#{command_id}",
        "kind": kind,
        "instance_id": INSTANCE,
        "status": status,
        "created_at": (T0 - timedelta(minutes=5)).isoformat(),
        "command": {"command_id": command_id, "kind": kind, "reason": reason, "options": options},
        **extra,
    }


def active_run(
    trigger: str = REBALANCE_TRIGGER,
    status: RunStatus = RunStatus.RUNNING,
    steps: tuple[tuple[str, StepState], ...] = ((OTHER, StepState.SURGING),),
    group: str = NODES_ASG,
) -> Run:
    """A run of ``trigger`` in ``status`` replacing ``steps`` (instance, state) of ``group``."""
    return Run(
        run_id="20240305T101000Z-abcdef",
        cluster=CLUSTER,
        status=status,
        options=RunOptions(trigger=trigger),
        groups=[GroupSurge(name=group, role="node", min_size=1, original_desired=2, original_max=4)],
        steps=[
            RunStep(index=i, group=group, role="node", instance_id=iid, state=state)
            for i, (iid, state) in enumerate(steps)
        ],
        created_at=T0 - timedelta(minutes=5),
        updated_at=T0,
    )
