"""Membership: the pure mapping nodes + ASG map -> NODE# records, the ASG lookup on moto, and the reporter's writes
on moto's DynamoDB with nodes given in memory (the watch against a real apiserver is in
tests/integration/agent/test_agent.py)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.aws.autoscaling import AutoScaling
from adapters.dynamo.store import Store
from agent.asglookup import DESCRIBE_ASG_INSTANCES_MAX_IDS, AsgLookup
from agent.kube.views import NodeEvent, NodeView
from agent.membership import MembershipReporter
from agent.membership_records import (
    batches,
    due_at,
    instances_to_forget,
    membership_records,
    node_record,
    node_roles,
    refresh_age_seconds,
)
from core.model import NodeRecord, utcnow
from localworld.cluster import cluster_instances, create_kops_cluster

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


# -- pure ------------------------------------------------------------------------------------------------------


def test_a_node_named_by_private_dns_maps_to_its_instance_from_the_provider_id() -> None:
    record = node_record(
        node(
            "ip-10-0-1-17.ec2.internal",
            "i-0abc12345678def01",
            "us-east-1b",
            ready=True,
            unschedulable=True,
            labels={"node-role.kubernetes.io/node": "", "kops.k8s.io/instancegroup": "nodes-us-east-1b"},
        ),
        "nodes-us-east-1b.demo.k8s.local",
        NOW,
    )
    assert record == NodeRecord(
        instance_id="i-0abc12345678def01",
        node_name="ip-10-0-1-17.ec2.internal",
        availability_zone="us-east-1b",
        asg_name="nodes-us-east-1b.demo.k8s.local",
        ready=True,
        unschedulable=True,
        roles=["node"],
        instance_group="nodes-us-east-1b",
        reported_at=NOW,
    )


def test_a_node_named_by_instance_id_works_the_same() -> None:
    record = node_record(node("i-0abc12345678def01", "i-0abc12345678def01", ready=False), None, NOW)
    assert record is not None
    assert (record.instance_id, record.node_name, record.ready, record.asg_name) == (
        "i-0abc12345678def01",
        "i-0abc12345678def01",
        False,
        None,
    )


@pytest.mark.parametrize("provider_id", ["", "kind://docker/kind/kind-worker", "aws:///us-east-1a/not-an-instance"])
def test_a_node_without_an_aws_provider_id_has_no_record(provider_id: str) -> None:
    assert node_record(NodeView(name="n", provider_id=provider_id), "asg", NOW) is None


def test_roles_come_from_node_role_labels_and_the_legacy_kops_label() -> None:
    assert node_roles(
        {
            "node-role.kubernetes.io/control-plane": "",
            "node-role.kubernetes.io/master": "",
            "kubernetes.io/role": "master",
            "other": "x",
        }
    ) == ["control-plane", "master"]
    assert node_roles({"kubernetes.io/role": "node"}) == ["node"]
    assert node_roles({}) == [] and node_roles(None) == []


def test_records_for_every_aws_node_with_its_asg() -> None:
    nodes = [node("a", "i-0aaaaaaaaaaaaaaa1"), node("b", "i-0aaaaaaaaaaaaaaa2"), node("c", None)]
    records = membership_records(nodes, {"i-0aaaaaaaaaaaaaaa1": "asg-1"}, NOW)
    assert [(r.node_name, r.asg_name) for r in records] == [("a", "asg-1"), ("b", None)]


def test_instances_without_node_are_forgotten_unless_reported_after_the_list() -> None:
    before, after = NOW - timedelta(seconds=30), NOW + timedelta(seconds=1)
    recorded = {"i-1": before, "i-2": before, "i-3": before, "i-5": after}
    assert instances_to_forget(recorded, ["i-2", "i-4"], listed_at=NOW) == {"i-1", "i-3"}
    assert instances_to_forget({}, ["i-1"], listed_at=NOW) == set()


def test_batches_respect_the_api_limit() -> None:
    ids = [f"i-{n:017x}" for n in range(101)]
    parts = list(batches(ids, DESCRIBE_ASG_INSTANCES_MAX_IDS))
    assert [len(p) for p in parts] == [50, 50, 1]
    assert [i for p in parts for i in p] == ids
    assert list(batches([], 50)) == []


# -- on moto ---------------------------------------------------------------------------------------------------


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


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        create_kops_cluster(session, name=CLUSTER, nodes_per_az=1)  # 3 masters + 3 workers
        ec2 = session.client("ec2")
        instances = {}
        for inst in cluster_instances(ec2, CLUSTER):
            tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
            instances[inst["InstanceId"]] = (inst["Placement"]["AvailabilityZone"], tags["aws:autoscaling:groupName"])
        store = Store(session.resource("dynamodb").Table("node-manager-state"), CLUSTER)
        yield Aws(session, CountingAutoscaling(session.client("autoscaling")), store, instances)


def test_asg_lookup_batches_caches_and_refreshes(aws: Aws) -> None:
    lookup = AsgLookup(AutoScaling(aws.autoscaling))
    strangers = [f"i-0{n:016x}" for n in range(60)]  # not in any group
    ids = [*aws.instances, *strangers]
    found = lookup.resolve(ids)
    assert {i: found[i] for i in aws.instances} == {i: asg for i, (_, asg) in aws.instances.items()}
    assert all(found[i] is None for i in strangers)
    assert sorted(aws.autoscaling.calls) == [16, 50]

    lookup.resolve(ids[:10])
    assert len(aws.autoscaling.calls) == 2  # cached
    lookup.resolve(list(aws.instances), refresh=True)
    assert aws.autoscaling.calls[2:] == [len(aws.instances)]


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


@pytest.mark.parametrize("by_instance_id", [False, True])
def test_resync_writes_every_node_and_forgets_instances_without_one(aws: Aws, by_instance_id: bool) -> None:
    aws.store.put_node(
        NodeRecord(instance_id="i-0deadbeefdeadbeef", node_name="gone", reported_at=utcnow() - timedelta(minutes=1)),
        600,
    )
    nodes = cluster_nodes(aws, by_instance_id)
    reporter = MembershipReporter(MemoryNodes(nodes), aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 60, 600)
    assert reporter.resync() == "101"

    items = node_items(aws.store)
    assert set(items) == set(aws.instances)
    for instance_id, (az, asg) in aws.instances.items():
        assert items[instance_id]["asg_name"] == asg and items[instance_id]["availability_zone"] == az
        assert items[instance_id]["expires_at"] >= int(utcnow().timestamp()) + 590
    names = {items[i]["node_name"] for i in items}
    assert names == {n.name for n in nodes}


def test_watch_events_write_changes_and_delete_gone_nodes(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    source = MemoryNodes(nodes)
    clock_now = [NOW]
    reporter = MembershipReporter(
        source, aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 60, 600, clock=lambda: clock_now[0]
    )
    reporter.resync()
    first, second = nodes[0], nodes[1]
    before = node_items(aws.store)[second.instance_id]["reported_at"]

    clock_now[0] = NOW + timedelta(seconds=5)
    reporter.apply("MODIFIED", second)  # nothing changed but the heartbeat: no write
    assert node_items(aws.store)[second.instance_id]["reported_at"] == before
    cordoned = NodeView(**{**second.__dict__, "unschedulable": True, "ready": False})
    reporter.apply("MODIFIED", cordoned)
    item = node_items(aws.store)[second.instance_id]
    assert item["unschedulable"] is True and item["ready"] is False and item["reported_at"] != before

    reporter.apply("DELETED", first)
    assert first.instance_id not in node_items(aws.store)
    calls = len(aws.autoscaling.calls)
    reporter.apply("ADDED", first)  # back (a known instance: its ASG comes from the cache)
    assert node_items(aws.store)[first.instance_id]["asg_name"] == aws.instances[first.instance_id][1]
    assert len(aws.autoscaling.calls) == calls


def test_the_loop_lists_again_after_a_410_and_keeps_going(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    source = MemoryNodes(nodes)
    gone = nodes[0]
    source.watches = [
        [NodeEvent(type="ERROR", code=410)],
        [NodeEvent(type="DELETED", node=gone, resource_version="200")],
    ]
    source.nodes = nodes[1:]  # the node is gone by the time of the re-list too
    reporter = MembershipReporter(source, aws.store, AsgLookup(AutoScaling(aws.autoscaling)), 3600, 7200)
    stop = threading.Event()
    loop = threading.Thread(target=reporter.run, args=(stop,))
    loop.start()
    try:
        assert source.done.wait(10)
    finally:
        stop.set()
        loop.join(10)
    assert not loop.is_alive()
    assert source.lists == 2  # the first list, and again after the 410
    assert set(node_items(aws.store)) == {n.instance_id for n in nodes[1:]}


# -- only what changed is written ------------------------------------------------------------------------------


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


def test_an_unchanged_resync_writes_no_node_item_only_the_mark(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock = [NOW]
    reporter, table = counting_reporter(aws, nodes, clock)
    reporter.resync()
    assert sorted(node_puts(table)) == sorted(f"NODE#{i}" for i in aws.instances)
    table.puts.clear()

    clock[0] = NOW + timedelta(seconds=60)
    reporter.resync()
    assert node_puts(table) == []
    assert table.puts == ["MEMBERSHIP"]
    assert aws.store.membership_mark() == clock[0]


def test_a_new_leader_learns_the_items_from_the_table_and_writes_nothing_unchanged(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock = [NOW]
    first, _ = counting_reporter(aws, nodes, clock)
    first.resync()
    clock[0] = NOW + timedelta(seconds=30)
    second, table = counting_reporter(aws, nodes, clock)  # another replica, after a leader change
    second.resync()
    assert node_puts(table) == []


def test_a_changed_node_writes_exactly_its_item(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock = [NOW]
    reporter, table = counting_reporter(aws, nodes, clock)
    reporter.resync()
    table.puts.clear()

    changed = NodeView(**{**nodes[2].__dict__, "unschedulable": True})
    source = reporter.nodes
    assert isinstance(source, MemoryNodes)
    source.nodes = [*nodes[:2], changed, *nodes[3:]]
    clock[0] = NOW + timedelta(seconds=60)
    reporter.resync()
    assert node_puts(table) == [f"NODE#{changed.instance_id}"]
    assert node_items(aws.store)[str(changed.instance_id)]["unschedulable"] is True


def test_a_gone_node_deletes_exactly_its_item(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock = [NOW]
    reporter, table = counting_reporter(aws, nodes, clock)
    reporter.resync()
    source = reporter.nodes
    assert isinstance(source, MemoryNodes)
    source.nodes = nodes[1:]
    clock[0] = NOW + timedelta(seconds=60)
    table.puts.clear()
    reporter.resync()
    assert table.deletes == [f"NODE#{nodes[0].instance_id}"]
    assert node_puts(table) == []


def test_every_item_is_written_again_before_its_ttl_lapses(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock = [NOW]
    reporter, table = counting_reporter(aws, nodes, clock)
    reporter.resync()
    for step in range(1, 31):  # 30 resyncs of 60 s: three TTLs of 600 s
        clock[0] = NOW + timedelta(seconds=60 * step)
        reporter.resync()
        for instance_id, item in node_items(aws.store).items():
            # still alive at the next resync (it cannot be written before then)
            assert item["expires_at"] > int(clock[0].timestamp()) + 60, instance_id
    refreshes = node_puts(table)
    assert len(refreshes) < len(nodes) * 30 / 3  # about one write per item per 4-8 minutes, not one a minute


def test_refreshes_of_items_written_together_spread_over_several_resyncs() -> None:
    ids = [f"i-0{n:016x}" for n in range(200)]
    ages = [refresh_age_seconds(i, 600, 60) for i in ids]
    assert all(240 <= age < 480 for age in ages)
    rounds = {int(age // 60) for age in ages}  # the resync (of 60 s) in which each becomes due
    assert rounds == {4, 5, 6, 7}
    assert refresh_age_seconds(ids[0], 100, 60) == 0  # a TTL under two resyncs: written every resync


def test_the_mark_keeps_unchanged_records_fresh_for_the_lambdas(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock = [NOW]
    reporter, _ = counting_reporter(aws, nodes, clock)
    reporter.resync()
    later = NOW + timedelta(seconds=700)  # longer than MEMBERSHIP_MAX_AGE_SECONDS (600) after the items' writes
    assert aws.store.list_nodes(600, now=later) == []
    clock[0] = NOW + timedelta(seconds=200)  # before any item is due for its refresh (at 240 s or later)
    reporter.resync()  # nothing changed: no NODE# write, only the mark
    assert all(NodeRecord.model_validate(item).reported_at == NOW for item in node_items(aws.store).values())
    assert {r.instance_id for r in aws.store.list_nodes(600, now=later)} == set(aws.instances)
    some = next(iter(aws.instances))
    assert aws.store.get_node(some, 600, now=later) is not None
    assert aws.store.get_node(some, 600, now=NOW + timedelta(seconds=850)) is None  # the mark too is old by then


def test_a_resync_after_a_watch_write_compares_with_the_item_the_watch_wrote(aws: Aws) -> None:
    """The resync's memory of what it compared is dropped when the watch writes the item: a node back as it was at
    the last resync is written again (its item says otherwise now), not skipped as unchanged."""
    nodes = cluster_nodes(aws)
    clock = [NOW]
    reporter, table = counting_reporter(aws, nodes, clock)
    reporter.resync()
    cordoned = NodeView(**{**nodes[1].__dict__, "unschedulable": True})
    clock[0] = NOW + timedelta(seconds=5)
    reporter.apply("MODIFIED", cordoned)
    assert node_items(aws.store)[str(cordoned.instance_id)]["unschedulable"] is True
    table.puts.clear()

    clock[0] = NOW + timedelta(seconds=60)
    reporter.resync()  # the list still has the uncordoned view the last resync compared
    assert node_puts(table) == [f"NODE#{nodes[1].instance_id}"]
    assert node_items(aws.store)[str(nodes[1].instance_id)]["unschedulable"] is False


@pytest.mark.parametrize("seed", range(4))
def test_due_at_is_the_first_instant_refresh_due_says_due(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        reported = NOW + timedelta(microseconds=rng.randrange(10**12))
        age = rng.choice([0.0, rng.uniform(0, 86400), rng.randrange(86400) + rng.randrange(10**6) / 1e6])
        due = due_at(reported, age)
        for now in (due - timedelta(microseconds=1), due, due + timedelta(microseconds=1)):
            assert ((now - reported).total_seconds() >= age) == (now >= due)


def mark_version(store: Store) -> Any:
    mark = store.get("MEMBERSHIP", consistent=True)
    assert mark is not None
    return mark.get("version")


def test_the_marks_version_changes_with_every_changed_record_and_only_then(aws: Aws) -> None:
    """The mark carries ``<term>:<changes>``: an unchanged resync and a refresh of unchanged items before their TTL
    keep it; a changed record, a new one and a deleted one each change it (a Lambda that finds it unchanged answers
    the records it read at that version, ``adapters.dynamo.nodes.read_membership``)."""
    nodes = cluster_nodes(aws)
    clock = [NOW]
    reporter, table = counting_reporter(aws, nodes, clock)
    source = reporter.nodes
    assert isinstance(source, MemoryNodes)
    reporter.resync()
    first = mark_version(aws.store)
    assert first == reporter.version
    clock[0] = NOW + timedelta(seconds=60)
    reporter.resync()
    assert mark_version(aws.store) == first
    table.puts.clear()
    for step in range(2, 9):  # past every item's refresh age (240-480 s at a TTL of 600 s)
        clock[0] = NOW + timedelta(seconds=60 * step)
        reporter.resync()
    assert sorted(set(node_puts(table))) == sorted(f"NODE#{i}" for i in aws.instances)  # all refreshed
    assert mark_version(aws.store) == first

    versions = []
    for step, listed in enumerate(
        ([NodeView(**{**nodes[0].__dict__, "unschedulable": True}), *nodes[1:]], nodes[1:], nodes), start=9
    ):  # cordoned, deleted (an item written before the list), added back
        source.nodes = listed
        clock[0] = NOW + timedelta(seconds=60 * step)
        reporter.resync()
        versions.append(mark_version(aws.store))
    cordoned, deleted, added = versions
    assert len({first, cordoned, deleted, added}) == 4 and added == reporter.version


def test_a_watch_change_sets_the_marks_version_before_its_node_ready_report(aws: Aws) -> None:
    """A node the watch finds Ready: its item is written, then the mark's version (its time left as it was), and only
    then is it told to ``on_ready``, so a refresh run the "Node Ready" report wakes reads the new item; a resync tells
    its Ready nodes after its mark likewise."""
    nodes = [NodeView(**{**n.__dict__, "ready": False}) for n in cluster_nodes(aws)]
    clock = [NOW]
    reporter, _ = counting_reporter(aws, nodes, clock)
    told: list[tuple[str, Any, Any]] = []
    reporter.on_ready = lambda record: told.append((record.instance_id, mark_version(aws.store), reporter.version))
    reporter.resync()
    before = mark_version(aws.store)
    assert told == []

    clock[0] = NOW + timedelta(seconds=5)
    ready = NodeView(**{**nodes[0].__dict__, "ready": True})
    reporter.apply("MODIFIED", ready)
    assert told == [(ready.instance_id, reporter.version, reporter.version)] and reporter.version != before
    assert aws.store.membership_mark() == NOW  # the watch does not confirm the whole membership

    source = reporter.nodes
    assert isinstance(source, MemoryNodes)
    source.nodes = [ready, NodeView(**{**nodes[1].__dict__, "ready": True}), *nodes[2:]]
    clock[0] = NOW + timedelta(seconds=60)
    reporter.resync()
    assert told[1:] == [(str(nodes[1].instance_id), reporter.version, reporter.version)]


def test_a_new_reporter_never_repeats_a_version(aws: Aws) -> None:
    """Each reporter (a restart, a new leader) starts a term of its own: the versions of two never meet, even with
    the same count of changes."""
    nodes = cluster_nodes(aws)
    clock = [NOW]
    first, _ = counting_reporter(aws, nodes, clock)
    second, _ = counting_reporter(aws, nodes, clock)
    assert first.version != second.version
    assert first.version.endswith(":0") and second.version.endswith(":0")


def test_a_watch_change_before_any_mark_writes_no_mark(aws: Aws) -> None:
    """The version goes only onto a mark a resync wrote (``set_membership_version`` is conditional): the watch alone
    never makes a mark that would confirm the membership."""
    nodes = cluster_nodes(aws)
    reporter, _ = counting_reporter(aws, nodes, [NOW])
    reporter.apply("MODIFIED", NodeView(**{**nodes[0].__dict__, "unschedulable": True}))
    assert aws.store.get("MEMBERSHIP", consistent=True) is None
    assert node_items(aws.store)[str(nodes[0].instance_id)]["unschedulable"] is True
