"""``DETACH#`` items: the intent is recorded once (moto's DynamoDB)."""

from core.detach import DetachState


def test_detach_intent_is_recorded_once(store):
    assert store.record_detach("i-0123456789abcdef0", "nodes-a", "spot", ttl_seconds=3600) is True
    assert store.record_detach("i-0123456789abcdef0", "nodes-a", "spot", ttl_seconds=3600) is False
    store.mark_detached("i-0123456789abcdef0", DetachState.DETACHED)
    assert store.get_detach("i-0123456789abcdef0")["state"] == "detached"
