"""World builders shared by the replenisher's decider tests: groups, instance ids, a launch failure, Ready nodes."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.kops import ManagedGroup, Role
from core.ledger import Backoff, Compensation, Donor, DonorState, Ledger
from core.model import NodeRecord
from core.settings import ReplenisherSettings
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.decide.builder import Plan
from lambdas.replenisher.plan import SetCapacity, WriteLedger
from lambdas.replenisher.world import Group, Instance, World

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


A, B = "nodes-us-east-1a", "nodes-us-east-1b"


def recovering(healthy_since: datetime, backoff: Backoff | None = None) -> World:
    """``A`` (3 Ready nodes) compensated by one instance in its sibling ``B`` (raised 3 -> 4, MaxSize 6), healthy
    since ``healthy_since``: the recovery hold's world (``decide.recover``)."""
    a = group(A, "us-east-1a", 3, ids("a", 3))
    b_ids = ids("b", 4)
    b = group(B, "us-east-1b", 4, b_ids)
    donor = Donor(
        asg_name=B,
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=3,
        max_before=6,
        desired_target=4,
        max_target=6,
        raised_at=T0,
        baseline_ids=tuple(b_ids[:3]),
        instance_ids=(b_ids[3],),
    )
    comp = Compensation(pool="nodes", started_at=T0, donors={B: donor}, owed=1, healthy_since=healthy_since)
    ledger = Ledger(asg_name=A, backoff=backoff or Backoff(), compensation=comp)
    return World(groups={A: a, B: b}, ledgers={A: ledger}, nodes=nodes_for(a, b), membership_confirmed=True)


def applied(world: World, plan: Plan, refused: Collection[str] = ()) -> World:
    """``world`` as the next invocation reads it after ``plan``: every ledger as last written, every resize done but
    those of the groups in ``refused`` (Auto Scaling refused them). Instances are unchanged (no terminate applied)."""
    ledgers = dict(world.ledgers)
    groups = dict(world.groups)
    for action in plan.actions:
        if isinstance(action, WriteLedger):
            ledgers[action.ledger.asg_name] = action.ledger.model_copy(
                update={"version": (action.expected_version or 0) + 1}
            )
        elif isinstance(action, SetCapacity) and action.asg_name not in refused:
            g = groups[action.asg_name]
            groups[action.asg_name] = replace(
                g,
                desired=g.desired if action.desired is None else action.desired,
                max_size=g.max_size if action.max_size is None else action.max_size,
            )
    return replace(world, groups=groups, ledgers=ledgers)
