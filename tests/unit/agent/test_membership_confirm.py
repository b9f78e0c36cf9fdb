"""The membership reporter between two lists: the watch keeps its view, ``confirm`` writes the mark and only the items
whose refresh or group recheck came due, and the loop lists every ``relist_seconds`` (moto's DynamoDB and Auto
Scaling, nodes in memory)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from adapters.aws.autoscaling import AutoScaling
from adapters.dynamo.nodes import JOURNAL_CHANGES, mark_changes
from adapters.dynamo.store import Store
from agent import membership
from agent.asglookup import AsgLookup
from agent.kube.views import NodeEvent, NodeView
from agent.membership import MembershipReporter
from core.exceptions import SettingsError
from core.model import NodeRecord
from core.settings import AgentSettings
from tests.unit.agent.membership_world import (
    CLUSTER,
    NOW,
    Aws,
    CountingTable,
    MemoryNodes,
    cluster_nodes,
    node_items,
    node_puts,
)


def reporter_on(
    aws: Aws, nodes: list[NodeView], clock: list[Any], monotonic: list[float], relist: float = 600
) -> tuple[MembershipReporter, CountingTable, MemoryNodes]:
    table = CountingTable(aws.session.resource("dynamodb").Table("node-manager-state"))
    source = MemoryNodes(nodes)
    reporter = MembershipReporter(
        source,
        Store(table, CLUSTER),
        AsgLookup(AutoScaling(aws.autoscaling), clock=lambda: monotonic[0]),
        60,
        600,
        clock=lambda: clock[0],
        relist_seconds=relist,
    )
    return reporter, table, source


def advance(clock: list[Any], monotonic: list[float], seconds: float) -> None:
    clock[0] += timedelta(seconds=seconds)
    monotonic[0] += seconds


def test_a_steady_confirmation_lists_no_node_and_writes_only_the_mark(aws: Aws) -> None:
    clock, monotonic = [NOW], [0.0]
    reporter, table, source = reporter_on(aws, cluster_nodes(aws), clock, monotonic)
    reporter.resync()
    table.puts.clear()

    advance(clock, monotonic, 60)
    reporter.confirm()
    assert source.lists == 1
    assert table.puts == ["MEMBERSHIP"]
    assert aws.store.membership_mark() == clock[0]
    mark = (
        aws.session.resource("dynamodb")
        .Table("node-manager-state")
        .get_item(Key={"pk": f"CLUSTER#{CLUSTER}#AGENT", "sk": "MEMBERSHIP"})["Item"]
    )
    assert mark["nodes"] == len(aws.instances)


def test_confirmations_alone_keep_every_item_written_before_its_ttl_lapses(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock, monotonic = [NOW], [0.0]
    reporter, table, source = reporter_on(aws, nodes, clock, monotonic, relist=86400)
    reporter.resync()
    for _ in range(30):  # 30 confirmations of 60 s: three TTLs of 600 s, and no list
        advance(clock, monotonic, 60)
        reporter.confirm()
        for instance_id, item in node_items(aws.store).items():
            assert item["expires_at"] > int(clock[0].timestamp()) + 60, instance_id
    assert source.lists == 1
    refreshes = node_puts(table)
    assert len(nodes) * 3 <= len(refreshes) < len(nodes) * 30 / 3  # each about every 4-8 minutes, not every minute


def test_a_watch_change_between_lists_is_kept_and_refreshed_by_confirmations(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock, monotonic = [NOW], [0.0]
    reporter, table, source = reporter_on(aws, nodes, clock, monotonic, relist=86400)
    reporter.resync()
    cordoned = NodeView(**{**nodes[1].__dict__, "unschedulable": True})
    advance(clock, monotonic, 5)
    source.watches = [[NodeEvent(type="MODIFIED", node=cordoned, resource_version="300")]]
    assert reporter.follow("101", 60) == "300"
    table.puts.clear()
    for _ in range(20):  # past the item's refresh: written again as the watch left it, never as the list had it
        advance(clock, monotonic, 60)
        reporter.confirm()
    instance_id = str(cordoned.instance_id)
    assert f"NODE#{instance_id}" in node_puts(table)
    assert node_items(aws.store)[instance_id]["unschedulable"] is True
    assert source.lists == 1


def test_a_node_whose_instance_left_its_group_is_rewritten_when_its_recheck_comes_due(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock, monotonic = [NOW], [0.0]
    reporter, _, source = reporter_on(aws, nodes, clock, monotonic, relist=86400)
    reporter.resync()
    leaving = next(n for n in nodes if "nodes" in aws.instances[str(n.instance_id)][1])
    instance_id = str(leaving.instance_id)
    group = aws.instances[instance_id][1]
    aws.autoscaling.real.detach_instances(
        InstanceIds=[instance_id], AutoScalingGroupName=group, ShouldDecrementDesiredCapacity=False
    )
    calls = len(aws.autoscaling.calls)
    advance(clock, monotonic, 60)
    reporter.confirm()
    assert len(aws.autoscaling.calls) == calls  # nobody's recheck is due yet (5-10 minutes after the list)
    assert node_items(aws.store)[instance_id]["asg_name"] == group
    for _ in range(10):
        advance(clock, monotonic, 60)
        reporter.confirm()
    assert node_items(aws.store)[instance_id].get("asg_name") is None  # written without a group
    assert source.lists == 1
    assert sum(aws.autoscaling.calls[calls:]) == len(aws.instances)  # each instance asked again once, no more


class ClockedNodes(MemoryNodes):
    """Nodes whose watch lasts its whole timeout on a fake monotonic clock, ``watches`` of them, then stops the
    loop."""

    def __init__(self, nodes: list[NodeView], monotonic: list[float], watches: int, stop: threading.Event) -> None:
        super().__init__(nodes)
        self.monotonic = monotonic
        self.left = watches
        self.stop = stop

    def watch_nodes(self, resource_version: str, timeout_seconds: int) -> list[NodeEvent]:
        self.monotonic[0] += timeout_seconds
        self.left -= 1
        if self.left <= 0:
            self.stop.set()
        return []


def test_the_loop_confirms_every_resync_and_lists_every_relist(aws: Aws) -> None:
    monotonic = [0.0]
    stop = threading.Event()
    source = ClockedNodes(cluster_nodes(aws), monotonic, watches=30, stop=stop)  # 30 minutes of watches
    table = CountingTable(aws.session.resource("dynamodb").Table("node-manager-state"))
    reporter = MembershipReporter(
        source, Store(table, CLUSTER), AsgLookup(AutoScaling(aws.autoscaling)), 60, 600, relist_seconds=600
    )
    reporter.run(stop, clock=lambda: monotonic[0])
    assert source.lists == 3  # at 0, 10 and 20 minutes
    assert table.puts.count("MEMBERSHIP") == 30  # a mark every minute: a list's or a confirmation's


def test_relisting_more_often_than_the_mark_is_refused() -> None:
    base = {"CLUSTER_NAME": CLUSTER, "TABLE_NAME": "t", "QUEUE_URL": "http://q"}
    with pytest.raises(SettingsError, match="MEMBERSHIP_RELIST_SECONDS"):
        AgentSettings.from_env({**base, "MEMBERSHIP_RESYNC_SECONDS": "60", "MEMBERSHIP_RELIST_SECONDS": "30"})
    assert AgentSettings.from_env(base).membership_relist_seconds == 600
    slow = AgentSettings.from_env({**base, "MEMBERSHIP_RESYNC_SECONDS": "900"})  # a setting kept from before
    assert MembershipReporter.from_settings(slow, MemoryNodes([]), None, None).relist_seconds == 900  # type: ignore[arg-type]


class BoundedTable(CountingTable):
    """The moto table; a PutItem past ``limit`` raises (a write loop fails the test instead of hanging it)."""

    def __init__(self, real: Any, limit: int = 200) -> None:
        super().__init__(real)
        self.limit = limit

    def put_item(self, **kwargs: Any) -> Any:
        if len(self.puts) >= self.limit:
            raise AssertionError(f"more than {self.limit} PutItem calls: a write loop")
        return super().put_item(**kwargs)


def test_a_ttl_under_two_resyncs_refreshes_each_item_once_a_confirmation(aws: Aws) -> None:
    """A TTL shorter than two resyncs (valid: it only has to exceed one) makes every item due at each resync
    (``refresh_age_seconds`` 0): each is written once per confirmation, not again and again at the same instant
    (found by review: the item written now was due now again)."""
    nodes = cluster_nodes(aws)
    table = BoundedTable(aws.session.resource("dynamodb").Table("node-manager-state"))
    clock = [NOW]
    reporter = MembershipReporter(
        MemoryNodes(nodes),
        Store(table, CLUSTER),
        AsgLookup(AutoScaling(aws.autoscaling), clock=lambda: 0.0),
        60,
        100,
        clock=lambda: clock[0],
        relist_seconds=600,
    )
    reporter.resync()
    for _ in range(3):
        table.puts.clear()
        clock[0] += timedelta(seconds=60)
        reporter.confirm()
        assert sorted(table.puts) == sorted(["MEMBERSHIP", *(f"NODE#{n.instance_id}" for n in nodes)])


def test_a_new_term_after_a_published_version_never_repeats_it(aws: Aws) -> None:
    """Leadership lost and regained (or an error): the reporter reads the table again under a new term, so its first
    mark never repeats a version it published before another leader's term (found by review)."""
    clock, monotonic = [NOW], [0.0]
    reporter, _, _ = reporter_on(aws, cluster_nodes(aws), clock, monotonic)
    reporter.new_term()  # run()'s start: nothing published yet, the term stays
    reporter.resync()
    before = aws.store.get("MEMBERSHIP")["version"]
    reporter.new_term()
    advance(clock, monotonic, 60)
    reporter.resync()  # nothing changed in the cluster
    after = aws.store.get("MEMBERSHIP")["version"]
    assert after != before and after.endswith(":0")


def test_a_new_term_is_made_by_the_given_terms_and_keeps_the_reporters_asg_lookup(aws: Aws) -> None:
    """``terms`` makes every later term (the simulation passes a counter: no random term in a seeded run); an error's
    new term keeps the reporter and its ASG look-up (``run`` calls ``new_term`` on the same object), so the list
    after it asks AWS for no instance it already knows."""
    clock, monotonic = [NOW], [0.0]
    reporter, _, _ = reporter_on(aws, cluster_nodes(aws), clock, monotonic)
    made = iter(["first", "second", "third"])
    reporter = MembershipReporter(
        reporter.nodes,
        reporter.store,
        reporter.asgs,
        60,
        600,
        clock=lambda: clock[0],
        terms=lambda: next(made),
    )
    reporter.resync()
    assert str(aws.store.get("MEMBERSHIP")["version"]).startswith("first:")
    asked: list[list[str]] = []
    real = reporter.asgs.autoscaling.group_names
    reporter.asgs.autoscaling.group_names = lambda ids: asked.append(list(ids)) or real(ids)  # type: ignore[method-assign]
    reporter.new_term()
    advance(clock, monotonic, 60)
    reporter.resync()
    assert aws.store.get("MEMBERSHIP")["version"] == "second:0"
    assert all(not ids for ids in asked)


def test_the_mark_lists_the_last_changes_its_version_counts(aws: Aws) -> None:
    nodes = cluster_nodes(aws)
    clock, monotonic = [NOW], [0.0]
    reporter, _, _ = reporter_on(aws, nodes, clock, monotonic, relist=86400)
    reporter.resync()
    for step in range(1, 20):  # the watch cordons and uncordons nodes; then one goes
        advance(clock, monotonic, 10)
        target = nodes[step % len(nodes)]
        reporter.apply("MODIFIED", NodeView(**{**target.__dict__, "unschedulable": step // len(nodes) % 2 == 0}))
        assert mark_changes(aws.store.get("MEMBERSHIP"))[-1][0] == int(reporter.version.rpartition(":")[2])
    reporter.apply("DELETED", nodes[0])
    advance(clock, monotonic, 60)
    reporter.confirm()
    mark = aws.store.get("MEMBERSHIP")
    count = int(str(mark["version"]).rpartition(":")[2])
    changes = mark_changes(mark)
    assert count > JOURNAL_CHANGES and changes is not None
    assert [seq for seq, _ in changes] == list(range(count - JOURNAL_CHANGES + 1, count + 1))
    assert changes[-1] == (count, f"NODE#{nodes[0].instance_id}")


def test_a_new_term_compares_anew_only_the_nodes_whose_items_another_writer_changed(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an error the reporter reads the table again; a node whose item reads back as the reporter wrote it keeps
    what it was compared with (no record built for it), one whose item another writer changed or deleted meanwhile
    is compared with the item read, and written back."""
    nodes = cluster_nodes(aws)
    clock, monotonic = [NOW], [0.0]
    reporter, table, _ = reporter_on(aws, nodes, clock, monotonic)
    reporter.resync()
    changed, deleted, refreshed = (n.instance_id for n in nodes[:3])
    aws.store.put_node(NodeRecord(instance_id=changed, node_name="another-writer", reported_at=NOW), 600)
    aws.store.delete_node(deleted)
    item = node_items(aws.store)[refreshed]  # the same content, a later time: another leader refreshed it
    aws.store.put_node(NodeRecord.model_validate({**item, "reported_at": NOW + timedelta(seconds=30)}), 600)
    built: list[str] = []
    real = membership.node_record
    monkeypatch.setattr(membership, "node_record", lambda node, *a: built.append(node.name) or real(node, *a))
    reporter.new_term()
    advance(clock, monotonic, 60)
    table.puts.clear()
    reporter.resync()
    assert sorted(built) == sorted(n.name for n in nodes[:3])
    assert sorted(node_puts(table)) == sorted([f"NODE#{changed}", f"NODE#{deleted}"])
    items = node_items(aws.store)
    assert items[changed]["node_name"] == nodes[0].name and items[deleted]["node_name"] == nodes[1].name
    built.clear()
    advance(clock, monotonic, 60)
    reporter.resync()  # every basis made again: nothing built, nothing written
    assert built == [] and sorted(node_puts(table)) == sorted([f"NODE#{changed}", f"NODE#{deleted}"])


def test_lists_between_confirmations_write_each_item_once_when_its_refresh_comes_due(aws: Aws) -> None:
    # a list finds the items due as a confirmation does (the heap of due times), so neither skips nor repeats one
    nodes = cluster_nodes(aws)
    clock, monotonic = [NOW], [0.0]
    reporter, table, source = reporter_on(aws, nodes, clock, monotonic)
    reporter.resync()
    written: dict[str, list[float]] = {}
    for step in range(1, 31):  # 30 minutes, three TTLs of 600 s: a list every other minute, a confirmation between
        advance(clock, monotonic, 60)
        table.puts.clear()
        reporter.resync() if step % 2 else reporter.confirm()
        for sk in node_puts(table):
            written.setdefault(sk, []).append(monotonic[0])
        for instance_id, item in node_items(aws.store).items():
            assert item["expires_at"] > int(clock[0].timestamp()) + 60, instance_id
    assert source.lists == 16 and set(written) == {f"NODE#{n.instance_id}" for n in nodes}
    for sk, times in written.items():
        age = membership.refresh_age_seconds(sk.removeprefix("NODE#"), 600, 60)
        gaps = [later - earlier for earlier, later in zip([0.0, *times], times, strict=False)]
        assert all(age <= gap < age + 60 for gap in gaps), (sk, age, gaps)  # at the first minute it is due
