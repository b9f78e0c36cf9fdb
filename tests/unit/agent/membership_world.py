"""The membership reporter's test world: nodes given in memory (``MemoryNodes``, a scripted watch) and moto's Auto
Scaling and DynamoDB behind counting wrappers (``Aws``; the fixture ``aws`` of this directory's ``conftest.py`` makes
one), shared by the membership, ASG lookup, Node Ready and partition tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from adapters.aws.autoscaling import AutoScaling
from adapters.dynamo.store import Store
from agent.asglookup import AsgLookup
from agent.kube.views import NodeEvent, NodeView
from agent.membership import MembershipReporter
from core.model import utcnow

NOW = utcnow()
CLUSTER = "demo.k8s.local"


def node(
    name: str,
    instance_id: str | None = "i-0aaaaaaaaaaaaaaa1",
    az: str = "us-east-1a",
    ready: bool = True,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
    rv: str = "1",
) -> NodeView:
    return NodeView(
        name=name,
        resource_version=rv,
        provider_id=f"aws:///{az}/{instance_id}" if instance_id else "",
        unschedulable=unschedulable,
        labels=labels or {},
        ready=ready,
    )


class CountingAutoscaling:
    """The moto autoscaling client, counting DescribeAutoScalingInstances calls and their sizes."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[int] = []

    def describe_auto_scaling_instances(self, **kwargs: Any) -> Any:
        self.calls.append(len(kwargs["InstanceIds"]))
        return self.real.describe_auto_scaling_instances(**kwargs)


@dataclass
class Aws:
    session: Any
    autoscaling: CountingAutoscaling
    store: Store
    instances: dict[str, tuple[str, str]]  # instance id -> (az, asg)


class MemoryNodes:
    """Nodes held in memory, with a scripted watch (each ``watch_nodes`` call yields the next batch of events)."""

    def __init__(self, nodes: list[NodeView]) -> None:
        self.nodes = list(nodes)
        self.watches: list[list[NodeEvent]] = []
        self.lists = 0
        self.done = threading.Event()

    def list_node_pages(self, page_size: int | None = None) -> Iterator[tuple[list[NodeView], str]]:
        self.lists += 1
        nodes = list(self.nodes)
        size = page_size or 2
        for start in range(0, max(len(nodes), 1), size):
            yield nodes[start : start + size], str(100 + self.lists)

    def watch_nodes(self, resource_version: str, timeout_seconds: int) -> list[NodeEvent]:
        if not self.watches:
            self.done.set()
            return []
        return self.watches.pop(0)


def cluster_nodes(aws: Aws, by_instance_id: bool = False) -> list[NodeView]:
    return [
        node(
            iid if by_instance_id else f"ip-10-0-{n}-1.ec2.internal",
            iid,
            az,
            labels={"kops.k8s.io/instancegroup": asg.split(".")[0]},
        )
        for n, (iid, (az, asg)) in enumerate(sorted(aws.instances.items()))
    ]


def node_items(store: Store) -> dict[str, dict[str, Any]]:
    return {item["instance_id"]: item for item in store.query_prefix("NODE#", consistent=True)}


class CountingTable:
    """The moto table, recording the sort key of every PutItem and DeleteItem."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.puts: list[str] = []
        self.deletes: list[str] = []

    def put_item(self, **kwargs: Any) -> Any:
        self.puts.append(kwargs["Item"]["sk"])
        return self.real.put_item(**kwargs)

    def delete_item(self, **kwargs: Any) -> Any:
        self.deletes.append(kwargs["Key"]["sk"])
        return self.real.delete_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def counting_reporter(aws: Aws, nodes: list[NodeView], clock: list[Any]) -> tuple[MembershipReporter, CountingTable]:
    table = CountingTable(aws.session.resource("dynamodb").Table("node-manager-state"))
    store = Store(table, CLUSTER)
    reporter = MembershipReporter(
        MemoryNodes(nodes), store, AsgLookup(AutoScaling(aws.autoscaling)), 60, 600, clock=lambda: clock[0]
    )
    return reporter, table


def node_puts(table: CountingTable) -> list[str]:
    return [sk for sk in table.puts if sk.startswith("NODE#")]


def mark_version(store: Store) -> Any:
    mark = store.get("MEMBERSHIP", consistent=True)
    assert mark is not None
    return mark.get("version")
