"""Only what changed is written: an unchanged resync writes only the ``MEMBERSHIP`` mark, a changed or gone node
exactly its item, a new leader learns the items from the table; every item is written again before its TTL lapses,
and the mark keeps unchanged records fresh for the Lambdas."""

from __future__ import annotations

from datetime import timedelta

from agent.kube.views import CORDON_ANNOTATION, ENDING_ANNOTATION, NodeView
from core.model import NodeRecord
from tests.unit.agent.membership_world import (
    NOW,
    Aws,
    MemoryNodes,
    cluster_nodes,
    counting_reporter,
    node_items,
    node_puts,
)


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


def test_a_node_marked_ending_after_its_cordon_writes_its_item_ending(aws: Aws) -> None:
    """A drain already cordoned the node (a refresh's) when a Spot warning tightens it and adds only the
    ``instance-ending`` annotation: the item is written again, ``ending`` true, so a refresh stops counting it."""
    nodes = cluster_nodes(aws)
    nodes[2] = NodeView(**{**nodes[2].__dict__, "unschedulable": True, "annotations": {CORDON_ANNOTATION: "r-1"}})
    clock = [NOW]
    reporter, table = counting_reporter(aws, nodes, clock)
    reporter.resync()
    assert node_items(aws.store)[str(nodes[2].instance_id)]["ending"] is False
    table.puts.clear()

    marked = {CORDON_ANNOTATION: "spot-1", ENDING_ANNOTATION: "spot-1"}
    ending = NodeView(**{**nodes[2].__dict__, "annotations": marked})
    source = reporter.nodes
    assert isinstance(source, MemoryNodes)
    source.nodes = [*nodes[:2], ending, *nodes[3:]]
    clock[0] = NOW + timedelta(seconds=60)
    reporter.resync()
    assert node_puts(table) == [f"NODE#{ending.instance_id}"]
    record = NodeRecord.model_validate(node_items(aws.store)[str(ending.instance_id)])
    assert record.ready and record.ending and not record.serving


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
    assert reporter.asgs.cached() == len(nodes) - 1  # its group forgotten too (``retain``): asked anew if it is back
    calls = len(aws.autoscaling.calls)
    reporter.asgs.resolve([str(nodes[0].instance_id)])
    assert len(aws.autoscaling.calls) == calls + 1


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
