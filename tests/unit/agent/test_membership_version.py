"""The ``MEMBERSHIP`` mark's version (``<term>:<changes>``): changed by every changed record and only then, set by a
watch change before its "Node Ready" report, never repeated by a new reporter, never written without a resync's mark."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent.kube.views import NodeView
from tests.unit.agent.membership_world import (
    NOW,
    Aws,
    MemoryNodes,
    cluster_nodes,
    counting_reporter,
    mark_version,
    node_items,
    node_puts,
)


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
