"""``NODE#`` items: readers judge freshness themselves (moto's DynamoDB)."""

from collections import deque
from datetime import timedelta

from adapters.dynamo.nodes import mark_changes
from core.model import NodeRecord, utcnow


def test_membership_freshness_is_checked_by_the_reader(store):
    now = utcnow()
    store.put_node(NodeRecord(instance_id="i-0123456789abcdef0", node_name="a", reported_at=now), ttl_seconds=600)
    store.put_node(
        NodeRecord(instance_id="i-0123456789abcdef1", node_name="b", reported_at=now - timedelta(hours=2)),
        ttl_seconds=600,
    )
    # The stale item is still in the table (TTL deletion lags), but readers skip it.
    assert store.get("NODE#i-0123456789abcdef1") is not None
    assert [r.node_name for r in store.list_nodes(max_age_seconds=600, now=now)] == ["a"]
    assert store.get_node("i-0123456789abcdef1", max_age_seconds=600, now=now) is None
    assert store.get_node("i-0123456789abcdef0", max_age_seconds=600, now=now).node_name == "a"


def test_the_mark_lists_the_changes_it_is_given_each_time_it_is_written(store):
    """Each write of the mark stores the changes it was given, by put or by update, whatever the write before
    stored (a journal written again unchanged every minute, then a longer one)."""
    now = utcnow()
    first = deque([(1, "NODE#i-1"), (2, "NODE#i-2")], maxlen=16)
    later = deque([*first, (3, "NODE#i-1")], maxlen=16)
    for version, changes in [("t:2", first), ("t:2", first), ("t:3", later), ("t:2", first), ("t:3", later)]:
        store.put_membership_mark(now, 2, 600, version=version, changes=changes)
        assert mark_changes(store.get("MEMBERSHIP")) == list(changes)
        assert store.get("MEMBERSHIP")["version"] == version
    assert store.set_membership_version("t:2", changes=first)
    assert mark_changes(store.get("MEMBERSHIP")) == list(first)
    assert store.set_membership_version("t:3", changes=later)
    assert mark_changes(store.get("MEMBERSHIP")) == list(later)
    store.put_membership_mark(now, 2, 600, version="t:0", changes=deque())
    assert mark_changes(store.get("MEMBERSHIP")) == []
