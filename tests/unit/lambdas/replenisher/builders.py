"""World builders shared by the replenisher's decider tests: groups, instance ids, a launch failure, Ready nodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.kops import ManagedGroup, Role
from core.model import NodeRecord
from core.settings import ReplenisherSettings
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.world import Group, Instance

EVENTS = Path(__file__).resolve().parents[3] / "events"
T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
SETTINGS = ReplenisherSettings(cluster_name="c.k8s.local", table_name="t", queue_url="q")


def group(
    name: str,
    az: str,
    desired: int,
    ids: list[str],
    role: Role = Role.NODE,
    max_size: int = 6,
    pool: str | None = "nodes",
) -> Group:
    info = ManagedGroup(
        name=name, cluster="c.k8s.local", role=role, instance_group=name, pool=pool, availability_zones=(az,)
    )
    return Group(
        info=info,
        desired=desired,
        min_size=0,
        max_size=max_size,
        instances=tuple(Instance(i, az, "InService", launch_time=T0 - timedelta(hours=1)) for i in ids),
    )


def ids(prefix: str, n: int) -> list[str]:
    return [f"i-{prefix}{k:07x}" for k in range(n)]


def failure(asg: str, at: datetime = T0) -> Event:
    return Event(
        kind=EventKind.LAUNCH_FAILED,
        event_id="e1",
        event_time=at,
        asg_name=asg,
        source="aws.autoscaling",
        detail_type="EC2 Instance Launch Unsuccessful",
    )


def nodes_for(*groups: Group) -> dict[str, NodeRecord]:
    return {
        i.instance_id: NodeRecord(instance_id=i.instance_id, node_name=i.instance_id, ready=True, reported_at=T0)
        for g in groups
        for i in g.instances
    }
