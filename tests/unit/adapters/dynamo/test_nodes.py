"""``NODE#`` items: readers judge freshness themselves (moto's DynamoDB)."""

from datetime import timedelta

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
