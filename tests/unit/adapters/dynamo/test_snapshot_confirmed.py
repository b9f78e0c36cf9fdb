"""``Snapshot.membership_confirmed``: a fresh ``MEMBERSHIP`` mark makes the read the agent's whole list only when
every ``NODE#`` item it returned was readable. An unreadable item (left out of ``nodes``: an agent of a newer schema, a
hand edit) is a node the list does not show, so absence from that list says nothing (``decide.undo.undoing`` would
terminate such a spare undrained)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from adapters.dynamo.node_memo import NodeRecordMemo
from adapters.dynamo.nodes import node_sk
from adapters.dynamo.snapshot import read_snapshot
from adapters.dynamo.store import Store
from core.model import NodeRecord

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def test_a_fresh_mark_over_an_unreadable_item_confirms_nothing(store: Store) -> None:
    memo = NodeRecordMemo()
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=True, reported_at=NOW), ttl_seconds=600)
    store.put(node_sk("i-2"), {"instance_id": "i-2", "node_name": "n2", "ready": "maybe", "reported_at": "soon"})
    store.put_membership_mark(NOW, nodes=2, ttl_seconds=600, version="t:1")
    first = read_snapshot(store, max_age_seconds=600, now=NOW, memo=memo)
    assert [n.instance_id for n in first.nodes] == ["i-1"]  # i-2 left out: unreadable
    assert not first.membership_confirmed
    again = read_snapshot(store, max_age_seconds=600, now=NOW + timedelta(seconds=10), memo=memo)  # reused read
    assert not again.membership_confirmed


def test_a_fresh_mark_over_readable_items_confirms_them(store: Store) -> None:
    memo = NodeRecordMemo()
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=True, reported_at=NOW), ttl_seconds=600)
    store.put_membership_mark(NOW, nodes=1, ttl_seconds=600, version="t:1")
    assert read_snapshot(store, max_age_seconds=600, now=NOW, memo=memo).membership_confirmed
    assert read_snapshot(store, max_age_seconds=600, now=NOW + timedelta(seconds=10), memo=memo).membership_confirmed
    assert not read_snapshot(store, max_age_seconds=600, now=NOW + timedelta(hours=1), memo=memo).membership_confirmed
